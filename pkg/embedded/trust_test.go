package embedded_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// Someone who can only produce to erasure.requested erases nothing: an unsigned
// whole-tenant request and an unsigned subject request are dead-lettered by every group
// that reads them, and a subject request signed with the deployment's key but carrying
// its identifiers in the clear is refused by the deleters, which report it FAILED, so no
// receipt follows. The seeded keys survive.
func TestForgedRequestsEraseNothing(t *testing.T) {
	sys := start(t)
	ctx := context.Background()
	for _, k := range []string{"session:acme:victim:1", "session:acme:victim-2:1", "cache:acme:bystander:q"} {
		if err := sys.Stack.Redis.Set(ctx, k, "turn", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	forge := func(id string, scope event.Scope, subj string) *kgo.Record {
		r := event.Requested{RequestID: id, TenantID: "acme", SubjectHash: "h", KeyID: "k1", Scope: scope, Regulation: "GDPR",
			Identifiers: event.Identifiers{SubjectID: subj, SessionIDs: []string{}}, RequestedAt: now, DueAt: now.Add(time.Hour),
			InventoryVersion: sys.Inventory.Version, ExpectedStores: sys.Inventory.Names(), OnlyStores: []string{}, Attempt: 1}
		b, err := event.Request.Encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Topic: event.TopicRequested, Key: []byte(id), Value: b}
	}
	unsealed := forge("er_unsealed", event.ScopeSubject, "victim-2")
	if err := integrity.Sign(sys.MAC, event.Request, unsealed); err != nil {
		t.Fatal(err)
	}
	produce(t, sys, forge("er_forged_tenant", event.ScopeTenant, ""), forge("er_forged_subject", event.ScopeSubject, "victim"), unsealed)

	groups := 1 + 4 // the aggregator and the four deleters read erasure.requested
	reasons, _ := dlq(t, sys, event.TopicRequested, 2*groups+4)
	unsigned, unsealedN := 0, 0
	for _, r := range reasons {
		switch {
		case strings.Contains(r, "carries no MAC"):
			unsigned++
		case strings.Contains(r, "not sealed"):
			unsealedN++
		}
	}
	if unsigned != 2*groups || unsealedN != 4 {
		t.Errorf("dead letters: %d unsigned (want %d), %d unsealed (want 4):\n%s", unsigned, 2*groups, unsealedN, strings.Join(reasons, "\n"))
	}
	for _, id := range []string{"er_forged_tenant", "er_forged_subject"} {
		if _, err := sys.Stack.Audit.GetRequest(ctx, id); !errors.Is(err, auditlog.ErrNotFound) {
			t.Errorf("forged request %s recorded: %v", id, err)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ds, err := sys.Stack.Audit.Reports(ctx, "er_unsealed")
		if err != nil {
			t.Fatal(err)
		}
		failed := 0
		for _, d := range ds {
			if d.Status == event.StatusFailed && d.Error == worker.ReasonUnsealed {
				failed++
			}
		}
		if failed == len(sys.Inventory.Stores) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reports of the unsealed request: %+v, want every store FAILED: %s", ds, worker.ReasonUnsealed)
		}
	}
	if _, err := sys.Stack.Audit.GetReceipt(ctx, "er_unsealed"); !errors.Is(err, auditlog.ErrNotFound) {
		t.Errorf("a receipt for the unsealed request: %v", err)
	}
	for _, k := range []string{"session:acme:victim:1", "session:acme:victim-2:1", "cache:acme:bystander:q"} {
		if n, err := sys.Stack.Redis.Exists(ctx, k).Result(); err != nil || n != 1 {
			t.Errorf("key %s: exists %d, %v; want it untouched", k, n, err)
		}
	}
}
