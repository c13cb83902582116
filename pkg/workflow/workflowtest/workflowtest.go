// Package workflowtest is the conformance suite every workflow.Store passes.
//
// Run checks each Store method against a real backend: records are created once, read
// back whole, swapped only from the stored version, listed and held in the documented
// order across pages, and ids that look like key delimiters stay apart. It then races
// Create against Create and Swap against Swap on one record: exactly one writer wins.
// When the fixture can open a second store on the same storage (a second intake
// replica), the races run across the two stores and every write must be visible to the
// other store at once.
package workflowtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// Fixture binds the suite to one Store implementation.
type Fixture struct {
	// New returns a store on fresh, empty storage of its own.
	New func(t *testing.T) workflow.Store
	// Replica returns another store on the storage of s, as a second intake process
	// opens it. A store that one process owns alone leaves Replica nil and says why in
	// NoReplica; the races then run on the one store.
	Replica   func(t *testing.T, s workflow.Store) workflow.Store
	NoReplica string
}

// T0 is the base time of the suite's records.
var T0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// Racers is how many writers each race runs.
const Racers = 8

// Run runs the suite; the subtests run in parallel, each on a store of its own.
func Run(t *testing.T, f Fixture) {
	if f.Replica == nil && f.NoReplica == "" {
		t.Fatal("workflowtest: the fixture has no Replica and says not why (NoReplica)")
	}
	tests := []struct {
		name string
		run  func(t *testing.T, f Fixture)
	}{
		{"CreateAndGet", testCreateGet},
		{"CreateOnce", testCreateOnce},
		{"Swap", testSwap},
		{"List", testList},
		{"Holds", testHolds},
		{"HoldsBindAtOnce", testHoldsConcurrent},
		{"KeysDoNotCollide", testKeys},
		{"RacingCreate", testRacingCreate},
		{"RacingSwap", testRacingSwap},
		{"ReplicaSeesWrites", testReplica},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, f)
		})
	}
}

// Record returns a SCHEDULED record of id with every field set.
func Record(id string, submitted time.Time) workflow.Record {
	return workflow.Record{
		RequestID: id, TenantID: "acme", SubjectHash: "3f9a" + id, Scope: event.ScopeSubject, Regulation: "GDPR",
		State: workflow.Scheduled, SubmittedBy: "portal", SubmittedAt: submitted, DueAt: submitted.Add(30 * 24 * time.Hour),
		ExecuteAt: submitted.Add(24 * time.Hour), Window: 24 * time.Hour, NeedsApproval: true, ApprovedBy: "dpo-2",
		History: []workflow.Transition{{To: workflow.Scheduled, Actor: "portal", At: submitted}},
		Event:   []byte{0xc3, 0x01, 0x00, 0xff, '#'},
	}
}

func testCreateGet(t *testing.T, f Fixture) {
	ctx := context.Background()
	s := f.New(t)
	r := Record("er_1", T0)
	r.Version = 7 // Create stores version 1 whatever it is given
	must(t, s.Create(ctx, r))
	got, err := s.Get(ctx, "er_1")
	must(t, err)
	r.Version = 1
	if !same(got, r) {
		t.Errorf("Get = %s\nwant %s", js(got), js(r))
	}
	if _, err := s.Get(ctx, "er_2"); !errors.Is(err, workflow.ErrNotFound) {
		t.Errorf("Get of an unknown id: %v, want ErrNotFound", err)
	}
	tenant := workflow.Record{RequestID: "er_tenant", TenantID: "acme", Scope: event.ScopeTenant, State: workflow.AwaitingApproval, SubmittedAt: T0}
	must(t, s.Create(ctx, tenant))
	got, err = s.Get(ctx, "er_tenant")
	must(t, err)
	tenant.Version = 1
	if !same(got, tenant) {
		t.Errorf("Get of a record with empty fields = %s\nwant %s", js(got), js(tenant))
	}
}

func testCreateOnce(t *testing.T, f Fixture) {
	ctx := context.Background()
	s := f.New(t)
	first := Record("er_1", T0)
	must(t, s.Create(ctx, first))
	second := Record("er_1", T0.Add(time.Hour))
	second.SubmittedBy = "someone else"
	if err := s.Create(ctx, second); !errors.Is(err, workflow.ErrExists) {
		t.Fatalf("second Create: %v, want ErrExists", err)
	}
	got, err := s.Get(ctx, "er_1")
	must(t, err)
	if got.SubmittedBy != "portal" || got.Version != 1 {
		t.Errorf("after a refused Create: %s, want the first record at version 1", js(got))
	}
}

