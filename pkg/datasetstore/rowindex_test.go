package datasetstore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
)

// TestFindCountsTheVersionItWroteWithoutReading: once a process has rewritten an object,
// finding other subjects in that version reads nothing of it, and counts what a process
// that reads it counts; once another writer replaced the version, it reads again.
func TestFindCountsTheVersionItWroteWithoutReading(t *testing.T) {
	for _, versioned := range []bool{true, false} {
		t.Run(fmt.Sprintf("versioned=%v", versioned), func(t *testing.T) {
			ctx := context.Background()
			c, rq := countedS3(t, versioned)
			rows := []row{{Customer: "by-1", Text: trickyText}}
			var subjects []deletion.Subject
			for i := range 12 {
				id := fmt.Sprintf("cust-%02d", i)
				subjects = append(subjects, deletiontest.NewSubject("acme", id))
				rows = append(rows, row{Customer: id, Text: "mine"}, row{Sessions: []string{"sess-" + id}, Text: "by session"})
			}
			// a row holding two subjects of a batch counts for the first of them
			rows = append(rows, row{Customer: "cust-05", Sessions: []string{"sess-cust-04"}, Text: "both"})
			const key = "acme/d.csv"
			putPlain(t, c, key, renderCSV(t, rows))
			st := testInventory("s3://" + testBucket + "/{tenant}/")
			store := New(c, "", withSummaries)
			if _, errs := store.EraseBatch(ctx, st, subjects[:2]); errs[0] != nil {
				t.Fatal(errs[0])
			}
			rq.reset()
			batch := []deletion.Subject{subjects[5], subjects[4], subjects[7], deletiontest.NewSubject("acme", "nobody")}
			found, errs := store.CountBatch(ctx, st, batch)
			if gets := rq.n("GET", key); gets != 0 {
				t.Errorf("CountBatch read the version this process wrote %d times; want 0", gets)
			}
			want, werrs := New(c, "", withSummaries).CountBatch(ctx, st, batch)
			for i := range batch {
				if errs[i] != nil || werrs[i] != nil || !reflect.DeepEqual(found[i], want[i]) {
					t.Errorf("subject %d: found %+v, %v; a reading process finds %+v, %v", i, found[i], errs[i], want[i], werrs[i])
				}
			}
			if found[0][0].Deleted != 3 || found[1][0].Deleted != 2 {
				t.Errorf("found %+v, %+v; want 3 rows for cust-05 (one shared with cust-04) and 2 for cust-04", found[0], found[1])
			}
			// another process rewrites the object: the index no longer describes it
			if _, errs := New(c, "", withSummaries).EraseBatch(ctx, st, subjects[2:3]); errs[0] != nil {
				t.Fatal(errs[0])
			}
			rq.reset()
			found, errs = store.CountBatch(ctx, st, batch)
			if gets := rq.n("GET", key); gets != 1 {
				t.Errorf("CountBatch after another writer read the object %d times; want 1", gets)
			}
			if errs[0] != nil || found[0][0].Deleted != 3 {
				t.Errorf("found %+v, %v; want 3 rows", found[0], errs[0])
			}
		})
	}
}

// TestFindFromTheIndexMatchesReading: over random objects and batches, what a process
// finds in the versions it wrote equals what a process that reads them finds.
func TestFindFromTheIndexMatchesReading(t *testing.T) {
	ctx := context.Background()
	ids := []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", ""}
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 11))
			c, rq := countedS3(t, seed%2 == 0)
			var rows []row
			for range 40 {
				rw := row{Customer: ids[r.IntN(len(ids))], Text: []string{"hi", trickyText, "c1"}[r.IntN(3)]}
				if r.IntN(2) == 0 {
					rw.Sessions = []string{"sess-" + ids[r.IntN(len(ids))]}
				}
				rows = append(rows, rw)
			}
			const key = "acme/r.csv"
			putPlain(t, c, key, renderCSV(t, rows))
			st := testInventory("s3://" + testBucket + "/{tenant}/")
			store := New(c, "", withSummaries)
			batch := func() []deletion.Subject {
				var out []deletion.Subject
				for range 1 + r.IntN(4) {
					out = append(out, deletiontest.NewSubject("acme", ids[r.IntN(len(ids)-1)]))
				}
				return out
			}
			wrote := false // the store rewrote the object at least once
			for range 4 {
				res, errs := store.EraseBatch(ctx, st, batch())
				for i, err := range errs {
					if err != nil {
						t.Fatal(err)
					}
					wrote = wrote || res[i].Locations[0].Deleted > 0
				}
				b := batch()
				rq.reset()
				found, errs := store.CountBatch(ctx, st, b)
				reads := rq.n("GET", key)
				want, werrs := New(c, "", withSummaries).CountBatch(ctx, st, b)
				for i := range b {
					if errs[i] != nil || werrs[i] != nil || !reflect.DeepEqual(found[i], want[i]) {
						t.Fatalf("%v: subject %d: found %+v, %v; reading finds %+v, %v", b, i, found[i], errs[i], want[i], werrs[i])
					}
				}
				if wrote && reads != 0 {
					t.Errorf("CountBatch read the object %d times after this process rewrote it", reads)
				}
			}
		})
	}
}

