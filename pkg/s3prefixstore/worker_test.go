package s3prefixstore

import (
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/worker/workertest"
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
			reports := workertest.Reports(t, inv, Kind, New(w.client, WithKey(deletiontest.Key)), s)
			if len(reports) != 1 {
				t.Fatalf("%d reports, want the uploads store's", len(reports))
			}
			var d event.StoreDone
			for _, d = range reports {
			}
			if d.Deleted() != int64(want) {
				t.Errorf("deleted %d, seeded %d", d.Deleted(), want)
			}
			if !locked && (d.Status != event.StatusDeleted || !d.Verification.Clean()) {
				t.Errorf("status %s verification %+v error %q; want DELETED and clean", d.Status, d.Verification, d.Error)
			}
			if locked && (d.Status != event.StatusFailed || d.Verification.Unexamined != 1 ||
				!strings.Contains(d.Error, deletion.NewItemNames(deletiontest.Key).Name("s3://lethe-uploads/{tenant}/users/{subject}/", "id-card.png", "s3://lethe-uploads/"+userPrefix(s)+"id-card.png")+" version ") ||
				strings.Contains(d.Error, "id-card") ||
				!strings.Contains(d.Error, "object lock legal hold")) {
				t.Errorf("status %s verification %+v error %q; want FAILED naming the held upload", d.Status, d.Verification, d.Error)
			}
		})
	}
}