func testSwap(t *testing.T, f Fixture) {
	ctx := context.Background()
	s := f.New(t)
	must(t, s.Create(ctx, Record("er_1", T0)))
	stored, err := s.Get(ctx, "er_1")
	must(t, err)
	moved, err := stored.Move(workflow.Cancel, workflow.Cancelled, "alice", T0.Add(time.Minute))
	must(t, err)
	out, err := s.Swap(ctx, moved)
	must(t, err)
	if out.Version != 2 || out.State != workflow.Cancelled {
		t.Errorf("Swap returned version %d state %s, want 2 CANCELLED", out.Version, out.State)
	}
	got, err := s.Get(ctx, "er_1")
	must(t, err)
	if !same(got, out) {
		t.Errorf("Get after Swap = %s\nwant %s", js(got), js(out))
	}
	for _, v := range []int64{1, 3, 0} { // behind, ahead, never stored
		stale := moved
		stale.Version, stale.ApprovedBy = v, "stale"
		if _, err := s.Swap(ctx, stale); !errors.Is(err, workflow.ErrConflict) {
			t.Errorf("Swap from version %d with version 2 stored: %v, want ErrConflict", v, err)
		}
	}
	if got, _ := s.Get(ctx, "er_1"); !same(got, out) {
		t.Errorf("refused Swaps changed the record: %s", js(got))
	}
	unknown := Record("er_2", T0)
	unknown.Version = 1
	if _, err := s.Swap(ctx, unknown); !errors.Is(err, workflow.ErrNotFound) {
		t.Errorf("Swap of an unknown id: %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, "er_2"); !errors.Is(err, workflow.ErrNotFound) {
		t.Errorf("Swap of an unknown id created it: %v", err)
	}
}

// testList writes records in random order, several with one SubmittedAt, and reads them
// back ordered by SubmittedAt then RequestID: more of them than a backend's small page.
func testList(t *testing.T, f Fixture) {
	ctx := context.Background()
	s := f.New(t)
	if rs, err := s.List(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("List of an empty store = %d records, %v", len(rs), err)
	}
	const n = 40
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("er_%02d", i))
	}
	for _, i := range rand.Perm(n) {
		// Four records per second: ties broken by id.
		must(t, s.Create(ctx, Record(want[i], T0.Add(time.Duration(i/4)*time.Second))))
	}
	got, err := s.List(ctx)
	must(t, err)
	if len(got) != n {
		t.Fatalf("List = %d records, want %d", len(got), n)
	}
	for i, r := range got {
		if r.RequestID != want[i] {
			t.Fatalf("List[%d] = %s, want %s (SubmittedAt, then RequestID)", i, r.RequestID, want[i])
		}
	}
	r, _ := s.Get(ctx, want[5])
	r.ApprovedBy = "changed"
	_, err = s.Swap(ctx, r)
	must(t, err)
	got, err = s.List(ctx)
	must(t, err)
	if len(got) != n || got[5].ApprovedBy != "changed" || got[5].Version != 2 {
		t.Errorf("List after a Swap: %d records, [5] = %s", len(got), js(got[5]))
	}
}

func testHolds(t *testing.T, f Fixture) {
	ctx := context.Background()
	s := f.New(t)
	if hs, err := s.Holds(ctx); err != nil || len(hs) != 0 {
		t.Fatalf("Holds of an empty store = %d, %v", len(hs), err)
	}
	hold := func(id string, at time.Time) workflow.Hold {
		return workflow.Hold{ID: id, TenantID: "acme", SubjectHash: "3f9a", Store: "dataset", Reason: "case 7",
			LegalBasis: "GDPR Art. 17(3)(e): litigation", CreatedBy: "dpo-1", CreatedAt: at}
	}
	const n = 30
	var want []workflow.Hold
	for i := range n {
		want = append(want, hold(fmt.Sprintf("hold_%02d", i), T0.Add(time.Duration(i/3)*time.Minute)))
	}
	for _, i := range rand.Perm(n) {
		must(t, s.PutHold(ctx, want[i]))
	}
	// A record with a hold's id is another item.
	must(t, s.Create(ctx, Record("hold_00", T0)))
	released := want[4]
	released.ReleasedBy, released.ReleasedAt = "dpo-2", T0.Add(time.Hour)
	must(t, s.PutHold(ctx, released))
	want[4] = released
	got, err := s.Holds(ctx)
	must(t, err)
	if len(got) != n {
		t.Fatalf("Holds = %d, want %d (released ones included)", len(got), n)
	}
	for i := range got {
		if js(got[i]) != js(want[i]) {
			t.Fatalf("Holds[%d] = %s\nwant %s (CreatedAt, then ID)", i, js(got[i]), js(want[i]))
		}
	}
	if got[4].Active() {
		t.Error("the replaced hold is still active")
	}
	if rs, _ := s.List(ctx); len(rs) != 1 {
		t.Errorf("List = %d records, want the one record beside the holds", len(rs))
	}
}

