package auditlog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/auditlogtest"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

func auditStore(t *testing.T) inventory.Entry {
	t.Helper()
	sts := inventory.Reference().OfKinds(auditlog.Kind)
	if len(sts) != 1 {
		t.Fatalf("reference inventory has %d audit_log stores, want 1", len(sts))
	}
	return sts[0]
}

func TestVerifierConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	deletiontest.Run(t, func(t *testing.T) deletiontest.Fixture {
		s := openDir(t)
		f := auditlogtest.VerifierFixture(t, s, func(t testing.TB, sub deletion.Subject) {
			must(t, s.AppendRawEvent(ctx, rawEvent(sub, "unreadable", `"at": "yesterday"`)))
		})
		f.NoDown = "the directory audit store is local files, with no server to lose"
		return f
	})
}

// rawEvent is the JSON of an event of sub with id and the fields in extra, as an app of
// another version could write it.
func rawEvent(sub deletion.Subject, id, extra string) []byte {
	return []byte(fmt.Sprintf(`{"event_id": %q, "tenant_id": %q, "subject_hash": %q, %s}`, id, sub.Tenant, sub.Hash, extra))
}

func TestVerifierFindings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sub := deletiontest.NewSubject("acme", "cust-1")
	clean := auditlog.Event{TenantID: "acme", SubjectHash: sub.Hash, KeyID: "test", Type: "query",
		QueryFingerprint: deletiontest.Key.Fingerprint("acme", "cust-1", "", "q"), ChunkIDs: []string{"chunk-1"},
		Model: "gpt-4o-mini", Path: "/v1/chat"}
	cases := []struct {
		name  string
		edit  func(e *auditlog.Event)
		taint bool
	}{
		{"clean", func(e *auditlog.Event) {}, false},
		{"id in path", func(e *auditlog.Event) { e.Path = "/customers/cust-1/orders" }, true},
		{"id is the whole field", func(e *auditlog.Event) { e.Model = "cust-1" }, true},
		{"session in chunk ids", func(e *auditlog.Event) { e.ChunkIDs = append(e.ChunkIDs, "sess-cust-1") }, true},
		{"id as query fingerprint", func(e *auditlog.Event) { e.QueryFingerprint = "cust-1" }, true},
		{"id in event id", func(e *auditlog.Event) { e.EventID = "cust-1:42" }, true},
		{"email", func(e *auditlog.Event) { e.Path = "/v1/chat?u=jane.doe+x@example.co.uk" }, true},
		{"phone", func(e *auditlog.Event) { e.Model = "call +44 20 7946 0958" }, true},
		{"phone digits only", func(e *auditlog.Event) { e.ChunkIDs = []string{"+4915112345678"} }, true},
		{"longer id is another subject", func(e *auditlog.Event) { e.Path = "/customers/cust-10" }, false},
		{"id inside a word", func(e *auditlog.Event) { e.Path = "/customers/xcust-1" }, false},
		{"different case", func(e *auditlog.Event) { e.Path = "/customers/CUST-1" }, false},
		{"short digits are no phone", func(e *auditlog.Event) { e.Path = "/v1/chat?n=+1234" }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := openDir(t)
			e := clean
			e.EventID, e.At = "e-1", time.Now().UTC()
			c.edit(&e)
			must(t, s.AppendEvent(ctx, e))
			must(t, s.AppendEvent(ctx, auditlog.Event{EventID: "e-2", TenantID: "acme", SubjectHash: sub.Hash, Type: "query", At: e.At}))
			v, err := auditlog.NewVerifier(s).Verify(ctx, auditStore(t), sub)
			must(t, err)
			want := int64(0)
			if c.taint {
				want = 1
			}
			if v.Remaining != want {
				t.Errorf("Verify(%s) remaining %d, want %d", js(e), v.Remaining, want)
			}
			// The verifier's own report says FAILED when it finds personal data: no
			// other service needs to know what audit_log means.
			res, err := auditlog.NewVerifier(s).Erase(ctx, auditStore(t), sub)
			must(t, err)
			if got, wantStatus := deletion.StatusOf(res, v), map[bool]event.Status{true: event.StatusFailed, false: event.StatusNoPII}[c.taint]; got != wantStatus {
				t.Errorf("status %s, want %s", got, wantStatus)
			}
			if v.Method != "audit events scanned for raw identifiers and PII patterns: 2 events" {
				t.Errorf("method %q", v.Method)
			}
			if strings.Contains(v.Method, sub.ID) {
				t.Error("method holds the raw identifier")
			}
		})
	}
}

func TestVerifierScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openDir(t)
	v := auditlog.NewVerifier(s)
	sub := deletiontest.NewSubject("acme", "cust-1")
	res, err := v.Erase(ctx, auditStore(t), sub)
	if err != nil || !res.NoPIIByDesign || len(res.Locations) != 0 {
		t.Errorf("Erase = %+v, %v; want NoPIIByDesign and no locations", res, err)
	}
	if st := deletion.StatusOf(res, event.Verification{}); st != event.StatusNoPII {
		t.Errorf("status %s, want %s", st, event.StatusNoPII)
	}
	tenant := deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}
	ver, err := v.Verify(ctx, auditStore(t), tenant)
	if err != nil || ver.Remaining != 0 || !strings.Contains(ver.Method, "not scanned") {
		t.Errorf("tenant-scope Verify = %+v, %v", ver, err)
	}
	sub.Hash = ""
	if _, err := v.Verify(ctx, auditStore(t), sub); !retry.IsPermanent(err) {
		t.Errorf("Verify without a pseudonym: %v, want a permanent error", err)
	}
}

func TestWriterStoresNoRawValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openDir(t)
	w := auditlog.NewWriter(s, deletiontest.Key)
	must(t, w.Query(ctx, "acme", "alice@example.com", "session-xyz", "my secret question", []string{"c1"}, "m", "/v1/chat"))
	must(t, w.Query(ctx, "acme", "alice@example.com", "session-xyz", "my secret question", nil, "m", "/v1/chat"))
	h := deletiontest.Key.Pseudonym("acme", "alice@example.com")
	evs, err := s.Events(ctx, "acme", h)
	must(t, err)
	if len(evs) != 2 || evs[0].EventID == evs[1].EventID {
		t.Fatalf("Events = %s, want 2 events with distinct ids", js(evs))
	}
	e := evs[0]
	fp := deletiontest.Key.Fingerprint("acme", "alice@example.com", "session-xyz", "my secret question")
	if e.Type != auditlog.TypeQuery || e.KeyID != "test" || e.QueryFingerprint != fp || e.At.IsZero() {
		t.Errorf("event = %s", js(e))
	}
	for _, raw := range []string{"alice", "session-xyz", "secret"} {
		if strings.Contains(js(evs), raw) {
			t.Errorf("stored events hold %q: %s", raw, js(evs))
		}
	}
	sub := deletiontest.NewSubject("acme", "alice@example.com")
	if v, err := auditlog.NewVerifier(s).Verify(ctx, auditStore(t), sub); err != nil || v.Remaining != 0 {
		t.Errorf("Verify of Writer's events = %+v, %v", v, err)
	}
	if err := w.Query(ctx, "acme", "", "s", "q", nil, "", ""); !retry.IsPermanent(err) {
		t.Errorf("Query without a subject: %v, want a permanent error", err)
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestVerifierValidate(t *testing.T) {
	v := auditlog.NewVerifier(nil)
	if err := v.Validate(inventory.Reference().OfKinds(auditlog.Kind)[0]); err != nil {
		t.Fatalf("reference store: %v", err)
	}
	bad := inventory.Entry{Name: "audit", Kind: auditlog.Kind, Locators: inventory.Locators{"table": "x"}}
	err := v.Validate(bad)
	if err == nil || !strings.Contains(err.Error(), `store "audit"`) || !strings.Contains(err.Error(), `unknown field "table"`) {
		t.Errorf("Validate with a locator = %v, want an error naming the store and the field", err)
	}
	if _, err := v.Erase(context.Background(), bad, deletion.Subject{}); !retry.IsPermanent(err) {
		t.Errorf("Erase of an invalid store = %v, want permanent", err)
	}
}
