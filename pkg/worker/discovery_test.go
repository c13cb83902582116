package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/deletion"
)

// lastRuns is a fixed discovery state by kind.
type lastRuns map[string]struct {
	at time.Time
	n  int64
}

func (l lastRuns) LastRun(kind string) (time.Time, int64, bool) {
	r, ok := l[kind]
	return r.at, r.n, ok
}

// Every report carries the last discovery run of its kind, and none when its kind never
// ran.
func TestReportsCarryDiscoveryState(t *testing.T) {
	f := newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {}, "audit_log": {noPII: true}})
	w, addrs := setup(t, map[string]deletion.Store{"redis": f, "audit_log": f})
	at := clock.Add(-time.Hour)
	w.Discovery = lastRuns{"redis": {at, 2}}
	if err := w.Handle(context.Background(), record(t, request(allStores, nil, 1))); err != nil {
		t.Fatal(err)
	}
	got := reports(t, addrs)
	for _, name := range []string{"redis", "langgraph"} {
		v := got[name].Verification
		if v.DiscoveryRunAt == nil || !v.DiscoveryRunAt.Equal(at) || v.DiscoveryUncovered != 2 {
			t.Errorf("%s: discovery %v %d, want %v 2", name, v.DiscoveryRunAt, v.DiscoveryUncovered, at)
		}
	}
	if v := got["audit_log"].Verification; v.DiscoveryRunAt != nil || v.DiscoveryUncovered != 0 {
		t.Errorf("audit_log: discovery %v %d, want none", v.DiscoveryRunAt, v.DiscoveryUncovered)
	}
}
