package webhookstore

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lethe-erasure/lethe/examples/webhook-receiver/receiver"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

const testSecret = "conformance-webhook-secret-0123456789abcdef"

// processor is the reference receiver over TLS (httptest.NewTLSServer), a Store whose client
// trusts its certificate, and an inventory entry pointing at it.
type processor struct {
	handler *receiver.Handler
	server  *httptest.Server
	impl    *Store
	store   inventory.Entry
}

// newProcessor starts the reference receiver; wrap, when set, wraps its handler (faults).
func newProcessor(t *testing.T, async bool, wrap func(http.Handler) http.Handler) *processor {
	t.Helper()
	h := &receiver.Handler{Secrets: [][]byte{[]byte(testSecret)}, Store: receiver.NewStore(), Async: async, PendingPolls: 2}
	var handler http.Handler = h
	if wrap != nil {
		handler = wrap(h)
	}
	srv := httptest.NewTLSServer(handler)
	t.Cleanup(srv.Close)
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &processor{
		handler: h,
		server:  srv,
		impl:    New(srv.Client()),
		store: inventory.Entry{Name: "vendor", Kind: Kind, Locators: inventory.Locators{
			"url":               srv.URL + receiver.ErasuresPath,
			"secret_file":       secretFile,
			"poll_interval":     "2ms",
			"poll_max_interval": "10ms",
		}},
	}
}

func query(s deletion.Subject) receiver.Query {
	return receiver.Query{Tenant: s.Tenant, Subject: s.ID, Sessions: s.Sessions}
}

func (p *processor) fixture(t *testing.T) deletiontest.Fixture {
	return deletiontest.Fixture{
		Impl:  p.impl,
		Store: p.store,
		Seed: func(t *testing.T, s deletion.Subject, n int) int {
			put := func(it receiver.Item) {
				if _, err := p.handler.Store.Put(it); err != nil {
					t.Fatal(err)
				}
			}
			for range n {
				put(receiver.Item{Tenant: s.Tenant, Subject: s.ID})
				for _, ses := range s.Sessions {
					put(receiver.Item{Tenant: s.Tenant, Session: ses}) // legacy: the session only
				}
			}
			return n * (1 + len(s.Sessions))
		},
		Count: func(t *testing.T, s deletion.Subject) int { return p.handler.Store.Count(query(s)) },
		// The processor down: a client whose every connection is refused.
		Down: func(t *testing.T) deletion.Store {
			return New(&http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", closedAddr(t))
			}}})
		},
		Unreadable: func(t testing.TB, s deletion.Subject) {
			if _, err := p.handler.Store.Put(receiver.Item{Tenant: s.Tenant, Subject: s.ID, Unreadable: true}); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestConformance runs the suite against the reference receiver answering 200.
func TestConformance(t *testing.T) {
	deletiontest.Run(t, func(t *testing.T) deletiontest.Fixture { return newProcessor(t, false, nil).fixture(t) })
}

// TestConformanceAsync runs the suite against the reference receiver answering 202 and
// finishing after two status polls.
func TestConformanceAsync(t *testing.T) {
	deletiontest.Run(t, func(t *testing.T) deletiontest.Fixture { return newProcessor(t, true, nil).fixture(t) })
}

// TestVerificationCarriesTheAttestation: the receipt's evidence is the processor's answer.
func TestVerificationCarriesTheAttestation(t *testing.T) {
	p := newProcessor(t, false, nil)
	s := deletiontest.NewSubject("acme", "cust-att")
	p.fixture(t).Seed(t, s, 2)
	v, err := p.impl.Verify(t.Context(), p.store, s)
	if err != nil {
		t.Fatal(err)
	}
	if v.Method != Method || v.Remaining != 4 || !strings.HasPrefix(v.Attestation, "att_") {
		t.Errorf("Verify before erase = %+v; want method %q, remaining 4 and the processor's attestation", v, Method)
	}
	if _, err := p.impl.Erase(t.Context(), p.store, s); err != nil {
		t.Fatal(err)
	}
	after, err := p.impl.Verify(t.Context(), p.store, s)
	if err != nil || !after.Clean() || after.Attestation == "" || after.Attestation == v.Attestation {
		t.Errorf("Verify after erase = %+v, %v; want clean with a new attestation", after, err)
	}
}

// TestTenantScope: a tenant-scoped erasure removes the whole tenant and no other.
func TestTenantScope(t *testing.T) {
	p := newProcessor(t, false, nil)
	f := p.fixture(t)
	a, b, other := deletiontest.NewSubject("acme", "x"), deletiontest.NewSubject("acme", "y"), deletiontest.NewSubject("globex", "x")
	n := f.Seed(t, a, 1) + f.Seed(t, b, 1)
	keep := f.Seed(t, other, 1)
	tenant := deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}
	res, err := p.impl.Erase(t.Context(), p.store, tenant)
	if err != nil || res.Deleted() != int64(n) {
		t.Fatalf("Erase tenant = %+v, %v; want %d deleted", res, err, n)
	}
	if got := p.handler.Store.Count(receiver.Query{Tenant: "acme", WholeTenant: true}); got != 0 {
		t.Errorf("%d items of the tenant remain", got)
	}
	if got := f.Count(t, other); got != keep {
		t.Errorf("other tenant: %d of %d items left", got, keep)
	}
}

