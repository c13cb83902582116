package auditlog_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// Events of the subject that do not decode are unexamined, named by position and reason
// without their content; the store still opens with them, and the verification fails.
func TestVerifierReportsUndecodableEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := auditlog.OpenDir(dir)
	must(t, err)
	sub := deletiontest.NewSubject("acme", "cust-1")
	must(t, s.AppendEvent(ctx, auditlog.Event{EventID: "ok", TenantID: "acme", SubjectHash: sub.Hash, Type: "query", At: time.Now().UTC()}))
	must(t, s.AppendRawEvent(ctx, rawEvent(sub, "bad-time", `"at": "jane.doe@example.com"`)))
	must(t, s.AppendRawEvent(ctx, rawEvent(sub, "bad-chunks", `"chunk_ids": "cust-1"`)))
	other := deletiontest.NewSubject("acme", "cust-2")
	must(t, s.AppendEvent(ctx, auditlog.Event{EventID: "ok", TenantID: "acme", SubjectHash: other.Hash, Type: "query", At: time.Now().UTC()}))
	want := []string{
		`field "at" is not an RFC 3339 time`,
		`field "chunk_ids" holds a JSON string where the event has []string`,
	}
	check := func(t *testing.T, s auditlog.Store) {
		t.Helper()
		v, err := auditlog.NewVerifier(s).Verify(ctx, auditStore(t), sub)
		must(t, err)
		var reasons []string
		for _, it := range v.UnexaminedItems {
			if strings.Contains(it, "jane") || strings.Contains(it, "cust-1") {
				t.Errorf("unexamined item %q quotes the event's content", it)
			}
			if !strings.HasPrefix(it, "audit event ") || !strings.Contains(it, " of 3 under the subject's pseudonym: ") {
				t.Errorf("unexamined item %q does not name the event by position", it)
			}
			reasons = append(reasons, it[strings.LastIndex(it, ": ")+2:])
		}
		slices.Sort(reasons)
		if v.Remaining != 0 || v.Unexamined != 2 || !slices.Equal(reasons, want) {
			t.Errorf("Verify = %+v, want 0 remaining and 2 unexamined for %q", v, want)
		}
		if st := deletion.StatusOf(deletion.Result{NoPIIByDesign: true}, v); st != event.StatusFailed {
			t.Errorf("status %s, want FAILED", st)
		}
		if v, err := auditlog.NewVerifier(s).Verify(ctx, auditStore(t), other); err != nil || !v.Clean() {
			t.Errorf("Verify of another subject = %+v, %v; want clean", v, err)
		}
	}
	check(t, s)
	must(t, s.Close())
	reopened, err := auditlog.OpenDir(dir)
	if err != nil {
		t.Fatalf("reopen with undecodable events: %v", err)
	}
	t.Cleanup(func() { reopened.Close() })
	check(t, reopened)
}

// Fields that Event does not declare are read too: a raw identifier or a PII pattern in
// one of them, however deeply nested, counts as remaining.
func TestVerifierReadsUndeclaredFields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sub := deletiontest.NewSubject("acme", "cust-1")
	at := `"at": "2026-12-01T10:00:00Z"`
	for _, c := range []struct {
		name  string
		extra string
		taint bool
	}{
		{"clean extra field", `"latency_ms": 12, "region": "eu-west-1"`, false},
		{"email in an extra field", `"user_email": "jane.doe@example.com"`, true},
		{"id nested in an extra object", `"ctx": {"who": ["x", {"id": "cust-1"}]}`, true},
		{"id as an extra key", `"ctx": {"cust-1": true}`, true},
		{"longer id is another subject", `"ctx": {"id": "cust-10"}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := openDir(t)
			must(t, s.AppendRawEvent(ctx, rawEvent(sub, "e-1", at+", "+c.extra)))
			v, err := auditlog.NewVerifier(s).Verify(ctx, auditStore(t), sub)
			must(t, err)
			want := int64(0)
			if c.taint {
				want = 1
			}
			if v.Remaining != want || v.Unexamined != 0 {
				t.Errorf("Verify = %+v, want %d remaining, nothing unexamined", v, want)
			}
		})
	}
}
