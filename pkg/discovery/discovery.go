// Package discovery runs inventory discovery for a deleter: on a schedule, it asks the
// store of its kind (a deletion.Discoverer) for the locations of its backend that hold
// subject-shaped data but no inventory store covers, keeps the last run's report, exports
// lethe_inventory_uncovered_locations{kind}, and serves the report over HTTP:
//
//	GET  /discovery  the last run of every kind served ({"reports": [...]}; a kind never
//	                 run has no run_at)
//	POST /discovery  run every kind now and answer with the new reports
//
// Reports hold kinds, locations (shapes with placeholders), reasons and counts, never a
// value read from a backend. A Runner is safe for concurrent use; a failed run keeps the
// previous counts and records its error (masked).
package discovery

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/pii"
)

// Location is one uncovered location in a report: Fields are the identity-like fields
// found there and Suggest the inventory entry (YAML) that would cover it, if any.
type Location struct {
	Kind     string   `json:"kind"`
	Location string   `json:"location"`
	Reason   string   `json:"reason"`
	Count    int64    `json:"count"`
	Fields   []string `json:"fields,omitempty"`
	Suggest  string   `json:"suggest,omitempty"`
}

// Report is the last discovery run of one kind.
type Report struct {
	Kind      string     `json:"kind"`
	RunAt     *time.Time `json:"run_at,omitempty"` // nil: never run
	Uncovered []Location `json:"uncovered"`
	Error     string     `json:"error,omitempty"` // of the last run, masked; counts are the previous run's
}

// Options configure a Runner.
type Options struct {
	Interval time.Duration // between runs; 0: only on request (POST /discovery)
	deletion.DiscoverOptions
}

// Settings declare a deleter's discovery.
type Settings struct {
	Interval time.Duration `env:"LETHE_DISCOVERY_INTERVAL" default:"1h" min:"0s" doc:"Time between inventory discovery runs, the first at start-up; 0: only on request (POST /discovery)."`
	Fields   []string      `env:"LETHE_DISCOVERY_FIELDS" default:"customer_id,user_id,userid,customer,subject_id,account_id,member_id,email,email_address,phone,phone_number,session_id,thread_id,conversation_id,owner_id,person_id,patient_id,client_id" doc:"Identity-like column and key-segment names discovery looks for, comma separated."`
	Sample   int           `env:"LETHE_DISCOVERY_SAMPLE" default:"200" min:"1" doc:"Items sampled per location for values matching personal-data patterns."`
	Tenants  []string      `env:"LETHE_DISCOVERY_TENANTS" doc:"Known tenants, comma separated, for matching {tenant} in locations."`
}

// Options returns the Runner options s declares.
func (s Settings) Options() Options {
	return Options{Interval: s.Interval, DiscoverOptions: deletion.DiscoverOptions{Fields: s.Fields, Sample: s.Sample, Tenants: s.Tenants}}
}

// Runner runs discovery for one kind.
type Runner struct {
	Kind      string
	Store     deletion.Discoverer
	Inventory *inventory.Inventory
	Options   Options
	Metrics   *metrics.Metrics // nil records nothing
	Log       *zap.Logger      // nil logs nothing
	Now       func() time.Time

	mu    sync.Mutex
	last  Report
	found []deletion.Uncovered // the last successful run's, as the store reported them
	runs  sync.Mutex           // one run at a time
}

// For returns a Runner for the store of kind when it is a deletion.Discoverer, else nil.
func For(kind string, store deletion.Store, inv *inventory.Inventory, o Options, m *metrics.Metrics, log *zap.Logger) *Runner {
	d, ok := store.(deletion.Discoverer)
	if !ok {
		return nil
	}
	return &Runner{Kind: kind, Store: d, Inventory: inv, Options: o, Metrics: m, Log: log}
}