// TestResentRequestIsNotCountedTwice: when the processor's first answer is lost (the
// receiver erased, the client got a 502), Erase re-sends under the same request id and gets
// the first answer again: the count is reported once and nothing is erased twice.
func TestResentRequestIsNotCountedTwice(t *testing.T) {
	var mu sync.Mutex
	var ids []string
	p := newProcessor(t, false, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			ids = append(ids, r.Header.Get(HeaderRequestID))
			first := len(ids) == 1
			mu.Unlock()
			if first {
				h.ServeHTTP(httptest.NewRecorder(), r) // carried out, answer lost
				http.Error(w, "bad gateway", http.StatusBadGateway)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	s := deletiontest.NewSubject("acme", "lost-answer")
	want := p.fixture(t).Seed(t, s, 3)
	res, err := p.impl.Erase(t.Context(), p.store, s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted() != int64(want) {
		t.Errorf("Erase after a lost answer reported %d deleted, want the first answer's %d", res.Deleted(), want)
	}
	if len(ids) != 2 || ids[0] != ids[1] || ids[0] == "" {
		t.Errorf("request ids sent %q, want the same id twice", ids)
	}
}

// TestErrorClassification: a processor that is down or overloaded yields transient errors;
// one that refuses the request, redirects it or breaks the contract, permanent ones.
func TestErrorClassification(t *testing.T) {
	s := deletiontest.NewSubject("acme", "cust-err")
	answer := func(code int, body string, header ...string) func(http.Handler) http.Handler {
		return func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for i := 0; i+1 < len(header); i += 2 {
					w.Header().Set(header[i], header[i+1])
				}
				w.WriteHeader(code)
				w.Write([]byte(body))
			})
		}
	}
	for _, tc := range []struct {
		name      string
		wrap      func(http.Handler) http.Handler
		permanent bool
	}{
		{"503", answer(503, `{"error":"maintenance"}`), false},
		{"429", answer(429, `{}`, "Retry-After", "0"), false},
		{"409", answer(409, `{}`), false},
		{"400", answer(400, `{"error":"bad request"}`), true},
		{"400 echoing the id", answer(400, `{"error":"unknown customer cust-err"}`), true},
		{"200 failed echoing the id", answer(200, `{"request_id":"ID","status":"failed","error":"cust-err is locked"}`), true},
		{"404", answer(404, ``), true},
		{"redirect", answer(302, ``, "Location", "https://elsewhere.example/"), true},
		{"201", answer(201, `{}`), true},
		{"200 not JSON", answer(200, `<html>`), true},
		{"200 without remaining", answer(200, `{"request_id":"ID","status":"completed","deleted":1,"attestation_id":"a"}`), true},
		{"202 to another origin", answer(202, `{"request_id":"ID","status":"pending","status_url":"https://elsewhere.example/s"}`), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProcessor(t, false, tc.wrap)
			p.impl.newID = func() string { return "ID" }
			p.store.Locators = p.store.Locators.With("attempts", 2)
			_, err := p.impl.Erase(t.Context(), p.store, s)
			if err == nil || retry.IsPermanent(err) != tc.permanent {
				t.Errorf("Erase = %v; want an error, permanent %v", err, tc.permanent)
			}
			if err != nil && strings.Contains(err.Error(), s.ID) {
				t.Errorf("error %q holds the identifier", err)
			}
		})
	}
	t.Run("down", func(t *testing.T) {
		p := newProcessor(t, false, nil)
		p.server.Close()
		p.store.Locators = p.store.Locators.With("attempts", 1)
		if _, err := p.impl.Erase(t.Context(), p.store, s); err == nil || retry.IsPermanent(err) {
			t.Errorf("Erase with the processor down = %v; want a transient error", err)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		p := newProcessor(t, false, nil)
		p.handler.Secrets = [][]byte{[]byte("another-secret-0123456789abcdef0123456789")}
		if _, err := p.impl.Erase(t.Context(), p.store, s); err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), "401") {
			t.Errorf("Erase with a secret the processor does not hold = %v; want a permanent 401", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		p := newProcessor(t, false, nil)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := p.impl.Erase(ctx, p.store, s); !errors.Is(err, context.Canceled) {
			t.Errorf("Erase with a cancelled context = %v; want context.Canceled", err)
		}
	})
}

// TestInvalidVerifyAnswerIsUnexamined: a verify answer without the remaining count proves
// nothing: the store is reported unexamined, never clean.
func TestInvalidVerifyAnswerIsUnexamined(t *testing.T) {
	for name, body := range map[string]string{
		"no remaining":   `{"request_id":"ID","status":"completed","attestation_id":"att_1"}`,
		"no attestation": `{"request_id":"ID","status":"completed","remaining":0}`,
		"other id":       `{"request_id":"other","status":"completed","remaining":0,"attestation_id":"att_1"}`,
		"failed":         `{"request_id":"ID","status":"failed","error":"index offline"}`,
	} {
		t.Run(name, func(t *testing.T) {
			p := newProcessor(t, false, func(http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) })
			})
			p.impl.newID = func() string { return "ID" }
			v, err := p.impl.Verify(t.Context(), p.store, deletiontest.NewSubject("acme", "c"))
			if err != nil || v.Clean() || v.Unexamined != 1 || len(v.UnexaminedItems) != 1 {
				t.Errorf("Verify = %+v, %v; want one unexamined item and no error", v, err)
			}
		})
	}
}

func TestInvalidUTF8IsRefused(t *testing.T) {
	p := newProcessor(t, false, nil)
	s := deletiontest.NewSubject("acme", "a\xff")
	if _, err := p.impl.Erase(t.Context(), p.store, s); err == nil || !retry.IsPermanent(err) {
		t.Errorf("Erase of an invalid UTF-8 id = %v; want a permanent error", err)
	}
}
