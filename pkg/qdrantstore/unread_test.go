package qdrantstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// TestUnreadableCollectionFailsTheStore: a collection the deleter may not read (Qdrant's
// per-collection access control answers PermissionDenied) is a location that was not
// examined, so the store reports FAILED with the reason through the worker, never
// "remaining 0".
func TestUnreadableCollectionFailsTheStore(t *testing.T) {
	e := newEnv(t)
	s := deletiontest.NewSubject("acme", "cust-1")
	e.seed(t, s, 3)
	e.srv.InjectFault(qdrantfake.Fault{Method: "Count", Code: codes.PermissionDenied, Message: "access to collection denied"})

	inv := inventory.Reference()
	b := testenv.Kafka(t, 1, event.TopicStoreDone)
	w := &worker.Worker{
		Inventory: inv,
		Stores:    map[string]deletion.Store{qdrantstore.Kind: e.store},
		Producer:  testenv.Producer(t, b),
		Attempts:  2,
		Backoff:   retry.Backoff{Base: time.Millisecond, Max: time.Millisecond},
	}
	req := event.Requested{
		RequestID:        "er_1",
		TenantID:         s.Tenant,
		SubjectHash:      s.Hash,
		Identifiers:      event.Identifiers{SubjectID: s.ID, SessionIDs: s.Sessions},
		Scope:            event.ScopeSubject,
		Regulation:       "GDPR",
		RequestedAt:      time.Now(),
		DueAt:            time.Now().Add(time.Hour),
		InventoryVersion: inv.Version,
		ExpectedStores:   inv.Names(),
	}
	val, err := event.Request.Encode(&req)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(context.Background(), &kgo.Record{Topic: event.TopicRequested, Key: []byte("er_1"), Value: val}); err != nil {
		t.Fatal(err)
	}
	recs := testenv.ReadTopic(t, b.Brokers, event.TopicStoreDone)
	if len(recs) != 1 {
		t.Fatalf("%d reports, want the qdrant store's", len(recs))
	}
	var d event.StoreDone
	if err := event.Done.Decode(recs[0].Value, &d); err != nil {
		t.Fatal(err)
	}
	if d.Status != event.StatusFailed || d.Verification.Clean() || !strings.Contains(d.Error, "PermissionDenied") {
		t.Errorf("report %s verification %+v error %q, want FAILED naming the refusal", d.Status, d.Verification, d.Error)
	}
	if strings.Contains(d.Error, s.ID) || strings.Contains(d.Error, s.Sessions[0]) {
		t.Errorf("report error names a raw identifier: %q", d.Error)
	}
}
