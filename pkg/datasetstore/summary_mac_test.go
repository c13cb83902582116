package datasetstore

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// TestTamperedSummaryIsNotTrusted: a stored summary that claims an object does not hold
// the subject while it does — altered, forged under another key, moved from another
// object, or of the format without a MAC — is ignored: Verify reads the object and finds
// the subject. An intact summary is still trusted.
func TestTamperedSummaryIsNotTrusted(t *testing.T) {
	ctx := context.Background()
	other, err := subject.NewKey("test", []byte("another-key-entirely-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		tamper func(d3, d4 summaryDoc) summaryDoc
	}{
		{"altered sets, MAC kept", func(d3, d4 summaryDoc) summaryDoc {
			e := &d3.Entries[0]
			e.IDs, e.Sessions, e.Mentions = d4.Entries[0].IDs, d4.Entries[0].Sessions, d4.Entries[0].Mentions
			return d3
		}},
		{"forged under another key", func(d3, d4 summaryDoc) summaryDoc {
			e := &d3.Entries[0]
			e.IDs, e.Sessions, e.Mentions = d4.Entries[0].IDs, d4.Entries[0].Sessions, d4.Entries[0].Mentions
			return resigned(d3, other.Derive(summaryLabel), "acme/d3.csv")
		}},
		{"moved from another object", func(d3, d4 summaryDoc) summaryDoc {
			d4.Entries[0].VersionID, d4.Entries[0].ETag = d3.Entries[0].VersionID, d3.Entries[0].ETag
			return d4
		}},
		{"older format without a MAC", func(d3, d4 summaryDoc) summaryDoc {
			e := &d3.Entries[0]
			e.IDs, e.Sessions, e.Mentions = d4.Entries[0].IDs, d4.Entries[0].Sessions, d4.Entries[0].Mentions
			d3.Version, d3.MAC = 1, ""
			return d3
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, rq, _, st, store := summarisedTen(t)
			// An erasure of someone absent reads every object and stores its summary.
			if _, err := store.Erase(ctx, st, deletiontest.NewSubject("acme", "nobody")); err != nil {
				t.Fatal(err)
			}
			d3, d4 := storedSummary(t, store, "acme/d3.csv"), storedSummary(t, store, "acme/d4.csv")
			if len(d3.Entries) != 1 || len(d4.Entries) != 1 || d3.MAC == "" {
				t.Fatalf("summaries %+v %+v; want one authenticated entry each", d3, d4)
			}
			forged, err := json.Marshal(tc.tamper(d3, d4))
			if err != nil {
				t.Fatal(err)
			}
			putPlain(t, c, store.sum.nameOf("acme/d3.csv"), forged)
			rq.reset()
			v, err := New(c, "", withSummaries).Verify(ctx, st, victimSubject)
			if err != nil {
				t.Fatal(err)
			}
			if v.Remaining != 1 || rq.n("GET", "acme/d3.csv") == 0 {
				t.Errorf("verification %+v, d3 read %d times; want d3 read and the subject's row found", v, rq.n("GET", "acme/d3.csv"))
			}
			if rq.n("GET", "acme/d4.csv") != 0 {
				t.Error("d4's intact summary was not trusted")
			}
		})
	}
}

// storedSummary reads the stored summary of the dataset object key.
func storedSummary(t *testing.T, store *Store, key string) summaryDoc {
	t.Helper()
	var d summaryDoc
	for name, data := range summaryObjects(t, store.s3) {
		if name == store.sum.nameOf(key) {
			if err := json.NewDecoder(bytes.NewReader(data)).Decode(&d); err != nil {
				t.Fatal(err)
			}
		}
	}
	return d
}

// resigned is d with its MAC computed under mac for the dataset object key.
func resigned(d summaryDoc, mac []byte, key string) summaryDoc {
	var b bytes.Buffer
	_ = encodeSummary(&b, mac, key, d.KeyID, d.Entries)
	var out summaryDoc
	_ = json.Unmarshal(b.Bytes(), &out)
	return out
}
