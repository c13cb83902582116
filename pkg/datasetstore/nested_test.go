package datasetstore

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
)

// doc is a LangChain document: page_content and a metadata object.
type doc struct {
	PageContent string `json:"page_content" parquet:"page_content"`
	Metadata    struct {
		CustomerID string `json:"customer_id" parquet:"customer_id"`
		SessionID  string `json:"session_id" parquet:"session_id"`
	} `json:"metadata" parquet:"metadata"`
	CustomerID string `json:"customer_id,omitempty" parquet:"customer_id"` // not a locator here
}

func newDoc(text, customer, session, top string) doc {
	d := doc{PageContent: text, CustomerID: top}
	d.Metadata.CustomerID, d.Metadata.SessionID = customer, session
	return d
}

// TestNestedColumns: dotted locators (metadata.customer_id) match nested fields in JSONL,
// JSON arrays and Parquet groups; the same id at the top level, under another nested name,
// or as a prefix of another id does not match.
func TestNestedColumns(t *testing.T) {
	ctx := context.Background()
	docs := []doc{
		newDoc("mine", "cust-1", "s-9", ""),
		newDoc("theirs, mine at the top", "cust-2", "s-2", "cust-1"),
		newDoc("legacy session of mine", "", "sess-cust-1", ""),
		newDoc("longer id", "cust-10", "s-10", ""),
	}
	kept := []doc{docs[1], docs[3]}
	jsonlOf := func(ds []doc) []byte {
		var b bytes.Buffer
		for _, d := range ds {
			_ = json.NewEncoder(&b).Encode(d)
		}
		return b.Bytes()
	}
	decodeJSONL := func(t *testing.T, data []byte) (out []doc) {
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			var d doc
			if err := dec.Decode(&d); err == io.EOF {
				return out
			} else if err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	arrayOf := func(ds []doc) []byte { b, _ := json.MarshalIndent(ds, "", " "); return b }
	decodeArray := func(t *testing.T, data []byte) (out []doc) {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	parquetOf := func(ds []doc) []byte {
		var b bytes.Buffer
		w := parquet.NewGenericWriter[doc](&b)
		_, _ = w.Write(ds)
		_ = w.Close()
		return b.Bytes()
	}
	decodeParquet := func(t *testing.T, data []byte) []doc {
		out, err := parquet.Read[doc](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct {
		key    string
		encode func([]doc) []byte
		decode func(*testing.T, []byte) []doc
	}{
		{"acme/docs.jsonl", jsonlOf, decodeJSONL},
		{"acme/docs.json", arrayOf, decodeArray},
		{"acme/docs.parquet", parquetOf, decodeParquet},
	} {
		t.Run(tc.key, func(t *testing.T) {
			c := newS3Client(t)
			w := s3World{c}
			w.put(t, tc.key, tc.encode(docs))
			st := testInventory("s3://" + testBucket + "/{tenant}/")
			st.Locators = st.Locators.With("subject_columns", []string{"metadata.customer_id"}).With("session_columns", []string{"metadata.session_id"})
			store := New(c, "")
			victim := deletiontest.NewSubject("acme", "cust-1")
			res, err := store.Erase(ctx, st, victim)
			if err != nil || res.Deleted() != 2 {
				t.Fatalf("Erase = %+v, %v; want 2 rows", res, err)
			}
			if got := tc.decode(t, w.versions(t, tc.key)[0]); !slices.Equal(got, kept) {
				t.Errorf("left %+v, want %+v", got, kept)
			}
			// The id at the top level is no locator but a mention: the default policy leaves
			// it and reports it.
			if v, err := store.Verify(ctx, st, victim); err != nil || v.Remaining != 0 || v.Mentions != 1 {
				t.Errorf("Verify = %+v, %v; want nothing remaining and one mention", v, err)
			}
		})
	}
}
