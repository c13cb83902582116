package datasetstore

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// mentionCase is one dataset where the subject's id survives outside the named columns.
type mentionCase struct {
	key        string
	data       []byte
	redacted   []byte // the object after redaction
	erased     []byte // the object after erasure of the mentioning rows
	mentioning int    // rows that mention the subject
}

func mentionCases(t *testing.T) []mentionCase {
	csvIn := "customer_id,session_id,notes\r\n" +
		"cust-1,s,mine\r\n" +
		"cust-2,s2,\"called back cust-1, twice\"\r\n" +
		"cust-3,s3,\"quoted \"\"x\"\", clean\"\r\n" +
		"cust-4,s4,cust-10 is someone else\r\n" +
		"cust-5,sess-cust-1:2,another session id extending the subject's\r\n"
	csvRed := "customer_id,session_id,notes\r\n" +
		"cust-2,s2,\"called back [erased], twice\"\r\n" +
		"cust-3,s3,\"quoted \"\"x\"\", clean\"\r\n" +
		"cust-4,s4,cust-10 is someone else\r\n" +
		"cust-5,sess-cust-1:2,another session id extending the subject's\r\n"
	csvErased := "customer_id,session_id,notes\r\n" +
		"cust-3,s3,\"quoted \"\"x\"\", clean\"\r\n" +
		"cust-4,s4,cust-10 is someone else\r\n" +
		"cust-5,sess-cust-1:2,another session id extending the subject's\r\n"
	jl := []string{
		`{"customer_id":"cust-1","text":"mine"}`,
		`{"customer_id":"cust-2", "meta":{"ref":{"owner":"cust-1"}},"text":"nested"}`,
		`{"customer_id":"cust-3","text":"Ticket from sess-cust-1: refund"}`,
		`{"customer_id":"cust-4","text":"clean \u00e9"}`,
		`{"customer_id":"cust-5","tags":["a","cust-1"]}`,
	}
	jlRed := []string{
		`{"customer_id":"cust-2", "meta":{"ref":{"owner":"[erased]"}},"text":"nested"}`,
		`{"customer_id":"cust-3","text":"Ticket from [erased]: refund"}`,
		jl[3],
		`{"customer_id":"cust-5","tags":["a","[erased]"]}`,
	}
	lines := func(ls ...string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }
	array := func(ls ...string) []byte { return []byte("[\n  " + strings.Join(ls, ",\n  ") + "\n]\n") }
	return []mentionCase{
		{"acme/eval/notes.csv", []byte(csvIn), []byte(csvRed), []byte(csvErased), 1},
		{"acme/eval/docs.jsonl", lines(jl...), lines(jlRed...), lines(jl[3]), 3},
		{"acme/eval/docs.json", array(jl...), array(jlRed...), array(jl[3]), 3},
	}
}

// TestMentionPolicies: a dataset whose other columns, nested fields or free text hold the
// subject's id ends FAILED under fail (unchanged), redacted under redact (every other byte
// kept) and without those rows under erase; each checked by re-reading the object with the
// AWS SDK.
func TestMentionPolicies(t *testing.T) {
	ctx := context.Background()
	for _, tc := range mentionCases(t) {
		for _, policy := range []string{"", MentionsFail, MentionsRedact, MentionsErase} {
			t.Run(tc.key+"/"+policy, func(t *testing.T) {
				c := newS3Client(t)
				w := s3World{c}
				w.put(t, tc.key, tc.data)
				w.put(t, "acme/eval/other.csv", []byte("customer_id,session_id,notes\nx,y,nothing here\n"))
				st := testInventory("s3://" + testBucket + "/{tenant}/")
				if policy != "" {
					st.Locators = st.Locators.With("mentions", policy)
				}
				store := New(c, "")
				victim := deletion.Subject{Tenant: "acme", ID: "cust-1", Hash: "h", Sessions: []string{"sess-cust-1"}}
				res, err := store.Erase(ctx, st, victim)
				if err != nil {
					t.Fatal(err)
				}
				v, err := store.Verify(ctx, st, victim)
				if err != nil {
					t.Fatal(err)
				}
				got := w.versions(t, tc.key)
				if string(w.versions(t, "acme/eval/other.csv")[0]) != "customer_id,session_id,notes\nx,y,nothing here\n" {
					t.Error("an object without mentions changed")
				}
				switch policy {
				case "", MentionsFail:
					if v.Mentions != int64(tc.mentioning) || v.Remaining != 0 || deletion.StatusOf(res, v) != event.StatusFailed {
						t.Errorf("verification %+v; want %d mentions and FAILED", v, tc.mentioning)
					}
					if len(v.UnexaminedItems) != 1 || !strings.Contains(v.UnexaminedItems[0], "{tenant}/*/*.") || strings.Contains(v.UnexaminedItems[0], "cust-1") {
						t.Errorf("items %q; want the object named, no identifier", v.UnexaminedItems)
					}
					if len(got) != 1 || bytes.Contains(got[0], []byte(`"cust-1","text":"mine"`)) || !bytes.Contains(got[0], []byte("cust-1")) {
						t.Errorf("object after the erasure:\n%s\nwant only the subject's own row gone", got)
					}
				case MentionsRedact, MentionsErase:
					want := tc.redacted
					if policy == MentionsErase {
						want = tc.erased
					}
					if len(got) != 1 || !bytes.Equal(got[0], want) {
						t.Errorf("object (%d versions):\n%s\nwant:\n%s", len(got), got, want)
					}
					if !v.Clean() || deletion.StatusOf(res, v) != event.StatusDeleted {
						t.Errorf("verification %+v, want clean", v)
					}
					if n := mentionCount(res); n != int64(tc.mentioning) {
						t.Errorf("reported %d mentions handled (%+v), want %d", n, res.Locations, tc.mentioning)
					}
				}
			})
		}
	}
}

func mentionCount(r deletion.Result) int64 {
	var n int64
	for _, l := range r.Locations {
		if strings.Contains(l.Location, "(mentions") {
			n += l.Deleted
		}
	}
	return n
}

// TestMentionsParquet: a Parquet dataset's free-text column is redacted value for value.
func TestMentionsParquet(t *testing.T) {
	type prow struct {
		Customer string `parquet:"customer_id"`
		Session  string `parquet:"session_id"`
		Notes    string `parquet:"notes"`
	}
	var b bytes.Buffer
	pw := parquet.NewGenericWriter[prow](&b)
	rows := []prow{{"cust-1", "s", "mine"}, {"cust-2", "s2", "about cust-1 again"}, {"cust-3", "sess-cust-1x", "clean"}}
	_, _ = pw.Write(rows)
	_ = pw.Close()
	c := newS3Client(t)
	w := s3World{c}
	w.put(t, "acme/p.parquet", b.Bytes())
	st := testInventory("s3://" + testBucket + "/{tenant}/").Locators
	inv := testInventory("s3://" + testBucket + "/{tenant}/")
	inv.Locators = st.With("mentions", MentionsRedact)
	store := New(c, "")
	victim := deletion.Subject{Tenant: "acme", ID: "cust-1", Hash: "h", Sessions: []string{"sess-cust-1"}}
	if _, err := store.Erase(context.Background(), inv, victim); err != nil {
		t.Fatal(err)
	}
	data := w.versions(t, "acme/p.parquet")[0]
	got, err := parquet.Read[prow](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	want := []prow{{"cust-2", "s2", "about [erased] again"}, rows[2]}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("rows %+v, want %+v", got, want)
	}
	if v, err := store.Verify(context.Background(), inv, victim); err != nil || !v.Clean() {
		t.Errorf("Verify = %+v, %v", v, err)
	}
}
