package worker_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// findingStore is a fakeStore that is a deletion.Counter and logs, with the producer, the
// order of finds, publications and erasures.
type findingStore struct {
	*fakeStore
	log *eventLog
}

func (f findingStore) Count(ctx context.Context, st inventory.Entry, s deletion.Subject) ([]event.LocationCount, error) {
	f.mu.Lock()
	n := f.by[st.Name].items
	f.mu.Unlock()
	f.log.add("find " + st.Name)
	loc := inventory.Expand("key:{tenant}:{subject}:*", inventory.Vars{Tenant: s.Tenant, Subject: inventory.Subject}, nil)
	return []event.LocationCount{{Location: loc, Deleted: n}}, nil
}

func (f findingStore) Erase(ctx context.Context, st inventory.Entry, s deletion.Subject) (deletion.Result, error) {
	f.log.add("erase " + st.Name)
	return f.fakeStore.Erase(ctx, st, s)
}

type eventLog struct {
	mu  sync.Mutex
	all []string
}

func (l *eventLog) add(s string) { l.mu.Lock(); l.all = append(l.all, s); l.mu.Unlock() }

func (l *eventLog) index(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range l.all {
		if e == s {
			return i
		}
	}
	return -1
}

// loggingProducer logs each acknowledged found record; fail refuses them.
type loggingProducer struct {
	worker.Producer
	log  *eventLog
	fail bool
}

func (p *loggingProducer) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	if rs[0].Topic == event.TopicStoreFound {
		if p.fail {
			return kgo.ProduceResults{{Record: rs[0], Err: errors.New("broker unavailable")}}
		}
		defer p.log.add("found acknowledged")
	}
	return p.Producer.ProduceSync(ctx, rs...)
}

// Before it erases, the worker publishes what the store's Counter counted and waits for the
// acknowledgement; a store where nothing is found publishes an empty find. Each report
// names its run's find, and only that one.
func TestFindIsAcknowledgedBeforeTheErase(t *testing.T) {
	log := &eventLog{}
	f := findingStore{newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {}}), log}
	w, addrs := setup(t, map[string]deletion.Store{"redis": f})
	w.Producer = &loggingProducer{Producer: w.Producer, log: log}
	if err := w.Handle(context.Background(), record(t, request([]string{"redis", "langgraph"}, nil, 1))); err != nil {
		t.Fatal(err)
	}
	found, ack, erase := log.index("find redis"), log.index("found acknowledged"), log.index("erase redis")
	if found < 0 || ack < found || erase < ack {
		t.Errorf("order of events %v: want find, acknowledgement, erase", log.all)
	}
	got := map[string]event.StoreFound{}
	for _, r := range testenv.ReadTopic(t, addrs, event.TopicStoreFound) {
		var fr event.StoreFound
		if err := event.Found.Decode(r.Value, &fr); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != fr.RequestID {
			t.Errorf("find keyed %q, want the request id %q", r.Key, fr.RequestID)
		}
		got[fr.Store] = fr
	}
	redis, lg := got["redis"], got["langgraph"]
	if len(got) != 2 || redis.Found() != 3 || lg.Found() != 0 || redis.RequestID != "er_1" || redis.Attempt != 1 {
		t.Errorf("finds published %+v, want redis with 3 and langgraph with 0", got)
	}
	rs := reports(t, addrs)
	if d := rs["redis"]; d.Deleted() != 3 || d.Status != event.StatusDeleted {
		t.Errorf("redis report %s deleted %d", d.Status, d.Deleted())
	}
	for name, f := range got {
		if f.Run == "" || !slices.Equal(rs[name].FoundRuns, []string{f.Run}) {
			t.Errorf("%s: report names finds %v, want its run's %q", name, rs[name].FoundRuns, f.Run)
		}
	}
	if redis.Run == lg.Run {
		t.Errorf("two runs share the find id %q", redis.Run)
	}
}

// A find the broker does not acknowledge erases nothing: the store is retried and, past
// the budget, reports FAILED.
func TestUnacknowledgedFindErasesNothing(t *testing.T) {
	log := &eventLog{}
	f := findingStore{newFake(map[string]*behaviour{"redis": {items: 3}}), log}
	w, addrs := setup(t, map[string]deletion.Store{"redis": f})
	w.Producer = &loggingProducer{Producer: w.Producer, log: log, fail: true}
	if err := w.Handle(context.Background(), record(t, request([]string{"redis"}, nil, 1))); err != nil {
		t.Fatal(err)
	}
	if n := f.erased()["redis"]; n != 0 {
		t.Errorf("erased %d times without an acknowledged find", n)
	}
	if d := reports(t, addrs)["redis"]; d.Status != event.StatusFailed {
		t.Errorf("redis reported %s, want FAILED", d.Status)
	}
}

// vanishingStore finds 3 items and then erases none, as when a concurrent batch deleted
// the subject's data (an older version holding its rows) between the find and the erase.
type vanishingStore struct{ findingStore }

func (v vanishingStore) Erase(ctx context.Context, st inventory.Entry, s deletion.Subject) (deletion.Result, error) {
	v.log.add("erase " + st.Name)
	return deletion.Result{}, nil
}

func (v vanishingStore) Verify(ctx context.Context, st inventory.Entry, s deletion.Subject) (event.Verification, error) {
	return event.Verification{Method: "fake"}, nil
}

// What a run found and recorded is counted in its own report once the store verifies
// clean, even when this run's erase deleted none of it: the report does not depend on the
// aggregator consuming the find first (it reads erasure.store.found and
// erasure.store.done on partitions of their own).
func TestReportCountsWhatTheRunFound(t *testing.T) {
	log := &eventLog{}
	f := vanishingStore{findingStore{newFake(map[string]*behaviour{"redis": {items: 3}}), log}}
	w, addrs := setup(t, map[string]deletion.Store{"redis": f})
	if err := w.Handle(context.Background(), record(t, request([]string{"redis"}, nil, 1))); err != nil {
		t.Fatal(err)
	}
	if d := reports(t, addrs)["redis"]; d.Status != event.StatusDeleted || d.Deleted() != 3 {
		t.Errorf("redis report %s deleted %d; want DELETED 3, what the find recorded", d.Status, d.Deleted())
	}
}
