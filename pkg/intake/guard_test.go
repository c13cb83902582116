package intake_test

import (
	"net/http"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/intake"
)

// A web page cannot reach the API: not cross-site, not as a form (text/plain), not
// through DNS rebinding (a foreign Host), in open mode or with tokens. Nothing is
// published by a refused request.
func TestBrowsersCannotSubmitCrossSite(t *testing.T) {
	tenant := `{"tenant_id": "acme", "scope": "TENANT", "regulation": "GDPR"}`
	for _, tc := range []struct {
		name   string
		header []string
		want   int
	}{
		{"text/plain form post", []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType},
		{"no content type", []string{"Content-Type", ""}, http.StatusUnsupportedMediaType},
		{"cross-origin fetch", []string{"Origin", "https://evil.example"}, http.StatusForbidden},
		{"cross-site by fetch metadata", []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"DNS rebinding", []string{"Host", "evil.example:8080", "Origin", "http://evil.example:8080"}, http.StatusMisdirectedRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t) // open mode on loopback
			code, b := e.do(t, "POST", "/v1/erasures", tenant, tc.header...)
			if code != tc.want {
				t.Errorf("%d %s, want %d", code, b, tc.want)
			}
			if n := len(e.published(t)); n != 0 {
				t.Errorf("published %d records", n)
			}
		})
	}
	e := setup(t)
	if code, b := e.do(t, "POST", "/v1/erasures", body(t, nil), "Origin", e.srv.URL); code != http.StatusAccepted {
		t.Errorf("same origin: %d %s", code, b)
	}
	e.svc.AllowedOrigins = []string{"https://portal.example"}
	if code, b := e.do(t, "POST", "/v1/erasures", body(t, nil), "Origin", "https://portal.example", "Sec-Fetch-Site", "cross-site"); code != http.StatusAccepted {
		t.Errorf("an allowed origin: %d %s", code, b)
	}
}

// With tokens on, any Host is answered unless AllowedHosts names them.
func TestAllowedHosts(t *testing.T) {
	e := secured(t)
	if code, _ := e.do(t, "GET", "/v1/whoami", "", append(bearer(acmeToken), "Host", "lethe.internal")...); code != http.StatusOK {
		t.Errorf("authenticated, any host: %d", code)
	}
	e.svc.AllowedHosts = []string{"lethe.example"}
	if code, _ := e.do(t, "GET", "/v1/whoami", "", append(bearer(acmeToken), "Host", "lethe.internal")...); code != http.StatusMisdirectedRequest {
		t.Errorf("a host not allowed: %d", code)
	}
}

// Open mode listens on loopback only.
func TestCheckBind(t *testing.T) {
	tokens, err := auth.New(auth.Config{Tokens: []auth.Token{{Name: "a", SHA256: auth.HashToken(acmeToken), Tenants: []string{"acme"}}}})
	if err != nil {
		t.Fatal(err)
	}
	open, err := auth.New(auth.Config{Disabled: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr  string
		authn *auth.Authenticator
		ok    bool
	}{
		{"127.0.0.1:8080", nil, true},
		{"[::1]:8080", nil, true},
		{"localhost:0", open, true},
		{"0.0.0.0:8080", nil, false},
		{":8080", nil, false},
		{"[::]:8080", open, false},
		{"10.1.2.3:8080", nil, false},
		{"lethe.example:8080", nil, false},
		{"0.0.0.0:8080", tokens, true},
	} {
		if err := intake.CheckBind(tc.addr, tc.authn); (err == nil) != tc.ok {
			t.Errorf("%s (auth %v): %v", tc.addr, tc.authn, err)
		}
	}
}
