// Package metrics defines Lethe's Prometheus metrics and serves them with health checks.
//
// Labels never carry identifiers: tenant, regulation, store, kind, status, group, topic
// and fixed reason words only. Every component takes a *Metrics; a nil one records into a
// private registry that nobody scrapes, so tests and tools need not wire metrics.
package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lethe-erasure/lethe/pkg/calls"
	"github.com/lethe-erasure/lethe/pkg/version"
)

// Metrics holds every Lethe metric family, registered on Registry.
type Metrics struct {
	Registry      *prometheus.Registry
	Requests      *prometheus.CounterVec   // lethe_requests_total{tenant,regulation,channel}
	Rejected      *prometheus.CounterVec   // lethe_intake_rejected_total{reason}
	StoreOutcomes *prometheus.CounterVec   // lethe_store_outcomes_total{store,kind,status}
	StoreDuration *prometheus.HistogramVec // lethe_store_duration_seconds{store,kind}
	StoreRetries  *prometheus.CounterVec   // lethe_store_retries_total{store,kind}
	// StoreBatch is lethe_store_batch_subjects{store,op}: the subjects of each batch a
	// deleter handed a store that batches, by operation (find, erase, verify).
	StoreBatch      *prometheus.HistogramVec
	ConsumerRetries *prometheus.CounterVec // lethe_consumer_retries_total{group,topic}
	DLQRecords      *prometheus.CounterVec // lethe_dlq_records_total{group,topic}
	ConsumerLag     *prometheus.GaugeVec   // lethe_consumer_lag{group,topic}
	Receipts        *prometheus.CounterVec // lethe_receipts_total{tenant}
	ErasureDuration prometheus.Histogram   // lethe_erasure_duration_seconds
	Overdue         *prometheus.GaugeVec   // lethe_overdue_requests{tenant}
	SLAThreshold    *prometheus.CounterVec // lethe_sla_threshold_total{threshold,window}
	MissingDataKeys prometheus.Counter     // lethe_missing_data_keys_total
	Reappeared      *prometheus.CounterVec // lethe_reappeared_total{store,kind,purpose}
	Addenda         *prometheus.CounterVec // lethe_addenda_total{type}
	// InventoryUncovered is lethe_inventory_uncovered_locations{kind}: the locations the last
	// discovery run found holding subject-shaped data outside the inventory.
	InventoryUncovered *prometheus.GaugeVec
	DiscoveryLastRun   *prometheus.GaugeVec     // lethe_inventory_discovery_last_run_timestamp_seconds{kind}
	HTTPRequests       *prometheus.CounterVec   // lethe_http_requests_total{route,code}
	HTTPDuration       *prometheus.HistogramVec // lethe_http_request_duration_seconds{route}

	routes []route
}

type route struct {
	pattern string
	h       http.Handler
}

// Handle adds a route that Handler serves beside its own (a service's admin endpoint, such
// as GET /discovery). Call it before Handler or Serve.
func (m *Metrics) Handle(pattern string, h http.Handler) {
	m.routes = append(m.routes, route{pattern, h})
}

// Rejection reasons of lethe_intake_rejected_total.
const (
	ReasonInvalid         = "invalid"
	ReasonConflict        = "conflict"
	ReasonUnavailable     = "unavailable"
	ReasonUnauthenticated = "unauthenticated"
	ReasonForbidden       = "forbidden"
	ReasonRateLimited     = "rate_limited"
	ReasonTooLarge        = "too_large"
)

