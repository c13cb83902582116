package qdrantstore_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/worker/workertest"
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

	d := workertest.Reports(t, inventory.Reference(), qdrantstore.Kind, e.store, s)["qdrant"]
	if d.Status != event.StatusFailed || d.Verification.Clean() || !strings.Contains(d.Error, "PermissionDenied") {
		t.Errorf("report %s verification %+v error %q, want FAILED naming the refusal", d.Status, d.Verification, d.Error)
	}
}
