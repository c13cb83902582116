package aggregator_test

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
)

func foundRec(t *testing.T, f event.StoreFound) *kgo.Record {
	t.Helper()
	b, err := event.Found.Encode(&f)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: event.TopicStoreFound, Key: []byte(f.RequestID), Value: b}
}

// A deleter killed between its delete and its report reports NOTHING_FOUND when the
// request is redelivered; the receipt still counts what its find recorded, whichever of
// the two records the aggregator handles first.
func TestRedeliveredNothingFoundKeepsTheFind(t *testing.T) {
	for _, foundFirst := range []bool{true, false} {
		e := setup(t)
		found := event.StoreFound{
			RequestID: "er_f", TenantID: "acme", Store: "redis", Kind: "redis", Attempt: 1, FoundAt: clock,
			Locations: []event.LocationCount{{Location: "a:acme:{subject}", Deleted: 4}, {Location: "b:acme:{subject}", Deleted: 0}},
		}
		reports := success("er_f", "acme", 1) // redis: NOTHING_FOUND, deleted 0
		recs := []*kgo.Record{reqRec(t, request("er_f", "acme", 1)), foundRec(t, found)}
		if !foundFirst {
			recs = recs[:1]
		}
		recs = append(recs, doneRecs(t, reports[1])...)
		if !foundFirst {
			recs = append(recs, foundRec(t, found))
		}
		recs = append(recs, doneRecs(t, reports[0], reports[2])...)
		e.handle(t, recs...)

		rc, err := e.store.GetReceipt(context.Background(), "er_f")
		if err != nil {
			t.Fatalf("found first %v: %v", foundFirst, err)
		}
		for _, s := range rc.Stores {
			if s.Store == "redis" && (s.Status != event.StatusDeleted || s.Deleted != 4) {
				t.Errorf("found first %v: redis %s deleted %d, want DELETED 4", foundFirst, s.Status, s.Deleted)
			}
		}
	}
}

// A find alone never completes a store.
func TestFindAloneIsNoReport(t *testing.T) {
	e := setup(t)
	reports := success("er_g", "acme", 1)
	e.handle(t, reqRec(t, request("er_g", "acme", 1)))
	e.handle(t, doneRecs(t, reports[0], reports[2])...)
	e.handle(t, foundRec(t, event.StoreFound{RequestID: "er_g", TenantID: "acme", Store: "redis", Kind: "redis", Attempt: 1,
		Locations: []event.LocationCount{{Location: "a:acme:{subject}", Deleted: 2}}, FoundAt: clock}))
	if _, err := e.store.GetReceipt(context.Background(), "er_g"); err == nil {
		t.Fatal("receipt issued on a find without the store's report")
	}
}

func TestMergeWithFind(t *testing.T) {
	find := aggregator.FoundReport(event.StoreFound{Store: "redis", Attempt: 1,
		Locations: []event.LocationCount{{Location: "k", Deleted: 5}, {Location: "old", Deleted: 2}}})
	report := func(attempt int, st event.Status, n int64) event.StoreDone {
		return event.StoreDone{Store: "redis", Attempt: attempt, Status: st, Verification: event.Verification{Method: "m"},
			Locations: []event.LocationCount{{Location: "k", Deleted: n}}}
	}
	for name, tc := range map[string]struct {
		other  event.StoreDone
		want   int64
		status event.Status
	}{
		"nothing found after the find": {report(1, event.StatusNothingFound, 0), 7, event.StatusDeleted},
		"the run's own report":         {report(1, event.StatusDeleted, 5), 7, event.StatusDeleted},
		"more deleted than found":      {report(1, event.StatusDeleted, 6), 8, event.StatusDeleted},
		"failed stays failed":          {report(1, event.StatusFailed, 0), 7, event.StatusFailed},
		"re-drive ignores older find":  {report(2, event.StatusNothingFound, 0), 0, event.StatusNothingFound},
	} {
		for _, order := range [][2]event.StoreDone{{find, tc.other}, {tc.other, find}} {
			got := aggregator.Merge(order[0], order[1])
			if got.Deleted() != tc.want || got.Status != tc.status {
				t.Errorf("%s: kept %s deleted %d, want %s %d", name, got.Status, got.Deleted(), tc.status, tc.want)
			}
		}
	}
}

