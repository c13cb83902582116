package auditlogtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// testRequestsConcurrent writes and reads requests from many goroutines at once, as
// intake handlers and aggregator records do: each writer finds its request as soon as
// PutRequest returned, a request written twice at once is stored once, a later attempt
// written beside an earlier one stays, and every request is listed once.
func testRequestsConcurrent(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	const n = 40
	req := func(i, attempt int) auditlog.Request {
		return auditlog.Request{
			RequestID: fmt.Sprintf("c-%02d", i), TenantID: []string{"acme", "globex"}[i%2], SubjectHash: Hash(fmt.Sprint(i)),
			KeyID: "k1", Scope: event.ScopeSubject, Regulation: "GDPR", RequestedAt: T0.Add(time.Duration(i) * time.Millisecond),
			InventoryVersion: fmt.Sprintf("v%d", attempt), ExpectedStores: []string{"qdrant"}, Attempt: attempt,
		}
	}
	var wg sync.WaitGroup
	for i := range n {
		writes := []auditlog.Request{req(i, 1)}
		switch i % 4 {
		case 1: // written twice at once
			writes = append(writes, req(i, 1))
		case 2: // a later attempt beside the first
			writes = append(writes, req(i, 2))
		}
		for _, r := range writes {
			wg.Go(func() {
				if err := s.PutRequest(ctx, r); err != nil {
					t.Errorf("PutRequest(%s attempt %d): %v", r.RequestID, r.Attempt, err)
					return
				}
				got, err := s.GetRequest(ctx, r.RequestID)
				if err != nil || got.Attempt < r.Attempt {
					t.Errorf("GetRequest(%s) right after its write = attempt %d, %v; want at least %d", r.RequestID, got.Attempt, err, r.Attempt)
				}
			})
		}
		wg.Go(func() {
			if _, err := s.GetRequest(ctx, fmt.Sprintf("missing-%02d", i)); !errors.Is(err, auditlog.ErrNotFound) {
				t.Errorf("GetRequest of an unknown request beside the writes: %v, want ErrNotFound", err)
			}
		})
	}
	wg.Wait()
	all, err := s.ListRequests(ctx, "")
	must(t, err)
	if len(all) != n {
		t.Fatalf("ListRequests = %d requests, want %d, each once", len(all), n)
	}
	for i, r := range all {
		want := req(i, 1)
		if i%4 == 2 {
			want = req(i, 2)
		}
		if !sameJSON(r, want) {
			t.Errorf("ListRequests[%d] = %s, want %s", i, js(r), js(want))
		}
	}
	if acme, err := s.ListRequests(ctx, "acme"); err != nil || len(acme) != n/2 {
		t.Errorf("ListRequests(acme) = %d requests, %v; want %d", len(acme), err, n/2)
	}
}