// TestWrittenSummaryIsThatOfItsBytes: the summary a rewrite stores for the version it
// wrote (collected by the filter for CSV and TSV, scanned from the written bytes for the
// other formats) is the summary a scan of that version's bytes builds.
func TestWrittenSummaryIsThatOfItsBytes(t *testing.T) {
	ctx := context.Background()
	for _, fc := range formatCases {
		t.Run(fc.name, func(t *testing.T) {
			c := newS3Client(t)
			rows := []rec{
				{"cust-1", "sess-cust-1", "mine"},
				{"by-1", "sess-by-1", trickyText},
				{"by-2", "", "ticket from cust-9 (by-1), see sess-by-1."},
				{"", "sess-cust-1", "by session"},
				{"by-3", "sess-by-3", ""},
			}
			key := "acme/" + fc.key
			putPlain(t, c, key, fc.codec.encode(t, rows))
			st := testInventory("s3://" + testBucket + "/{tenant}/")
			if _, errs := New(c, "", withSummaries).EraseBatch(ctx, st, []deletion.Subject{deletiontest.NewSubject("acme", "cust-1")}); errs[0] != nil {
				t.Fatal(errs[0])
			}
			obj, data := current(t, c, key)
			sums := summaryObjects(t, c)
			if len(sums) != 1 {
				t.Fatalf("%d summaries stored; want 1", len(sums))
			}
			var stored *entry
			for _, doc := range sums {
				for _, e := range decodeSummary(bytes.NewReader(doc), deletiontest.Key.Derive(summaryLabel), key) {
					if e.is(obj.VersionID, obj.Token, e.Scope) {
						stored = &e
					}
				}
			}
			if stored == nil {
				t.Fatal("no summary entry for the version written")
			}
			s := New(c, "", withSummaries).sum
			want, err := s.build(key, bytes.NewReader(data), "acme", newMatcher([]string{"customer_id"}, []string{"session_id"}, "", nil), testLimits)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(stored.IDs, want.IDs) || !bytes.Equal(stored.Sessions, want.Sessions) || !bytes.Equal(stored.Mentions, want.Mentions) || stored.Scope != want.Scope {
				t.Errorf("stored summary %d ids, %d sessions, %d mentions; a scan of the bytes gives %d, %d, %d",
					len(stored.IDs)/8, len(stored.Sessions)/8, len(stored.Mentions)/8, len(want.IDs)/8, len(want.Sessions)/8, len(want.Mentions)/8)
			}
		})
	}
}

// TestOnlyCSVRewritesRecordRows: the filters of other formats ask the matcher too, but
// keep nothing of what they asked (no row index, no memory held for one).
func TestOnlyCSVRewritesRecordRows(t *testing.T) {
	data := []byte("{\"customer_id\":\"by-1\",\"session_id\":\"s1\"}\n{\"customer_id\":\"cust-1\",\"session_id\":\"s2\"}\n")
	m := newMatcher([]string{"customer_id"}, []string{"session_id"}, "cust-1", nil)
	m.ix = &indexer{}
	var out bytes.Buffer
	if n, err := rewrite("acme/d.jsonl", bytes.NewReader(data), &out, m, testLimits); err != nil || n != 1 {
		t.Fatalf("rewrite = %d, %v", n, err)
	}
	if len(m.ix.pending) != 0 || m.ix.index(objectstore.Written{Token: "t"}, "") != nil {
		t.Errorf("a JSONL rewrite left %d values pending, index %v", len(m.ix.pending), m.ix.index(objectstore.Written{Token: "t"}, "") != nil)
	}
}
