package webhookstore

import (
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/worker/workertest"
)

// TestWorkerReportsTheAttestation runs the deleter runtime on a request (kfake) against the
// reference receiver answering 202: the store's report is DELETED with the processor's
// count, method and attestation, which the receipt copies, and holds no raw identifier.
func TestWorkerReportsTheAttestation(t *testing.T) {
	p := newProcessor(t, true, nil)
	s := deletiontest.NewSubject("acme", "cust-worker")
	want := p.fixture(t).Seed(t, s, 2)
	inv := &inventory.Inventory{Version: "test-1", Stores: []inventory.Entry{p.store}}
	d := workertest.Reports(t, inv, Kind, p.impl, s)[p.store.Name]
	if d.Status != event.StatusDeleted || d.Deleted() != int64(want) || d.Verification.Method != Method ||
		d.Verification.Attestation == "" || !d.Verification.Clean() {
		t.Errorf("report %+v; want DELETED %d with the processor's attestation", d, want)
	}
	if n := p.handler.Store.Count(query(s)); n != 0 {
		t.Errorf("%d items remain at the processor", n)
	}
}
