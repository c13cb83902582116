package metrics

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lethe-erasure/lethe/pkg/version"
)

// TestInstrumentLabelsByPattern: requests are counted by the pattern they matched, never
// by their path, and by status code; an unmatched path counts as unmatched.
func TestInstrumentLabelsByPattern(t *testing.T) {
	m := New()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/erasures/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	// a wrapper that passes a derived request on, as authentication middleware does
	h := m.Instrument(mux, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mux.ServeHTTP(w, r.WithContext(r.Context())) }))
	for _, p := range []string{"/v1/erasures/er_1", "/v1/erasures/er_2", "/healthz", "/nope"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
	}
	for _, c := range []struct {
		route, code string
		want        float64
	}{{"GET /v1/erasures/{id}", "404", 2}, {"GET /healthz", "200", 1}, {"unmatched", "404", 1}} {
		if got := testutil.ToFloat64(m.HTTPRequests.WithLabelValues(c.route, c.code)); got != c.want {
			t.Errorf("%s %s: %v requests, want %v", c.route, c.code, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.HTTPRequests); n != 3 {
		t.Errorf("%d label sets, want 3: a path leaked into a label", n)
	}
	want := `
# HELP lethe_build_info The running build: always 1, its version, commit and Go version as labels.
# TYPE lethe_build_info gauge
lethe_build_info{goversion="` + runtime.Version() + `",revision="` + version.Get().Revision + `",version="dev"} 1
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "lethe_build_info"); err != nil {
		t.Error(err)
	}
}
