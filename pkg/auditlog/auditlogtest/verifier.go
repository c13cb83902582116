package auditlogtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// VerifierFixture binds the deletion conformance suite (deletiontest.Run) to the audit_log
// Verifier over s, an empty store. Seed writes hash-only events with auditlog.Writer; Count
// uses its own, simpler rule than the Verifier (a path segment, chunk id or model equal to
// a raw identifier); Taint appends an event whose path holds the subject id. unreadable,
// when set, becomes the fixture's Unreadable hook: it stores an event item of the subject
// that s cannot decode.
func VerifierFixture(t *testing.T, s auditlog.Store, unreadable func(t testing.TB, sub deletion.Subject)) deletiontest.Fixture {
	t.Helper()
	ctx := context.Background()
	sts := inventory.Reference().OfKinds(auditlog.Kind)
	if len(sts) != 1 {
		t.Fatalf("reference inventory has %d audit_log stores, want 1", len(sts))
	}
	w := auditlog.NewWriter(s, deletiontest.Key)
	return deletiontest.Fixture{
		Impl:  auditlog.NewVerifier(s),
		Store: sts[0],
		Seed: func(t *testing.T, sub deletion.Subject, n int) int {
			for i := range n {
				for _, ses := range append([]string{""}, sub.Sessions...) {
					err := w.Query(ctx, sub.Tenant, sub.ID, ses, "where is my order?", []string{fmt.Sprintf("chunk-%d", i)}, "gpt-4o-mini", "/v1/chat")
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			return 0 // hash-only events: nothing to erase
		},
		Count: func(t *testing.T, sub deletion.Subject) int {
			evs, err := s.Events(ctx, sub.Tenant, sub.Hash)
			if err != nil {
				t.Fatal(err)
			}
			ids := append([]string{sub.ID}, sub.Sessions...)
			n := 0
			for _, e := range evs {
				vals := append(append(strings.Split(e.Path, "/"), e.ChunkIDs...), e.Model)
				if anyEqual(vals, ids) {
					n++
				}
			}
			return n
		},
		Taint: func(t *testing.T, sub deletion.Subject) {
			err := s.AppendEvent(ctx, auditlog.Event{
				EventID: "taint", TenantID: sub.Tenant, SubjectHash: sub.Hash, KeyID: deletiontest.Key.ID(),
				Type: "query", Path: "/v1/customers/" + sub.ID + "/orders", At: time.Now().UTC(),
			})
			if err != nil {
				t.Fatal(err)
			}
		},
		Unreadable: unreadable,
	}
}

func anyEqual(vals, ids []string) bool {
	for _, v := range vals {
		for _, id := range ids {
			if v == id {
				return true
			}
		}
	}
	return false
}
