package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// countingStore is a fakeStore that can also count (deletion.Counter).
type countingStore struct{ *fakeStore }

func (c countingStore) Count(_ context.Context, st inventory.Entry, s deletion.Subject) ([]event.LocationCount, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call{"count", st.Name, s})
	return []event.LocationCount{{Location: "key:" + s.Tenant + ":{subject}:*", Deleted: c.by[st.Name].items}}, nil
}

// A dry run counts through Counter and erases nothing; a store without Counter reports
// FAILED "dry run not supported" and is not erased either.
func TestDryRunCountsAndErasesNothing(t *testing.T) {
	counting := countingStore{newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {}})}
	plain := newFake(map[string]*behaviour{"audit_log": {noPII: true}})
	w, addrs := setup(t, map[string]deletion.Store{"redis": counting, "audit_log": plain})
	req := request(allStores, nil, 1)
	req.DryRun = true
	if err := w.Handle(context.Background(), record(t, req)); err != nil {
		t.Fatal(err)
	}
	if n := len(counting.erased()) + len(plain.erased()); n != 0 {
		t.Fatalf("a dry run erased %d stores", n)
	}
	got := reports(t, addrs)
	if d := got["redis"]; !d.DryRun || d.Status != event.StatusDeleted || d.Deleted() != 3 || counting.by["redis"].items != 3 {
		t.Errorf("redis: %+v, items left %d", d, counting.by["redis"].items)
	}
	if d := got["langgraph"]; !d.DryRun || d.Status != event.StatusNothingFound {
		t.Errorf("langgraph: %+v", d)
	}
	if d := got["audit_log"]; !d.DryRun || d.Status != event.StatusFailed || d.Error != deletion.ErrDryRunUnsupported.Error() {
		t.Errorf("audit_log without Counter: %+v", d)
	}
}

// The audit log holds pseudonyms only: a dry run previews it as NO_PII_BY_DESIGN, as its
// erasure reports it, not as FAILED.
func TestDryRunOfTheAuditLog(t *testing.T) {
	dir, err := auditlog.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	w, addrs := setup(t, map[string]deletion.Store{"audit_log": auditlog.NewVerifier(dir)})
	req := request(allStores, nil, 1)
	req.DryRun = true
	if err := w.Handle(context.Background(), record(t, req)); err != nil {
		t.Fatal(err)
	}
	d := reports(t, addrs)["audit_log"]
	if !d.DryRun || d.Status != event.StatusNoPII || d.Error != "" {
		t.Errorf("audit_log dry run: %+v; want NO_PII_BY_DESIGN", d)
	}
}

// A store under a legal hold is neither read nor erased: it reports EXEMPT with the basis;
// the other stores erase as usual.
func TestExemptStoreIsNotErased(t *testing.T) {
	f := newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {items: 2}})
	w, addrs := setup(t, map[string]deletion.Store{"redis": f})
	req := request(allStores, nil, 1)
	req.Exempt = []event.Exemption{{Store: "langgraph", HoldID: "hold_1", LegalBasis: "GDPR Art. 17(3)(e)"}}
	if err := w.Handle(context.Background(), record(t, req)); err != nil {
		t.Fatal(err)
	}
	if e := f.erased(); e["langgraph"] != 0 || e["redis"] != 1 {
		t.Errorf("erased %v, want redis only", e)
	}
	got := reports(t, addrs)
	d := got["langgraph"]
	if d.Status != event.StatusExempt || !strings.Contains(d.Verification.Method, "GDPR Art. 17(3)(e)") || f.by["langgraph"].items != 2 {
		t.Errorf("langgraph: %+v", d)
	}
	if got["redis"].Status != event.StatusDeleted {
		t.Errorf("redis: %+v", got["redis"])
	}
}