// RunOnce runs discovery now and returns its report; an error is also recorded in the
// report, which keeps the previous run's locations.
func (r *Runner) RunOnce(ctx context.Context) Report {
	r.runs.Lock()
	defer r.runs.Unlock()
	found, err := r.Store.Discover(ctx, r.Inventory, r.Options.DiscoverOptions)
	now := time.Now().UTC()
	if r.Now != nil {
		now = r.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last.Kind = r.Kind
	if err != nil {
		r.last.Error = pii.Mask(err.Error())
		r.log().Warn("inventory discovery failed", zap.String("kind", r.Kind), zap.String("error", r.last.Error))
		return r.copy()
	}
	r.last, r.found = Report{Kind: r.Kind, RunAt: &now, Uncovered: []Location{}}, found
	for _, u := range found {
		r.last.Uncovered = append(r.last.Uncovered, Location{Kind: u.Kind, Location: u.Location, Reason: u.Reason, Count: u.Count, Fields: u.Fields, Suggest: u.Suggest})
	}
	m := metrics.Or(r.Metrics)
	m.InventoryUncovered.WithLabelValues(r.Kind).Set(float64(len(found)))
	m.DiscoveryLastRun.WithLabelValues(r.Kind).Set(float64(now.Unix()))
	r.log().Info("inventory discovery ran", zap.String("kind", r.Kind), zap.Int("uncovered", len(found)))
	return r.copy()
}

func (r *Runner) copy() Report {
	c := r.last
	c.Uncovered = append([]Location(nil), r.last.Uncovered...)
	return c
}

// Last returns the last run's report.
func (r *Runner) Last() Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.copy()
	c.Kind = r.Kind
	return c
}

// Uncovered returns the locations the last successful run found outside the inventory, as
// the store of kind reported them (nil when r serves another kind or never ran).
func (r *Runner) Uncovered(kind string) []deletion.Uncovered {
	if r == nil || kind != r.Kind {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.found)
}

// LastRun returns when discovery last ran for kind and how many locations it found
// uncovered (ok false when it never ran or r serves another kind). It is what the worker
// stamps on each report's verification.
func (r *Runner) LastRun(kind string) (at time.Time, uncovered int64, ok bool) {
	if r == nil || kind != r.Kind {
		return time.Time{}, 0, false
	}
	l := r.Last()
	if l.RunAt == nil {
		return time.Time{}, 0, false
	}
	return *l.RunAt, int64(len(l.Uncovered)), true
}

// Run runs discovery at once and then every Options.Interval until ctx is done; with no
// interval it returns at once (discovery then runs on request only).
func (r *Runner) Run(ctx context.Context) error {
	if r.Options.Interval <= 0 {
		return nil
	}
	t := time.NewTicker(r.Options.Interval)
	defer t.Stop()
	for {
		r.RunOnce(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (r *Runner) log() *zap.Logger {
	if r.Log == nil {
		return zap.NewNop()
	}
	return r.Log
}

// Set is the runners of one process, one per kind.
type Set []*Runner

// LastRun is the LastRun of the runner of kind.
func (s Set) LastRun(kind string) (time.Time, int64, bool) {
	for _, r := range s {
		if r.Kind == kind {
			return r.LastRun(kind)
		}
	}
	return time.Time{}, 0, false
}

// Uncovered is the Uncovered of the runner of kind.
func (s Set) Uncovered(kind string) []deletion.Uncovered {
	for _, r := range s {
		if r.Kind == kind {
			return r.Uncovered(kind)
		}
	}
	return nil
}

// Reports returns the last report of every runner.
func (s Set) Reports() []Report {
	out := []Report{}
	for _, r := range s {
		out = append(out, r.Last())
	}
	return out
}

// Run runs every runner's schedule until ctx is done.
func (s Set) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, r := range s {
		wg.Go(func() { _ = r.Run(ctx) }) // Run returns nil: each run records its error in its report
	}
	wg.Wait()
	return nil
}

// Response is the JSON body of GET and POST /discovery.
type Response struct {
	Reports []Report `json:"reports"`
}

// Handler serves GET /discovery (the last reports) and POST /discovery (run now).
func (s Set) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /discovery", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, Response{Reports: s.Reports()})
	})
	mux.HandleFunc("POST /discovery", func(w http.ResponseWriter, req *http.Request) {
		out := Response{Reports: []Report{}}
		for _, r := range s {
			out.Reports = append(out.Reports, r.RunOnce(req.Context()))
		}
		writeJSON(w, out)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v) // the status is sent; a client that went away is no error of ours
}
