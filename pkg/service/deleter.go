package service

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/discovery"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// Open connects a deleter's store from the store's settings S: it returns the
// deletion.Store of the deleter's kind and the readiness checks of its backend. It should
// not wait for the backend to answer; the checks report whether it does.
type Open[S any] func(ctx context.Context, env Env, s S) (deletion.Store, []metrics.Check, error)

// DeleterConfig is the declared configuration of every deleter.
type DeleterConfig struct {
	InFlight      InFlight
	Batch         Batch
	AllowUnsealed bool `env:"LETHE_ALLOW_UNSEALED" doc:"true: deleters erase requests whose identifiers travel in the clear (development only; warned at start)."`
	Discovery     discovery.Settings
	// Auth says who may run discovery on request (POST /discovery): operators when
	// credentials are configured.
	Auth auth.Settings
}

// Batch declares how a deleter gathers the work of a store that batches
// (deletion.BatchStore).
type Batch struct {
	Max     int           `env:"LETHE_BATCH_MAX" default:"128" min:"1" doc:"Subjects at most per batch of a store that batches, and requests at most per read of their data keys; 1: no batching."`
	Wait    time.Duration `env:"LETHE_BATCH_WAIT" default:"2ms" min:"0s" max:"1s" doc:"How long a batch waits to fill."`
	Running int           `env:"LETHE_BATCH_RUNNING" default:"1" min:"1" max:"64" doc:"Batches of one store and operation that run at once."`
}

// Batching is the worker's batching b declares.
func (b Batch) Batching() worker.Batching {
	return worker.Batching{Max: b.Max, Wait: b.Wait, Running: b.Running}
}

// DeleterSettings are a deleter binary's own settings: the deleter's and its store's S.
type DeleterSettings[S any] struct {
	Deleter DeleterConfig
	Store   S
}

// Deleter runs the deleter service name for inventory kind kind: it is the whole of a
// deleter's main function. It opens the store from its settings and builds the deleter
// (NewDeleter). When the store discovers, it serves the last report on GET /discovery of
// its metrics address.
func Deleter[S any](name, kind string, open Open[S]) {
	Main(name, DeleterSpec(name, kind, open))
}

// DeleterSpec is the build function Deleter passes to Main; it is exported for tests and
// for binaries that run a deleter beside other groups.
func DeleterSpec[S any](name, kind string, open Open[S]) Build[DeleterSettings[S]] {
	return func(ctx context.Context, env Env, cfg DeleterSettings[S]) (Spec, error) {
		store, checks, err := open(ctx, env, cfg.Store)
		if err != nil {
			return Spec{}, fmt.Errorf("%s: open %s store: %w", name, kind, err)
		}
		spec, runner, err := NewDeleter(name, kind, cfg.Deleter, env, store)
		if err != nil {
			return Spec{}, err
		}
		spec.Checks = checks
		if runner != nil {
			h, err := discoveryHandler(discovery.Set{runner}, cfg.Deleter.Auth, env.Config.MetricsAddr)
			if err != nil {
				return Spec{}, fmt.Errorf("%s: %w", name, err)
			}
			metrics.Or(env.Metrics).Handle("/discovery", h)
		}
		return spec, nil
	}
}

// NewDeleter builds the deleter name of inventory kind kind over store. It validates every
// inventory store of kind through the store's deletion.Validator (refusing to start,
// naming each store and field at fault) and returns the Spec of a worker in consumer group
// "lethe-"+name on erasure.requested. An inventory naming no store of kind is not an
// error: a deleter is deployed before its stores are added to the inventory, and reports
// nothing until they are.
//
// The worker erases only requests that carry a valid MAC under the record MAC key and,
// unless AllowUnsealed (development only, logged as a warning), whose identifiers are
// sealed; it signs its reports (see package worker).
//
// When the store is a deletion.Discoverer, the deleter also runs inventory discovery
// (package discovery: on the Discovery schedule in Spec.Run, and on request through the
// returned Runner), exports lethe_inventory_uncovered_locations{kind}, and stamps the last
// run on every report; the Runner is nil otherwise.
func NewDeleter(name, kind string, cfg DeleterConfig, env Env, store deletion.Store) (Spec, *discovery.Runner, error) {
	inv := env.Config.Inventory
	if err := deletion.ValidateStores(inv, kind, store); err != nil {
		return Spec{}, nil, fmt.Errorf("%s: refusing to start: %w", name, err)
	}
	if len(inv.OfKinds(kind)) == 0 {
		env.Log.Warn("no inventory store of this kind: nothing to erase until one is added",
			zap.String("kind", kind), zap.String("inventory_version", inv.Version))
	}
	if cfg.AllowUnsealed {
		env.Log.Warn("INSECURE: LETHE_ALLOW_UNSEALED=true: this deleter erases requests whose identifiers travel in the clear; for development only",
			zap.String("deleter", name))
	}
	w := &worker.Worker{
		Inventory:     inv,
		Stores:        map[string]deletion.Store{kind: store},
		Producer:      env.Producer,
		Log:           env.Log,
		Metrics:       env.Metrics,
		Sealer:        env.Sealer,
		AllowUnsealed: cfg.AllowUnsealed,
		MAC:           env.Config.MAC,
		Registry:      env.Registry,
		Batching:      cfg.Batch.Batching(),
	}
	spec := Spec{Groups: []Group{{Name: "lethe-" + name, Topics: []string{event.TopicRequested}, Handler: w.Handle, InFlight: cfg.InFlight.PerPartition}}}
	r := discovery.For(kind, store, inv, cfg.Discovery.Options(), env.Metrics, env.Log)
	if r != nil {
		set := discovery.Set{r}
		w.Discovery = set
		spec.Run = set.Run
	}
	return spec, r, nil
}

// discoveryHandler serves set's reports on the metrics address. POST /discovery scans
// backends: with credentials configured (auth.Settings.Configured) only operators may call
// it, and without them only a loopback listener serves it.
func discoveryHandler(set discovery.Set, creds auth.Settings, addr string) (http.Handler, error) {
	authn, err := creds.AuthenticatorIfSet()
	if err != nil {
		return nil, err
	}
	h := set.Handler()
	if authn != nil || auth.LoopbackAddr(addr) {
		return authn.Operators(h), nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			auth.WriteError(w, http.StatusForbidden, "forbidden: POST /discovery on a non-loopback listener needs operator credentials (LETHE_TOKENS or JWT settings)")
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}
