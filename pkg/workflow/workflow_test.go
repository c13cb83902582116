package workflow

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/wal"
)

var at = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// Every state and action: exactly the transitions of the package's diagram are allowed,
// and the final states allow none.
func TestStateMachine(t *testing.T) {
	allowed := map[[3]string]bool{
		{"PREVIEWED", "confirm", "AWAITING_APPROVAL"}: true,
		{"PREVIEWED", "confirm", "SCHEDULED"}:         true,
		{"PREVIEWED", "confirm", "RELEASED"}:          true,
		{"AWAITING_APPROVAL", "approve", "SCHEDULED"}: true,
		{"AWAITING_APPROVAL", "approve", "RELEASED"}:  true,
		{"AWAITING_APPROVAL", "reject", "REJECTED"}:   true,
		{"AWAITING_APPROVAL", "cancel", "CANCELLED"}:  true,
		{"SCHEDULED", "cancel", "CANCELLED"}:          true,
		{"SCHEDULED", "due", "RELEASED"}:              true,
	}
	states := []State{Previewed, Scheduled, Cancelled, AwaitingApproval, Rejected, Released}
	for _, from := range states {
		for _, a := range []Action{Confirm, Cancel, Approve, Reject, Due} {
			for _, to := range states {
				want := allowed[[3]string{string(from), string(a), string(to)}]
				if got := Allowed(from, a, to); got != want {
					t.Errorf("%s -%s-> %s: allowed %v, want %v", from, a, to, got, want)
				}
				r, err := Record{State: from}.Move(a, to, "dpo", at)
				if want != (err == nil) || (!want && !errors.Is(err, ErrTransition)) {
					t.Errorf("%s -%s-> %s: Move error %v", from, a, to, err)
				}
				if want && (r.State != to || len(r.History) != 1 || r.History[0].Actor != "dpo" || r.History[0].From != from) {
					t.Errorf("%s -%s-> %s: record %+v", from, a, to, r)
				}
			}
		}
	}
	for _, s := range []State{Cancelled, Rejected, Released} {
		if !Final(s) {
			t.Errorf("%s is not final", s)
		}
	}
}

// Next: approval first, then the window, then release.
func TestNext(t *testing.T) {
	for _, tc := range []struct {
		r    Record
		want State
	}{
		{Record{}, Released},
		{Record{Window: time.Hour}, Scheduled},
		{Record{NeedsApproval: true, Window: time.Hour}, AwaitingApproval},
		{Record{NeedsApproval: true, ApprovedBy: "dpo", Window: time.Hour}, Scheduled},
		{Record{NeedsApproval: true, ApprovedBy: "dpo"}, Released},
	} {
		if got := tc.r.Next(); got != tc.want {
			t.Errorf("%+v: next %s, want %s", tc.r, got, tc.want)
		}
	}
}

// The file store survives a reopen (a restart), compares versions on Swap and refuses a
// second Create.
func TestFileStoreSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "workflow.json")
	s, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := Record{RequestID: "er_1", TenantID: "acme", State: Scheduled, ExecuteAt: at.Add(time.Hour), SubmittedAt: at}
	if err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, r); !errors.Is(err, ErrExists) {
		t.Errorf("second Create: %v", err)
	}
	h := Hold{ID: "hold_1", TenantID: "acme", Store: "dataset", LegalBasis: "litigation", CreatedAt: at}
	if err := s.PutHold(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(path); !errors.Is(err, wal.ErrInUse) {
		t.Errorf("second open while the first is open: %v, want wal.ErrInUse", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s2.Get(ctx, "er_1")
	if err != nil || got.State != Scheduled || !got.ExecuteAt.Equal(r.ExecuteAt) || got.Version != 1 {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
	moved, _ := got.Move(Cancel, Cancelled, "alice", at)
	if _, err := s2.Swap(ctx, moved); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Swap(ctx, moved); !errors.Is(err, ErrConflict) {
		t.Errorf("stale Swap: %v", err)
	}
	hs, _ := s2.Holds(ctx)
	if len(hs) != 1 || hs[0] != h {
		t.Errorf("holds after reopen: %+v", hs)
	}
}

// A hold covers its tenant's store for its subject (and TENANT requests), never another
// tenant, store or subject, and nothing once released.
func TestHoldCovers(t *testing.T) {
	h := Hold{ID: "h", TenantID: "acme", SubjectHash: "p1", Store: "dataset"}
	for _, tc := range []struct {
		tenant, subj, store string
		tenantScope         bool
		want                bool
	}{
		{"acme", "p1", "dataset", false, true},
		{"acme", "p2", "dataset", false, false},
		{"acme", "p1", "qdrant", false, false},
		{"globex", "p1", "dataset", false, false},
		{"acme", "tenant", "dataset", true, true},
	} {
		if got := h.Covers(tc.tenant, tc.subj, tc.store, tc.tenantScope); got != tc.want {
			t.Errorf("%+v: %v", tc, got)
		}
	}
	if (Hold{TenantID: "acme"}).Covers("acme", "any", "qdrant", false) != true {
		t.Error("a tenant-wide hold of every store covers every subject and store")
	}
	h.ReleasedAt = at
	if h.Covers("acme", "p1", "dataset", false) {
		t.Error("a released hold covers")
	}
}