// testHoldsConcurrent places holds on one store while both stores of a pair read them:
// every reader finds each hold whose PutHold returned before its call, however many
// reads run at once, and changing an answer changes no other.
func testHoldsConcurrent(t *testing.T, f Fixture) {
	ctx := context.Background()
	stores := pair(t, f)
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			h := workflow.Hold{ID: fmt.Sprintf("hold_%02d", i), TenantID: "acme", LegalBasis: "GDPR Art. 17(3)(e)", CreatedAt: T0}
			if err := stores[0].PutHold(ctx, h); err != nil {
				t.Errorf("PutHold(%s): %v", h.ID, err)
				return
			}
			for _, s := range stores {
				hs, err := s.Holds(ctx)
				if err != nil || !slices.ContainsFunc(hs, func(g workflow.Hold) bool { return g.ID == h.ID }) {
					t.Errorf("Holds right after PutHold(%s) returned = %d holds, %v; the hold is missing", h.ID, len(hs), err)
					return
				}
				hs[0].ID = "changed by a caller"
			}
		})
		wg.Go(func() {
			if _, err := stores[i%2].Holds(ctx); err != nil {
				t.Errorf("Holds beside the writes: %v", err)
			}
		})
	}
	wg.Wait()
	for _, s := range stores {
		hs, err := s.Holds(ctx)
		must(t, err)
		if len(hs) != n || hs[0].ID != "hold_00" {
			t.Errorf("Holds after the writes = %d holds starting %q, want %d starting hold_00", len(hs), hs[0].ID, n)
		}
	}
}

// testKeys stores ids that contain what a backend could use as a key delimiter or escape.
func testKeys(t *testing.T, f Fixture) {
	ctx := context.Background()
	s := f.New(t)
	ids := []string{"a", "a#b", "a%23b", "a/b", "a b", "REC#a", "HOLD#a", "é"}
	for i, id := range ids {
		r := Record(id, T0.Add(time.Duration(i)*time.Second))
		must(t, s.Create(ctx, r))
		must(t, s.PutHold(ctx, workflow.Hold{ID: id, TenantID: "acme", LegalBasis: id, CreatedAt: r.SubmittedAt}))
	}
	for _, id := range ids {
		r, err := s.Get(ctx, id)
		if err != nil || r.RequestID != id || r.SubjectHash != "3f9a"+id {
			t.Errorf("Get(%q) = %s, %v", id, js(r), err)
		}
	}
	rs, err := s.List(ctx)
	must(t, err)
	hs, err := s.Holds(ctx)
	must(t, err)
	if len(rs) != len(ids) || len(hs) != len(ids) {
		t.Fatalf("%d records and %d holds, want %d of each", len(rs), len(hs), len(ids))
	}
	for i, id := range ids {
		if rs[i].RequestID != id || hs[i].ID != id || hs[i].LegalBasis != id {
			t.Errorf("[%d]: record %q, hold %q (%q), want %q", i, rs[i].RequestID, hs[i].ID, hs[i].LegalBasis, id)
		}
	}
}

// pair returns two stores on one storage: the fixture's replica, or the store twice.
func pair(t *testing.T, f Fixture) [2]workflow.Store {
	s := f.New(t)
	if f.Replica == nil {
		t.Logf("one store for both racers: %s", f.NoReplica)
		return [2]workflow.Store{s, s}
	}
	return [2]workflow.Store{s, f.Replica(t, s)}
}

