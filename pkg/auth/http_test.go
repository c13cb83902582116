package auth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestParseBearer(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer  abc ", "abc", true},
		{"BEARER abc", "abc", true},
		{"", "missing bearer token", false},
		{"   ", "missing bearer token", false},
		{"Basic dXNlcjpwYXNz", "scheme must be Bearer", false},
		{"Bearer", "scheme must be Bearer", false},
		{"Bearer ", "scheme must be Bearer", false},
		{"Bearer a b", "malformed bearer token", false},
		{"abc", "scheme must be Bearer", false},
	} {
		got, err := ParseBearer(tc.in)
		switch {
		case tc.ok && (err != nil || got != tc.want):
			t.Errorf("%q: got %q, %v; want %q", tc.in, got, err, tc.want)
		case !tc.ok && (!errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: err %v, want ErrUnauthenticated mentioning %q", tc.in, err, tc.want)
		}
	}
}

func TestMiddleware(t *testing.T) {
	tok, hash := NewToken()
	a, err := New(Config{Tokens: []Token{{Name: "ci", SHA256: hash, Tenants: []string{"acme"}}}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	var seen Principal
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := PrincipalFrom(r.Context())
		if !ok {
			t.Error("no principal in the context")
		}
		seen = p
		w.WriteHeader(http.StatusNoContent)
	}))

	for _, tc := range []struct {
		name, header string
		status       int
		challenge    string
		errContains  string
	}{
		{"valid", "Bearer " + tok, http.StatusNoContent, "", ""},
		{"missing", "", http.StatusUnauthorized, `Bearer realm="lethe"`, "missing bearer token"},
		{"wrong scheme", "Basic " + tok, http.StatusUnauthorized, `Bearer realm="lethe", error="invalid_token"`, "scheme must be Bearer"},
		{"unknown token", "Bearer lt_unknown", http.StatusUnauthorized, `Bearer realm="lethe", error="invalid_token"`, "unknown token"},
		{"malformed jwt", "Bearer a.b.c", http.StatusUnauthorized, `Bearer realm="lethe", error="invalid_token"`, "jwt"},
	} {
		seen = Principal{}
		r := httptest.NewRequest(http.MethodPost, "/v1/erasures", strings.NewReader("{}"))
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, w.Code, tc.status)
			continue
		}
		if tc.status != http.StatusUnauthorized {
			if seen.Name != "ci" || !seen.May("acme") || seen.May("globex") {
				t.Errorf("%s: handler saw principal %+v", tc.name, seen)
			}
			continue
		}
		if seen.Name != "" {
			t.Errorf("%s: handler ran after a failed authentication", tc.name)
		}
		if got := w.Header().Get("WWW-Authenticate"); got != tc.challenge {
			t.Errorf("%s: WWW-Authenticate %q, want %q", tc.name, got, tc.challenge)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.name, ct)
		}
		var body map[string]string
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || len(body) != 1 || !strings.Contains(body["error"], tc.errContains) {
			t.Errorf("%s: body %q (%v), want {\"error\": …%s…}", tc.name, w.Body, err, tc.errContains)
		}
		if strings.Contains(w.Body.String(), tok) {
			t.Errorf("%s: body echoes the token", tc.name)
		}
	}
}

func TestPrincipalContext(t *testing.T) {
	if _, ok := PrincipalFrom(t.Context()); ok {
		t.Fatal("empty context has a principal")
	}
	p := Principal{Name: "ci", Tenants: []string{"acme"}}
	got, ok := PrincipalFrom(WithPrincipal(t.Context(), p))
	if !ok || got.Name != "ci" || !got.May("acme") {
		t.Fatalf("PrincipalFrom = %+v, %t", got, ok)
	}
}

// An erasure.intake record is accepted only with a valid credential in its authorization
// header and a tenant its principal may act for.
func TestRecordHeaderRule(t *testing.T) {
	tok, hash := NewToken()
	a, err := New(Config{Tokens: []Token{{Name: "shopbot", SHA256: hash, Tenants: []string{"acme"}}}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	check := func(header, tenant string) error {
		p, err := a.AuthenticateHeader(header)
		if err != nil {
			return err
		}
		return p.Authorize(tenant)
	}
	if err := check("Bearer "+tok, "acme"); err != nil {
		t.Fatalf("valid record refused: %v", err)
	}
	if err := check("Bearer "+tok, "globex"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("record for another tenant: %v, want ErrForbidden", err)
	}
	if err := check("", "acme"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("record without header: %v, want ErrUnauthenticated", err)
	}
	if err := check(tok, "acme"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("record with a bare token: %v, want ErrUnauthenticated", err)
	}
}
