package datasetstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/objectstore"
)

// TestEraseAfterFindListsOnce: the erase that follows a find works from the find's
// listing, once; an erase with no find just before lists on its own.
func TestEraseAfterFindListsOnce(t *testing.T) {
	ctx := context.Background()
	_, rq, _, st, store := summarisedTen(t)
	rq.reset()
	found, err := store.Count(ctx, st, victimSubject)
	if err != nil || len(found) == 0 || found[0].Deleted != 1 {
		t.Fatalf("find = %+v, %v; want the victim's row", found, err)
	}
	res, err := store.Erase(ctx, st, victimSubject)
	if err != nil || res.Locations[0].Deleted != 1 {
		t.Fatalf("erase = %+v, %v", res, err)
	}
	if n := rq.listed("acme/"); n != 1 {
		t.Errorf("find and erase listed the dataset prefix %d times; want 1", n)
	}
	if _, err := store.Erase(ctx, st, victimSubject); err != nil {
		t.Fatal(err)
	}
	if n := rq.listed("acme/"); n != 2 {
		t.Errorf("a second erase without a find listed the dataset prefix %d times in all; want 2 (its own listing)", n)
	}
	if v, err := store.Verify(ctx, st, victimSubject); err != nil || !v.Clean() {
		t.Errorf("verify = %+v, %v", v, err)
	}
}

// TestObjectWrittenBetweenFindAndEraseIsCaught: an object holding the subject written
// after the find's listing is not in the listing the erase works from; the verification,
// which lists anew, reports it, and the retried erase removes it.
func TestObjectWrittenBetweenFindAndEraseIsCaught(t *testing.T) {
	ctx := context.Background()
	c, _, _, st, store := summarisedTen(t)
	w := s3World{c}
	if _, err := store.Count(ctx, st, victimSubject); err != nil {
		t.Fatal(err)
	}
	late := "acme/late.csv"
	w.put(t, late, renderCSV(t, []row{{Customer: "cust-victim", Text: "late"}, {Customer: "by-9", Text: "keep"}}))
	if _, err := store.Erase(ctx, st, victimSubject); err != nil {
		t.Fatal(err)
	}
	v, err := store.Verify(ctx, st, victimSubject)
	if err != nil || v.Clean() || v.Remaining < 1 {
		t.Fatalf("verify after an erase that missed %s = %+v, %v; want the late row reported", late, v, err)
	}
	if _, err := store.Erase(ctx, st, victimSubject); err != nil {
		t.Fatal(err)
	}
	if v, err := store.Verify(ctx, st, victimSubject); err != nil || !v.Clean() {
		t.Fatalf("verify after the retried erase = %+v, %v", v, err)
	}
	for i, b := range w.versions(t, late) {
		if got := string(b); strings.Contains(got, "cust-victim") || !strings.Contains(got, "by-9") {
			t.Errorf("version %d of %s: %q", i, late, got)
		}
	}
}

func TestHandoffIsTakenOnceAndExpires(t *testing.T) {
	h := objectstore.NewHandoff()
	l := location{name: "s3://b/acme/", prefix: "acme/"}
	other := location{name: "s3://b/acme/", prefix: "acme/", exclude: []string{"*.tmp"}}
	h.Put(listingKey(l), objectstore.Listing{Keys: []string{"acme/a.csv"}}, time.Now())
	if _, ok := h.Take(listingKey(other)); ok {
		t.Error("a listing was handed to a location with other exclusions")
	}
	if ls, ok := h.Take(listingKey(l)); !ok || len(ls.Keys) != 1 {
		t.Fatalf("take = %+v, %v; want the listing put", ls, ok)
	}
	if _, ok := h.Take(listingKey(l)); ok {
		t.Error("a listing was handed over twice")
	}
	h.Put(listingKey(l), objectstore.Listing{}, time.Now().Add(-2*objectstore.HandoffAge))
	if _, ok := h.Take(listingKey(l)); ok {
		t.Error("a listing older than HandoffAge was handed over")
	}
	var none *objectstore.Handoff
	none.Put(listingKey(l), objectstore.Listing{}, time.Now())
	if _, ok := none.Take(listingKey(l)); ok {
		t.Error("a nil handoff handed a listing over")
	}
}
