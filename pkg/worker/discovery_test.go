package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
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

func (l lastRuns) Uncovered(string) []deletion.Uncovered { return nil }

// found is a discovery state whose redis runs found locs outside the inventory.
type found []deletion.Uncovered

func (found) LastRun(string) (time.Time, int64, bool) { return clock, 1, true }

func (f found) Uncovered(kind string) []deletion.Uncovered {
	if kind != "redis" {
		return nil
	}
	return f
}

// probing is a fakeStore that probes: every location holds items of the subject, or, with
// fail set, the probe fails.
type probing struct {
	*fakeStore
	items int64
	fail  bool
	calls *int
}

func (p probing) Probe(_ context.Context, _ *inventory.Inventory, locs []deletion.Uncovered, s deletion.Subject, _ deletion.ProbeLimits) ([]deletion.Probed, error) {
	*p.calls++
	if p.fail {
		return nil, errors.New("backend down")
	}
	out := make([]deletion.Probed, len(locs))
	for i, l := range locs {
		out[i] = deletion.Probed{Location: l.Location, Found: p.items}
	}
	return out, nil
}

// The locations discovery found outside the inventory are probed once per kind, on the
// first store of the kind, and travel in its verification with the suggested entry; a
// failed probe leaves each location unexamined.
func TestProbeOutsideTheInventory(t *testing.T) {
	locs := found{{Kind: "redis", Location: "crm:{tenant}:{id}", Fields: []string{"email"}, Suggest: "name: crm"}}
	for _, tc := range []struct {
		name       string
		p          probing
		found      int64
		unexamined bool
	}{
		{"found", probing{items: 2}, 2, false},
		{"none", probing{}, 0, false},
		{"failed", probing{fail: true}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			tc.p.fakeStore, tc.p.calls = newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {items: 1}}), &calls
			w, addrs := setup(t, map[string]deletion.Store{"redis": tc.p})
			w.Discovery = locs
			if err := w.Handle(context.Background(), record(t, request(allStores, nil, 1))); err != nil {
				t.Fatal(err)
			}
			got := reports(t, addrs)
			var with []string
			for name, d := range got {
				if len(d.Verification.OutsideInventory) > 0 {
					with = append(with, name)
				}
			}
			if calls != 1 || len(with) != 1 {
				t.Fatalf("%d probes, outside_inventory on %v; want one probe, on one store", calls, with)
			}
			o := got[with[0]].Verification.OutsideInventory
			if len(o) != 1 || o[0].Location != "crm:{tenant}:{id}" || o[0].Found != tc.found || (o[0].Unexamined != "") != tc.unexamined || o[0].Suggest != "name: crm" {
				t.Errorf("outside_inventory %+v", o)
			}
			if got[with[0]].Verification.Outside() != (tc.found > 0 || tc.unexamined) {
				t.Errorf("Outside() = %v", got[with[0]].Verification.Outside())
			}
		})
	}
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

// countingProber counts (a dry run can preview it) and probes.
type countingProber struct {
	countingStore
	p probing
}

func (c countingProber) Probe(ctx context.Context, inv *inventory.Inventory, locs []deletion.Uncovered, s deletion.Subject, lim deletion.ProbeLimits) ([]deletion.Probed, error) {
	return c.p.Probe(ctx, inv, locs, s, lim)
}

// A dry run reports what the erasure would find outside the inventory, before anything is
// deleted.
func TestDryRunProbesOutsideTheInventory(t *testing.T) {
	calls := 0
	f := newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {items: 1}})
	w, addrs := setup(t, map[string]deletion.Store{"redis": countingProber{countingStore{f}, probing{items: 2, calls: &calls}}})
	w.Discovery = found{{Kind: "redis", Location: "crm:{tenant}:{id}", Suggest: "name: crm"}}
	req := request(allStores, nil, 1)
	req.DryRun = true
	if err := w.Handle(context.Background(), record(t, req)); err != nil {
		t.Fatal(err)
	}
	if n := len(f.erased()); n != 0 {
		t.Fatalf("a dry run erased %d stores", n)
	}
	var outside []event.OutsideLocation
	for _, d := range reports(t, addrs) {
		outside = append(outside, d.Verification.OutsideInventory...)
	}
	if calls != 1 || len(outside) != 1 || outside[0].Found != 2 {
		t.Errorf("%d probes, outside_inventory %+v; want one probe finding 2", calls, outside)
	}
}
