package auditlogtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
)

func suppressionStore(t *testing.T, s auditlog.Store) auditlog.SuppressionStore {
	t.Helper()
	ss, ok := s.(auditlog.SuppressionStore)
	if !ok {
		t.Fatalf("%T does not implement auditlog.SuppressionStore", s)
	}
	return ss
}

func entry(tenant, label, requestID string) event.Suppression {
	return event.Suppression{TenantID: tenant, Pseudonym: Hash(label), KeyID: "k1", Kind: event.SuppressSubject,
		RequestID: requestID, ReceiptID: "rcpt-" + requestID, SuppressedAt: T0}
}

// testSuppressions checks the list's rules on the store: entries are per tenant and
// pseudonym, suppressing is idempotent, a stale version conflicts, a lift is kept against
// the request it lifted and undone only by a later request.
func testSuppressions(t *testing.T, s auditlog.Store) {
	ss := suppressionStore(t, s)
	ctx := context.Background()
	if _, err := ss.GetSuppression(ctx, "acme", Hash("ann")); !errors.Is(err, auditlog.ErrNotFound) {
		t.Fatalf("GetSuppression before any = %v, want ErrNotFound", err)
	}
	got, changed, err := auditlog.Suppress(ctx, ss, entry("acme", "ann", "r-1"), T0)
	must(t, err)
	if !changed || got.Version != 1 || !got.Active() {
		t.Fatalf("first Suppress = %+v, %v; want version 1, suppressed, changed", got, changed)
	}
	again, changed, err := auditlog.Suppress(ctx, ss, entry("acme", "ann", "r-2"), T0.Add(time.Hour))
	must(t, err)
	if changed || again.RequestID != "r-1" || again.Version != 1 {
		t.Errorf("second Suppress = %+v, %v; want the first entry unchanged", again, changed)
	}
	stored, err := ss.GetSuppression(ctx, "acme", Hash("ann"))
	must(t, err)
	if !sameJSON(stored, got) {
		t.Errorf("stored %s, want %s", js(stored), js(got))
	}
	// The same pseudonym value in another tenant, and a pseudonym with a shared prefix.
	for _, k := range [][2]string{{"acme2", Hash("ann")}, {"acm", Hash("ann")}, {"acme", Hash("ann")[:10]}} {
		if _, err := ss.GetSuppression(ctx, k[0], k[1]); !errors.Is(err, auditlog.ErrNotFound) {
			t.Errorf("GetSuppression(%s, %s) = %v, want ErrNotFound", k[0], k[1], err)
		}
	}
	stale := got
	stale.Version = 1
	if err := ss.SwapSuppression(ctx, 0, stale); !errors.Is(err, auditlog.ErrConflict) {
		t.Errorf("SwapSuppression over an entry with old version 0 = %v, want ErrConflict", err)
	}

	liftAt := T0.Add(2 * time.Hour)
	lifted, changed, err := auditlog.Lift(ctx, ss, "acme", Hash("ann"), "privacy-desk", "lift-1", liftAt)
	must(t, err)
	if !changed || lifted.State != event.Lifted || lifted.Version != 2 || lifted.LiftedBy != "privacy-desk" ||
		lifted.LiftEventID != "lift-1" || lifted.LiftedAt == nil || !lifted.LiftedAt.Equal(liftAt) || lifted.RequestID != "r-1" {
		t.Fatalf("Lift = %+v, %v", lifted, changed)
	}
	if _, changed, err := auditlog.Lift(ctx, ss, "acme", Hash("ann"), "x", "lift-2", liftAt); err != nil || changed {
		t.Errorf("second Lift changed = %v, %v; want unchanged", changed, err)
	}
	if _, _, err := auditlog.Lift(ctx, ss, "acme", Hash("bob"), "x", "lift-3", liftAt); !errors.Is(err, auditlog.ErrNotFound) {
		t.Errorf("Lift of a pseudonym never suppressed = %v, want ErrNotFound", err)
	}
	// The request the lift superseded, handled again, keeps it lifted; a later one does not.
	if cur, changed, err := auditlog.Suppress(ctx, ss, entry("acme", "ann", "r-1"), T0); err != nil || changed || cur.State != event.Lifted {
		t.Errorf("Suppress by the lifted request = %+v, %v, %v; want still lifted", cur, changed, err)
	}
	re, changed, err := auditlog.Suppress(ctx, ss, entry("acme", "ann", "r-3"), liftAt.Add(time.Minute))
	must(t, err)
	if !changed || !re.Active() || re.Version != 3 || re.RequestID != "r-3" || re.LiftedAt != nil || re.LiftedBy != "" {
		t.Errorf("Suppress by a request after the lift = %+v, %v; want suppressed again, version 3", re, changed)
	}
}

// testSuppressConcurrent: writers suppressing the same pseudonym at once write it once.
func testSuppressConcurrent(t *testing.T, s auditlog.Store) {
	ss := suppressionStore(t, s)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	writes := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := entry("acme", "carol", "r-"+string(rune('a'+i)))
			_, changed, err := auditlog.Suppress(ctx, ss, e, T0)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			if changed {
				writes++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if got, err := ss.GetSuppression(ctx, "acme", Hash("carol")); writes != 1 || err != nil || got.Version != 1 {
		t.Errorf("%d writers changed the entry (want 1); stored %+v, %v", writes, got, err)
	}
}