// testRacingCreate: Racers writers, alternating between the two stores, create one id at
// once; exactly one succeeds, the others get ErrExists, and the stored record is the
// winner's.
func testRacingCreate(t *testing.T, f Fixture) {
	ctx := context.Background()
	stores := pair(t, f)
	for round := range 5 {
		id := fmt.Sprintf("er_race_%d", round)
		errs := race(func(i int) error {
			r := Record(id, T0)
			r.SubmittedBy = fmt.Sprintf("racer-%d", i)
			return stores[i%2].Create(ctx, r)
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: racers %d and %d both created %s", round, winner, i, id)
			case err == nil:
				winner = i
			case !errors.Is(err, workflow.ErrExists):
				t.Fatalf("round %d: racer %d: %v, want nil or ErrExists", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no racer created %s", round, id)
		}
		for _, s := range stores {
			got, err := s.Get(ctx, id)
			if err != nil || got.SubmittedBy != fmt.Sprintf("racer-%d", winner) || got.Version != 1 {
				t.Fatalf("round %d: stored %s, %v; want racer %d's at version 1", round, js(got), err, winner)
			}
		}
	}
}

// testRacingSwap: Racers writers, alternating between the two stores, swap the record
// from the version they all read; exactly one succeeds, the others get ErrConflict, and
// the stored record is the winner's at the next version.
func testRacingSwap(t *testing.T, f Fixture) {
	ctx := context.Background()
	stores := pair(t, f)
	must(t, stores[0].Create(ctx, Record("er_1", T0)))
	for round := range 5 {
		read, err := stores[round%2].Get(ctx, "er_1")
		must(t, err)
		results := make([]workflow.Record, Racers)
		errs := race(func(i int) error {
			r := read
			r.ApprovedBy = fmt.Sprintf("racer-%d", i)
			var err error
			results[i], err = stores[i%2].Swap(ctx, r)
			return err
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: racers %d and %d both swapped version %d", round, winner, i, read.Version)
			case err == nil:
				winner = i
			case !errors.Is(err, workflow.ErrConflict):
				t.Fatalf("round %d: racer %d: %v, want nil or ErrConflict", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no racer swapped", round)
		}
		if results[winner].Version != read.Version+1 {
			t.Fatalf("round %d: the winner got version %d, want %d", round, results[winner].Version, read.Version+1)
		}
		for _, s := range stores {
			got, err := s.Get(ctx, "er_1")
			if err != nil || !same(got, results[winner]) {
				t.Fatalf("round %d: stored %s, %v; want racer %d's %s", round, js(got), err, winner, js(results[winner]))
			}
		}
	}
}

// race runs fn(i) for every racer at once, released together, and returns their errors.
func race(fn func(i int) error) []error {
	errs := make([]error, Racers)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for i := range Racers {
		ready.Add(1)
		done.Go(func() {
			ready.Done()
			<-start
			errs[i] = fn(i)
		})
	}
	ready.Wait()
	close(start)
	done.Wait()
	return errs
}

// testReplica: what one store writes, the other reads at once (every read is strongly
// consistent), and a swap from a version read on one store is refused on the other once
// the first moved on.
func testReplica(t *testing.T, f Fixture) {
	if f.Replica == nil {
		t.Skipf("no replica: %s", f.NoReplica)
	}
	ctx := context.Background()
	a := f.New(t)
	b := f.Replica(t, a)
	for i := range 5 {
		id := fmt.Sprintf("er_%d", i)
		must(t, a.Create(ctx, Record(id, T0.Add(time.Duration(i)*time.Second))))
		if got, err := b.Get(ctx, id); err != nil || got.RequestID != id {
			t.Fatalf("the replica's Get right after Create: %s, %v", js(got), err)
		}
		if rs, err := b.List(ctx); err != nil || len(rs) != i+1 {
			t.Fatalf("the replica's List right after Create: %d records, %v; want %d", len(rs), err, i+1)
		}
		must(t, b.PutHold(ctx, workflow.Hold{ID: id, TenantID: "acme", LegalBasis: "litigation", CreatedAt: T0}))
		if hs, err := a.Holds(ctx); err != nil || len(hs) != i+1 {
			t.Fatalf("Holds right after the replica's PutHold: %d, %v; want %d", len(hs), err, i+1)
		}
	}
	onA, err := a.Get(ctx, "er_0")
	must(t, err)
	onB, err := b.Get(ctx, "er_0")
	must(t, err)
	moved, err := onB.Move(workflow.Cancel, workflow.Cancelled, "alice", T0)
	must(t, err)
	_, err = b.Swap(ctx, moved)
	must(t, err)
	onA.ApprovedBy = "late"
	if _, err := a.Swap(ctx, onA); !errors.Is(err, workflow.ErrConflict) {
		t.Fatalf("Swap of a version the replica has replaced: %v, want ErrConflict", err)
	}
	if got, _ := a.Get(ctx, "er_0"); got.State != workflow.Cancelled || got.Version != 2 {
		t.Errorf("after the replica's Swap: %s", js(got))
	}
}

// same reports whether two records are equal as stored (their JSON).
func same(a, b workflow.Record) bool { return js(a) == js(b) }

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
