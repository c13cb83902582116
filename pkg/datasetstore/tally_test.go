package datasetstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
)

// TestTalliedSummaryIsThatOfItsBytes: erasing subjects one after another with one Store,
// each rewrite after the first builds the written version's summary from the rows it
// drops (spending the tally of the version it filters), and that summary is the one a
// scan of the written bytes gives, with values that the dropped rows share with kept rows,
// values held twice in one row, and values held by dropped rows alone.
func TestTalliedSummaryIsThatOfItsBytes(t *testing.T) {
	ctx := context.Background()
	for _, fc := range formatCases {
		if fc.key != "eval/qa.csv" && fc.key != "eval/qa.tsv" && fc.key != "eval/qa.tsv.gz" {
			continue
		}
		t.Run(fc.name, func(t *testing.T) {
			c := newS3Client(t)
			rows := []rec{
				{"cust-1", "sess-1", "shared-token and cust-2's own-token-1"},
				{"by-1", "sess-1", "shared-token shared-token " + trickyText},
				{"cust-2", "sess-2", "own-token-2, see by-1."},
				{"", "sess-2", "by session: lone-token"},
				{"cust-3", "sess-by", "cust-3 cust-3 twice"},
				{"by-2", "sess-by", ""},
				{"cust-1", "", "again: own-token-1"},
			}
			key := "acme/" + fc.key
			putPlain(t, c, key, fc.codec.encode(t, rows))
			st := testInventory("s3://" + testBucket + "/{tenant}/")
			store := New(c, "", withSummaries)
			var prev *tally
			for i, id := range []string{"cust-1", "cust-2", "cust-3"} {
				if _, errs := store.EraseBatch(ctx, st, []deletion.Subject{deletiontest.NewSubject("acme", id)}); errs[0] != nil {
					t.Fatal(errs[0])
				}
				obj, data := current(t, c, key)
				id := testBucket + "\x00" + store.sum.nameOf(key)
				x := store.sum.rows[id]
				if x == nil || x.tally == nil || x.versionID != normVersion(obj.VersionID) {
					t.Fatalf("erasure %d: no tally kept for the version written", i+1)
				}
				if i > 0 && x.tally != prev {
					t.Errorf("erasure %d built its summary from every kept row, not from its base's tally", i+1)
				}
				prev = x.tally
				var got *entry
				for _, e := range store.sum.cached(id) {
					if e.is(obj.VersionID, obj.Token, e.Scope) {
						got = &e
					}
				}
				want, err := store.sum.build(key, bytes.NewReader(data), "acme", newMatcher([]string{"customer_id"}, []string{"session_id"}, "", nil), testLimits)
				if err != nil {
					t.Fatal(err)
				}
				if got == nil {
					t.Fatalf("erasure %d: no summary of the version written", i+1)
				}
				if !bytes.Equal(got.IDs, want.IDs) || !bytes.Equal(got.Sessions, want.Sessions) || !bytes.Equal(got.Mentions, want.Mentions) || got.Scope != want.Scope {
					t.Fatalf("erasure %d: summary of %d ids, %d sessions, %d mentions; a scan of the bytes gives %d, %d, %d", i+1,
						len(got.IDs)/8, len(got.Sessions)/8, len(got.Mentions)/8, len(want.IDs)/8, len(want.Sessions)/8, len(want.Mentions)/8)
				}
				if !bytes.Equal(want.IDs, x.tally.sets[0]) || !bytes.Equal(want.Sessions, x.tally.sets[1]) || !bytes.Equal(want.Mentions, x.tally.sets[2]) {
					t.Fatalf("erasure %d: the tally's sets are not those of the bytes", i+1)
				}
			}
		})
	}
}

// current returns the current version of key in the test bucket and its bytes.
func current(t *testing.T, c *s3.Client, key string) (*objectstore.Object, []byte) {
	t.Helper()
	obj, err := objectstore.NewS3(c, testBucket).Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	data, err := io.ReadAll(obj.Body)
	if err != nil {
		t.Fatal(err)
	}
	return obj, data
}

// TestUnspentTallyIsGivenBack: a rewrite that took the tally and wrote nothing (no row
// matched, or the write failed) gives it back to the row index, so that the next rewrite
// of the version need not collect every kept row.
func TestUnspentTallyIsGivenBack(t *testing.T) {
	ctx := context.Background()
	c := newS3Client(t)
	const key = "acme/d.csv"
	putPlain(t, c, key, renderCSV(t, []row{{Customer: "cust-1", Text: "mine"}, {Customer: "by-1", Text: "kept"}}))
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	store := New(c, "", withSummaries)
	if _, errs := store.EraseBatch(ctx, st, []deletion.Subject{deletiontest.NewSubject("acme", "cust-1")}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	id := testBucket + "\x00" + store.sum.nameOf(key)
	x := store.sum.rows[id]
	if x == nil || x.tally == nil {
		t.Fatal("no tally kept for the version written")
	}
	kept := x.tally
	obj, err := objectstore.NewS3(c, testBucket).Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	locs, err := store.locations(st, deletiontest.NewSubject("acme", "cust-9"))
	if err != nil {
		t.Fatal(err)
	}
	m := newMatcher([]string{"customer_id"}, []string{"session_id"}, "cust-9", nil)
	sv := locs[0].view(m, nil)
	mi, ix := sv.indexing(m, key)
	_, err = rewriteObject(ctx, locs[0].bucket, key, obj, sv, ix, func(r io.Reader, w io.Writer) (bool, error) {
		if x.tally != nil {
			t.Error("the rewrite did not take the tally")
		}
		n, err := rewrite(key, r, w, mi, testLimits)
		return n > 0, err
	})
	if !errors.Is(err, errUnchanged) {
		t.Fatalf("rewrite: %v; want it unchanged", err)
	}
	if x.tally != kept {
		t.Error("the unspent tally was not given back")
	}
}

// minus refuses what its version does not hold; without keeps the set it is given.
func TestTallyMinusRefusesWhatItDoesNotCount(t *testing.T) {
	set := func(ps ...uint64) []byte {
		b := make([]byte, 8*len(ps))
		for i, p := range ps {
			binary.BigEndian.PutUint64(b[8*i:], p)
		}
		return b
	}
	mk := func() *tally {
		return &tally{sets: [3][]byte{set(1, 5, 9), nil, nil}, counts: [3]map[uint64]int32{{1: 1, 5: 2, 9: 1}, {}, {}}}
	}
	tt := mk()
	orig := tt.sets[0]
	got, err := tt.minus([3][]uint64{{9, 5}}, [3][]int32{{1, 1}})
	if err != nil || !bytes.Equal(got.sets[0], set(1, 5)) || got.counts[0][5] != 1 {
		t.Errorf("minus = %v, %v; want 1 and 5 left, 5 once", got, err)
	}
	if !bytes.Equal(orig, set(1, 5, 9)) {
		t.Error("minus changed the set it was given")
	}
	for _, bad := range []struct {
		ps []uint64
		ns []int32
	}{{[]uint64{7}, []int32{1}}, {[]uint64{9}, []int32{2}}, {[]uint64{1}, []int32{0}}} {
		if _, err := mk().minus([3][]uint64{bad.ps}, [3][]int32{bad.ns}); !errors.Is(err, errNotTallied) {
			t.Errorf("minus %v×%v = %v; want errNotTallied", bad.ps, bad.ns, err)
		}
	}
	if _, ok := without(set(1, 5), []uint64{3}); ok {
		t.Error("without a prefix the set does not hold succeeded")
	}
}
