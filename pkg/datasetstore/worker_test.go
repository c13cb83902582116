package datasetstore

import (
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/worker/workertest"
)

// TestWorkerFailsOnUnreadableObject: through the worker, over Kafka, a dataset prefix that
// holds an object the store cannot read makes the dataset store FAILED, naming the object
// and the reason, while the readable dataset is erased; excluding the object by pattern
// makes it DELETED with the object recorded as excluded.
func TestWorkerFailsOnUnreadableObject(t *testing.T) {
	all, _ := formatRows()
	for _, tc := range []struct {
		name    string
		exclude []string
		want    event.Status
	}{
		{"unexamined", nil, event.StatusFailed},
		{"excluded", []string{"*.xlsx"}, event.StatusDeleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newS3Client(t)
			w := s3World{c}
			w.put(t, "acme/eval/qa.csv", delimited(',').encode(t, all))
			w.put(t, "acme/eval/labels.xlsx", []byte("PK\x03\x04 a spreadsheet holding cust-1"))
			inv := inventory.Reference()
			for i := range inv.Stores {
				if inv.Stores[i].Kind == Kind {
					inv.Stores[i].Locators = inv.Stores[i].Locators.With("exclude", tc.exclude).With("mentions", MentionsRedact)
				}
			}
			s := deletion.Subject{Tenant: "acme", ID: "cust-1", Sessions: []string{"sess-cust-1"}}
			d := workertest.Reports(t, inv, Kind, New(c, "", WithKey(deletiontest.Key)), s)["dataset"]
			// 3 rows of the subject and 1 row whose text mentions it, redacted.
			if d.Status != tc.want || d.Deleted() != 4 || d.Verification.Remaining != 0 || d.Verification.Mentions != 0 {
				t.Errorf("status %s deleted %d verification %+v error %q; want %s after 3 rows and 1 redaction", d.Status, d.Deleted(), d.Verification, d.Error, tc.want)
			}
			name := deletion.NewItemNames(deletiontest.Key).Name("s3://lethe-datasets/{tenant}/", "eval/labels.xlsx", "s3://lethe-datasets/acme/eval/labels.xlsx")
			if tc.exclude == nil {
				if d.Verification.Unexamined != 1 || !strings.Contains(d.Error, name+": format not recognised") {
					t.Errorf("error %q, verification %+v; want the object named with its reason", d.Error, d.Verification)
				}
			} else if len(d.Verification.Excluded) != 1 || d.Verification.Excluded[0] != name || d.Verification.Unexamined != 0 {
				t.Errorf("verification %+v; want the object excluded", d.Verification)
			}
			if strings.Contains(d.Error, "cust-1") || strings.Contains(d.Error, "acme/") || strings.Contains(d.Error, "labels") {
				t.Errorf("error %q names the subject or the tenant's objects", d.Error)
			}
			if got := w.versions(t, "acme/eval/labels.xlsx"); len(got) != 1 || !strings.HasPrefix(string(got[0]), "PK") {
				t.Error("the unreadable object was changed")
			}
		})
	}
}
