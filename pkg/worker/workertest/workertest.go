// Package workertest runs one erasure request through the deleter runtime, for the tests of
// store packages: a worker.Worker over an in-process Kafka broker, the way a deleter service
// runs it, with a retry budget short enough for tests.
package workertest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// Reports hands a request to erase s (every store of inv expected) to a worker serving
// kind with impl, and returns the reports it published on erasure.store.done, by store. It
// fails t when handling fails or when any report holds one of s's raw identifiers (use
// identifiers that cannot occur in a report by chance: 4 characters or more are checked).
func Reports(t testing.TB, inv *inventory.Inventory, kind string, impl deletion.Store, s deletion.Subject) map[string]event.StoreDone {
	t.Helper()
	b := testenv.Kafka(t, 1, event.TopicStoreDone)
	w := &worker.Worker{
		Inventory: inv,
		Stores:    map[string]deletion.Store{kind: impl},
		Producer:  testenv.Producer(t, b),
		Attempts:  2,
		Backoff:   retry.Backoff{Base: time.Millisecond, Max: time.Millisecond},
	}
	scope := s.Scope
	if scope == "" {
		scope = event.ScopeSubject
	}
	req := event.Requested{
		RequestID:        "er_workertest",
		TenantID:         s.Tenant,
		SubjectHash:      s.Hash,
		KeyID:            "test",
		Identifiers:      event.Identifiers{SubjectID: s.ID, SessionIDs: s.Sessions},
		Scope:            scope,
		Regulation:       "GDPR",
		RequestedAt:      time.Now(),
		DueAt:            time.Now().Add(time.Hour),
		InventoryVersion: inv.Version,
		ExpectedStores:   inv.Names(),
		Attempt:          1,
	}
	val, err := event.Request.Encode(&req)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(context.Background(), &kgo.Record{Topic: event.TopicRequested, Key: []byte(req.RequestID), Value: val}); err != nil {
		t.Fatalf("worker: %v", err)
	}
	out := map[string]event.StoreDone{}
	for _, r := range testenv.ReadTopic(t, b.Brokers, event.TopicStoreDone) {
		var d event.StoreDone
		if err := event.Done.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		out[d.Store] = d
		for _, id := range append([]string{s.ID}, s.Sessions...) {
			if len(id) >= 4 && bytes.Contains(r.Value, []byte(id)) {
				t.Errorf("the report of %s holds a raw identifier", d.Store)
			}
		}
	}
	return out
}
