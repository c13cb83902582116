package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/console"
)

// The console's files are served under /console/ with a content security policy that
// allows only its own scripts.
func TestHandlerServesFiles(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("GET /console/", console.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for path, want := range map[string]string{"/console/": "<title>Lethe console</title>", "/console/app.js": "sessionStorage", "/console/style.css": "--ink"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d %.200s", path, resp.StatusCode, b)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
	}
}
