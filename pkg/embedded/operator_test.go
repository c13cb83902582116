package embedded_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// With authentication on, /metrics (tenant labels) and /discovery (backend scans) of the
// standalone answer operators only; health stays open. Open mode refuses a
// non-loopback listener.
func TestMetricsAndDiscoveryForOperators(t *testing.T) {
	key, err := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := embedded.Start(context.Background(), embedded.Options{Key: key, DataDir: t.TempDir(), HTTPAddr: "0.0.0.0:0"}); err == nil {
		t.Fatal("open mode started on every interface")
	}
	ops, opsHash := auth.NewToken()
	app, appHash := auth.NewToken()
	authn, err := auth.New(auth.Config{Tokens: []auth.Token{
		{Name: "ops", SHA256: opsHash, Tenants: []string{auth.Wildcard}},
		{Name: "app", SHA256: appHash, Tenants: []string{"acme"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := embedded.Start(context.Background(), embedded.Options{Key: key, DataDir: t.TempDir(), Auth: authn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })
	for _, tc := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/metrics", "", http.StatusUnauthorized},
		{"GET", "/metrics", app, http.StatusForbidden},
		{"GET", "/metrics", ops, http.StatusOK},
		{"POST", "/discovery", "", http.StatusUnauthorized},
		{"POST", "/discovery", app, http.StatusForbidden},
		{"POST", "/discovery", ops, http.StatusOK},
		{"GET", "/v1/discovery/uncovered", app, http.StatusForbidden},
		{"GET", "/v1/discovery/uncovered", ops, http.StatusOK},
		{"GET", "/healthz", "", http.StatusOK},
	} {
		req, _ := http.NewRequest(tc.method, sys.BaseURL+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s (token %t): %d, want %d", tc.method, tc.path, tc.token != "", resp.StatusCode, tc.want)
		}
	}
}