// The crash the found runs close: run 1 finds 4 items, erases them and dies before its
// report; the redelivered run 2 finds nothing, records that, and reports NOTHING_FOUND
// naming its own find. Its report is read before either find (the records travel on
// different topics): no receipt until run 2's find is read, and by then run 1's, which
// precedes it on the request's partition, was merged, so the receipt counts the 4.
func TestReportWaitsForTheFindItNames(t *testing.T) {
	e := setup(t)
	find := func(run string, n int64) event.StoreFound {
		return event.StoreFound{RequestID: "er_r", TenantID: "acme", Store: "redis", Kind: "redis", Attempt: 1, FoundAt: clock,
			Locations: []event.LocationCount{{Location: "a:acme:{subject}", Deleted: n}}, Run: run}
	}
	reports := success("er_r", "acme", 1) // redis: NOTHING_FOUND, deleted 0
	reports[1].FoundRuns = []string{"run-2"}
	e.handle(t, reqRec(t, request("er_r", "acme", 1)))
	e.handle(t, doneRecs(t, reports...)...)
	e.handle(t, foundRec(t, find("run-1", 4)))
	if _, err := e.store.GetReceipt(context.Background(), "er_r"); err == nil {
		t.Fatal("receipt issued before the find the report names was read")
	}
	e.handle(t, foundRec(t, find("run-2", 0)))
	rc, err := e.store.GetReceipt(context.Background(), "er_r")
	if err != nil {
		t.Fatalf("no receipt once the named find was read: %v", err)
	}
	for _, s := range rc.Stores {
		if s.Store == "redis" && (s.Status != event.StatusDeleted || s.Deleted != 4) {
			t.Errorf("redis %s deleted %d, want DELETED 4 (run 1's find)", s.Status, s.Deleted)
		}
	}
}

// gatedStore holds every write of a find until gate is closed.
type gatedStore struct {
	*auditlog.DirStore
	gate chan struct{}
}

func (g gatedStore) PutReport(ctx context.Context, d event.StoreDone) error {
	g.wait(d)
	return g.DirStore.PutReport(ctx, d)
}

func (g gatedStore) CreateReport(ctx context.Context, d event.StoreDone) error {
	g.wait(d)
	return g.DirStore.CreateReport(ctx, d)
}

func (g gatedStore) wait(d event.StoreDone) {
	if strings.HasSuffix(d.Store, aggregator.FoundSuffix) {
		<-g.gate
	}
}

// A find and the report that names it, handled at once (they come from two topics): the
// report's handler finds no find and waits; the find's handler, whose write lands after
// that, must see the report and issue the receipt.
func TestFindWrittenAfterItsReportCompletes(t *testing.T) {
	e := setup(t)
	g := gatedStore{DirStore: e.store, gate: make(chan struct{})}
	e.agg.Store = g
	reports := success("er_c", "acme", 1)
	reports[1].FoundRuns = []string{"run-1"}
	e.handle(t, reqRec(t, request("er_c", "acme", 1)))
	e.handle(t, doneRecs(t, reports[0], reports[2])...)
	found := make(chan error, 1)
	go func() {
		found <- e.agg.Handle(context.Background(), foundRec(t, event.StoreFound{RequestID: "er_c", TenantID: "acme", Store: "redis",
			Kind: "redis", Attempt: 1, FoundAt: clock, Run: "run-1", Locations: []event.LocationCount{{Location: "a:acme:{subject}", Deleted: 2}}}))
	}()
	e.handle(t, doneRecs(t, reports[1])...)
	if _, err := e.store.GetReceipt(context.Background(), "er_c"); err == nil {
		t.Fatal("receipt issued before the find the report names was stored")
	}
	close(g.gate)
	if err := <-found; err != nil {
		t.Fatal(err)
	}
	rc, err := e.store.GetReceipt(context.Background(), "er_c")
	if err != nil {
		t.Fatalf("no receipt after the find landed: %v", err)
	}
	if s := rc.Stores[1]; s.Store != "redis" || s.Deleted != 2 {
		t.Errorf("redis in the receipt: %+v, want 2 deleted", s)
	}
}