// New returns the metrics on a new registry that also holds the Go and process collectors.
func New() *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), calls.Total)
	f := func(c prometheus.Collector) { r.MustRegister(c) }
	m := &Metrics{Registry: r}
	bi := version.Get()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lethe_build_info", Help: "The running build: always 1, its version, commit and Go version as labels."},
		[]string{"version", "revision", "goversion"})
	build.WithLabelValues(bi.Version, bi.Revision, bi.GoVersion).Set(1)
	f(build)
	m.Requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lethe_requests_total", Help: "Erasure requests accepted."}, []string{"tenant", "regulation", "channel"})
	m.Rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lethe_intake_rejected_total", Help: "Erasure requests refused, by reason."}, []string{"reason"})
	m.StoreOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lethe_store_outcomes_total", Help: "Store erasures reported, by status."}, []string{"store", "kind", "status"})
	m.StoreDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lethe_store_duration_seconds", Help: "Time to erase and verify one store.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}, []string{"store", "kind"})
	m.StoreRetries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lethe_store_retries_total", Help: "Store erasures retried after a transient error."}, []string{"store", "kind"})
	m.StoreBatch = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lethe_store_batch_subjects", Help: "Subjects per batch handed to a store that batches, by operation.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 9)}, []string{"store", "op"})
	m.ConsumerRetries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lethe_consumer_retries_total", Help: "Records retried after a transient handler error."}, []string{"group", "topic"})
	m.DLQRecords = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lethe_dlq_records_total", Help: "Records written to a dead-letter topic."}, []string{"group", "topic"})
	m.ConsumerLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lethe_consumer_lag", Help: "Records behind the high watermark on this instance's partitions."}, []string{"group", "topic"})
	m.Receipts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lethe_receipts_total", Help: "Receipts issued."}, []string{"tenant"})
	m.ErasureDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lethe_erasure_duration_seconds", Help: "Time from request to receipt.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 24)})
	m.Overdue = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lethe_overdue_requests", Help: "Open requests past their due date."}, []string{"tenant"})
	m.SLAThreshold = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lethe_sla_threshold_total", Help: "Open requests that crossed 50, 80 or 100 percent of their legal window or internal target."}, []string{"threshold", "window"})
	m.MissingDataKeys = prometheus.NewCounter(prometheus.CounterOpts{Name: "lethe_missing_data_keys_total",
		Help: "Requests whose data key the key store holds neither as a key nor as a tombstone: a misconfigured key store or a lost key."})
	m.Reappeared = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lethe_reappeared_total",
		Help: "Erased subjects found again in a store by a re-verification sweep or a re-apply, and erased again."}, []string{"store", "kind", "purpose"})
	m.Addenda = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lethe_addenda_total", Help: "Addenda linked into receipt chains, by type."}, []string{"type"})
	m.InventoryUncovered = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lethe_inventory_uncovered_locations",
		Help: "Locations holding subject-shaped data that no inventory store covers, by kind, at the last discovery run."}, []string{"kind"})
	m.DiscoveryLastRun = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lethe_inventory_discovery_last_run_timestamp_seconds",
		Help: "When inventory discovery last ran, by kind."}, []string{"kind"})
	m.HTTPRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lethe_http_requests_total",
		Help: "HTTP requests served by the intake API, by route pattern (unmatched: none) and status code."}, []string{"route", "code"})
	m.HTTPDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lethe_http_request_duration_seconds",
		Help: "Time to serve an intake API request, by route pattern.", Buckets: prometheus.DefBuckets}, []string{"route"})
	for _, c := range []prometheus.Collector{m.HTTPRequests, m.HTTPDuration, m.Requests, m.Rejected, m.StoreOutcomes, m.StoreDuration, m.StoreRetries, m.StoreBatch, m.ConsumerRetries,
		m.DLQRecords, m.ConsumerLag, m.Receipts, m.ErasureDuration, m.Overdue, m.SLAThreshold, m.MissingDataKeys, m.Reappeared, m.Addenda,
		m.InventoryUncovered, m.DiscoveryLastRun} {
		f(c)
	}
	return m
}

var discard = New()

// Or returns m, or a private unscraped instance when m is nil.
func Or(m *Metrics) *Metrics {
	if m == nil {
		return discard
	}
	return m
}

// Check is a readiness probe: nil when the dependency it names is reachable.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Handler serves the routes added with Handle, GET /metrics, GET /healthz (the process is
// alive) and GET /readyz (every
// check passes within 2 s; 503 with the failing checks otherwise).
func (m *Metrics) Handler(checks ...Check) http.Handler {
	mux := http.NewServeMux()
	for _, r := range m.routes {
		mux.Handle(r.pattern, r.h)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		failed := map[string]string{}
		for _, c := range checks {
			if err := c.Fn(ctx); err != nil {
				failed[c.Name] = err.Error()
			}
		}
		if len(failed) > 0 {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "failed": failed})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	return mux
}

// Serve serves Handler(checks...) on addr until ctx is done.
func (m *Metrics) Serve(ctx context.Context, addr string, checks ...Check) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: m.Handler(checks...), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the status is sent; a client that went away is no error of ours
}

// Instrument serves requests with h, a handler that routes through mux (mux itself, or
// middleware around it), and counts and times them by the pattern mux matches ("unmatched"
// for none, so the label stays bounded) and by status code.
func (m *Metrics) Instrument(mux *http.ServeMux, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		_, route := mux.Handler(r)
		if route == "" {
			route = "unmatched"
		}
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.HTTPRequests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
		m.HTTPDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// statusWriter records the status code written through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
