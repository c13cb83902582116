package s3prefixstore

import (
	"context"
	"strings"
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

// TestWorkerReportsLockedUpload: through the worker, over Kafka, with the example
// inventory, a subject's uploads and session documents are erased; with one upload under a
// legal hold the store is FAILED naming it and the reason, and the report holds no raw
// identifier.
func TestWorkerReportsLockedUpload(t *testing.T) {
	for _, locked := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "locked"}[locked], func(t *testing.T) {
			w := newWorld(t)
			inv, err := inventory.Load("../../deploy/examples/inventory-s3prefix.yaml")
			if err != nil {
				t.Fatal(err)
			}
			s := deletion.Subject{Tenant: "acme", ID: "cust-4711", Sessions: []string{"sess-4711"}}
			want := w.seed(t, s, 2)
			if locked {
				key := userPrefix(s) + "id-card.png"
				hold(t, w, key, w.put(t, uploadsBucket, key, "held"))
			}
			b := testenv.Kafka(t, 1, event.TopicStoreDone, event.TopicStoreFound)
			wk := &worker.Worker{
				Inventory: inv,
				Stores:    map[string]deletion.Store{Kind: New(w.client)},
				Producer:  testenv.Producer(t, b),
				Attempts:  2,
				Backoff:   retry.Backoff{Base: time.Millisecond, Max: time.Millisecond},
			}
			req := event.Requested{
				RequestID:        "er_1",
				TenantID:         s.Tenant,
				SubjectHash:      "h",
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
			if err := wk.Handle(context.Background(), &kgo.Record{Topic: event.TopicRequested, Key: []byte("er_1"), Value: val}); err != nil {
				t.Fatal(err)
			}
			recs := testenv.ReadTopic(t, b.Brokers, event.TopicStoreDone)
			if len(recs) != 1 {
				t.Fatalf("%d reports, want the uploads store's", len(recs))
			}
			var d event.StoreDone
			if err := event.Done.Decode(recs[0].Value, &d); err != nil {
				t.Fatal(err)
			}
			if d.Deleted() != int64(want) {
				t.Errorf("deleted %d, seeded %d", d.Deleted(), want)
			}
			if !locked && (d.Status != event.StatusDeleted || !d.Verification.Clean()) {
				t.Errorf("status %s verification %+v error %q; want DELETED and clean", d.Status, d.Verification, d.Error)
			}
			if locked && (d.Status != event.StatusFailed || d.Verification.Unexamined != 1 ||
				!strings.Contains(d.Error, "s3://lethe-uploads/{tenant}/users/{subject}/id-card.png version ") ||
				!strings.Contains(d.Error, "object lock legal hold")) {
				t.Errorf("status %s verification %+v error %q; want FAILED naming the held upload", d.Status, d.Verification, d.Error)
			}
			if strings.Contains(string(recs[0].Value), "4711") {
				t.Errorf("the report holds a raw identifier: %q", recs[0].Value)
			}
		})
	}
}
