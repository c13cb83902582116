package webhookstore

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// TestWorkerReportsTheAttestation runs the deleter runtime on a request (kfake) against the
// reference receiver answering 202: the store's report is DELETED with the processor's
// count, method and attestation, which the receipt copies, and holds no raw identifier.
func TestWorkerReportsTheAttestation(t *testing.T) {
	p := newProcessor(t, true, nil)
	s := deletiontest.NewSubject("acme", "cust-worker")
	want := p.fixture(t).Seed(t, s, 2)
	inv := &inventory.Inventory{Version: "test-1", Stores: []inventory.Store{p.store}}
	b := testenv.Kafka(t, 1, event.TopicStoreDone, event.TopicStoreFound)
	w := &worker.Worker{Inventory: inv, Stores: map[string]deletion.Store{Kind: p.impl}, Producer: testenv.Producer(t, b)}
	req := event.Requested{
		RequestID: "er_webhook", TenantID: s.Tenant, SubjectHash: s.Hash, KeyID: "test",
		Identifiers: event.Identifiers{SubjectID: s.ID, SessionIDs: s.Sessions},
		Scope:       event.ScopeSubject, Regulation: "GDPR", RequestedAt: time.Now(), DueAt: time.Now().Add(time.Hour),
		InventoryVersion: inv.Version, ExpectedStores: []string{p.store.Name},
	}
	v, err := event.Request.Encode(&req)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(t.Context(), &kgo.Record{Topic: event.TopicRequested, Key: []byte(req.RequestID), Value: v}); err != nil {
		t.Fatal(err)
	}
	recs := testenv.ReadTopic(t, b.Brokers, event.TopicStoreDone)
	if len(recs) != 1 {
		t.Fatalf("%d reports, want 1", len(recs))
	}
	var d event.StoreDone
	if err := event.Done.Decode(recs[0].Value, &d); err != nil {
		t.Fatal(err)
	}
	if d.Status != event.StatusDeleted || d.Deleted() != int64(want) || d.Verification.Method != Method ||
		d.Verification.Attestation == "" || !d.Verification.Clean() {
		t.Errorf("report %+v; want DELETED %d with the processor's attestation", d, want)
	}
	if bytes.Contains(recs[0].Value, []byte(s.ID)) || bytes.Contains(recs[0].Value, []byte(s.Sessions[0])) {
		t.Error("the report holds a raw identifier")
	}
	if n := p.handler.Store.Count(query(s)); n != 0 {
		t.Errorf("%d items remain at the processor", n)
	}
}
