package webhookstore

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// TestCrossTenant runs the cross-tenant checks against the reference receiver, one
// processor holding the data of every tenant: it scopes each request by the tenant of the
// signed body.
func TestCrossTenant(t *testing.T) {
	deletiontest.CrossTenant(t, newProcessor(t, false, nil).fixture(t))
}

// TestSignedBodyNamesTheTenant: every erase and verify request, of a subject or of a whole
// tenant, carries the tenant and the scope in the signed body, so a processor can scope
// each request by it and nobody on the way can move it to another tenant: the same body
// with another tenant has another signature.
func TestSignedBodyNamesTheTenant(t *testing.T) {
	type sent struct {
		body []byte
		ts   int64
		sig  string
	}
	var mu sync.Mutex
	var got []sent
	p := newProcessor(t, false, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				b, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(b))
				ts, _ := strconv.ParseInt(r.Header.Get(HeaderTimestamp), 10, 64)
				mu.Lock()
				got = append(got, sent{b, ts, r.Header.Get(HeaderSignature)})
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	})
	for _, s := range []deletion.Subject{deletiontest.NewSubject("acme", "cust-1"), {Tenant: "acme", Scope: event.ScopeTenant}} {
		if _, err := p.impl.Erase(t.Context(), p.store, s); err != nil {
			t.Fatal(err)
		}
		if _, err := p.impl.Verify(t.Context(), p.store, s); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 4 {
		t.Fatalf("%d requests sent, want 4", len(got))
	}
	for i, r := range got {
		var req request
		if err := json.Unmarshal(r.body, &req); err != nil {
			t.Fatal(err)
		}
		wantScope := []string{"subject", "tenant"}[i/2]
		if req.Tenant != "acme" || req.Scope != wantScope || (req.Subject == nil) != (wantScope == "tenant") {
			t.Errorf("request %d: tenant %q, scope %q, subject %v; want acme, %s", i, req.Tenant, req.Scope, req.Subject, wantScope)
		}
		if r.sig != Sign([]byte(testSecret), r.ts, r.body) {
			t.Errorf("request %d: the signature does not cover the body", i)
		}
		moved := bytes.Replace(r.body, []byte(`"tenant":"acme"`), []byte(`"tenant":"globex"`), 1)
		if bytes.Equal(moved, r.body) || Sign([]byte(testSecret), r.ts, moved) == r.sig {
			t.Errorf("request %d: the body with another tenant keeps the signature", i)
		}
	}
}
