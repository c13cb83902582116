package auditlogtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
)

func testListRequests(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	if got, err := s.ListRequests(ctx, "acme"); err != nil || len(got) != 0 {
		t.Fatalf("ListRequests of an empty store = %s, %v; want none", js(got), err)
	}
	if got, err := s.ListRequests(ctx, ""); err != nil || len(got) != 0 {
		t.Fatalf("ListRequests(all) of an empty store = %s, %v; want none", js(got), err)
	}
	req := func(id, tenant string, at time.Duration, attempt int, version string) auditlog.Request {
		return auditlog.Request{
			RequestID: id, TenantID: tenant, SubjectHash: Hash("subject-" + id), KeyID: "k1",
			Scope: event.ScopeSubject, Regulation: "GDPR", RequestedAt: T0.Add(at), DueAt: T0.Add(at + time.Hour),
			InventoryVersion: version, ExpectedStores: []string{"qdrant"}, Attempt: attempt,
		}
	}
	// Written out of order. a-late and a-frac catch a store that orders by formatted time:
	// RFC3339Nano sorts "07.5Z" before "07Z".
	for _, r := range []auditlog.Request{
		req("a-late", "acme", 2*time.Second, 1, "v1"),
		req("a-2", "acme", 0, 1, "v1"),
		req("a-frac", "acme", 500*time.Millisecond, 1, "v1"),
		req("g-1", "globex", time.Second, 1, "v1"),
		req("a-1", "acme", 0, 1, "v1"),
		req("e-1", "acme-eu", time.Second, 1, "v1"),
	} {
		must(t, s.PutRequest(ctx, r))
	}
	// Later attempts replace the record without adding a list entry; an older one is ignored.
	must(t, s.PutRequest(ctx, req("a-2", "acme", 0, 2, "v2")))
	must(t, s.PutRequest(ctx, req("a-2", "acme", 0, 3, "v3")))
	must(t, s.PutRequest(ctx, req("a-2", "acme", 0, 1, "stale")))
	must(t, s.PutRequest(ctx, req("g-1", "globex", time.Second, 2, "v2")))

	ids := func(rs []auditlog.Request) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.RequestID)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		tenant, want string
	}{
		{"acme", "a-1,a-2,a-frac,a-late"},
		{"globex", "g-1"},
		{"acme-eu", "e-1"},
		{"", "a-1,a-2,a-frac,e-1,g-1,a-late"},
		{"initech", ""},
	} {
		got, err := s.ListRequests(ctx, tc.tenant)
		must(t, err)
		if ids(got) != tc.want {
			t.Errorf("ListRequests(%q) = [%s], want [%s]", tc.tenant, ids(got), tc.want)
		}
		for _, r := range got {
			if tc.tenant != "" && r.TenantID != tc.tenant {
				t.Errorf("ListRequests(%q) returned %s of tenant %s", tc.tenant, r.RequestID, r.TenantID)
			}
			want := "v1"
			switch r.RequestID {
			case "a-2":
				want = "v3"
			case "g-1":
				want = "v2"
			}
			if r.InventoryVersion != want || r.Attempt == 0 {
				t.Errorf("ListRequests(%q): %s is at %s (attempt %d), want its latest attempt with %s", tc.tenant, r.RequestID, r.InventoryVersion, r.Attempt, want)
			}
			if stored, err := s.GetRequest(ctx, r.RequestID); err != nil || !sameJSON(stored, r) {
				t.Errorf("ListRequests(%q): %s differs from GetRequest: %s vs %s (%v)", tc.tenant, r.RequestID, js(r), js(stored), err)
			}
		}
	}
}
