package service

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/discovery"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// Open connects a deleter's store: it returns the deletion.Store of the deleter's kind and
// the readiness checks of its backend. It should not wait for the backend to answer; the
// checks report whether it does.
type Open func(ctx context.Context, env Env) (deletion.Store, []metrics.Check, error)

// Deleter runs the deleter service name for inventory kind kind: it is the whole of a
// deleter's main function. It opens the store, validates every inventory store of kind
// through the store's deletion.Validator (refusing to start, naming each store and field at
// fault), and runs a worker in consumer group "lethe-"+name on erasure.requested, with the
// broker's and open's readiness checks and the worker's metrics. An inventory naming no
// store of kind is not an error: a deleter is deployed before its stores are added to the
// inventory, and reports nothing until they are.
//
// The worker erases only requests that carry a valid MAC under LETHE_MAC_KEY and, unless
// LETHE_ALLOW_UNSEALED=true (development only, logged as a warning at start), whose
// identifiers are sealed; it signs its reports (see package worker).
//
// When the store is a deletion.Discoverer, the deleter also runs inventory discovery (package
// discovery: every LETHE_DISCOVERY_INTERVAL, off by default, and on POST /discovery), serves
// the last report on GET /discovery of its metrics address, exports
// lethe_inventory_uncovered_locations{kind}, and stamps the last run on every report.
func Deleter(name, kind string, open Open) {
	Main(name, DeleterSpec(name, kind, open))
}

// DeleterSpec is the build function Deleter passes to Main; it is exported for tests and
// for binaries that run a deleter beside other groups.
func DeleterSpec(name, kind string, open Open) func(ctx context.Context, env Env) (Spec, error) {
	return func(ctx context.Context, env Env) (Spec, error) {
		store, checks, err := open(ctx, env)
		if err != nil {
			return Spec{}, fmt.Errorf("%s: open %s store: %w", name, kind, err)
		}
		inv := env.Config.Inventory
		if err := deletion.ValidateStores(inv, kind, store); err != nil {
			return Spec{}, fmt.Errorf("%s: refusing to start: %w", name, err)
		}
		if len(inv.OfKinds(kind)) == 0 {
			env.Log.Warn("no inventory store of this kind: nothing to erase until one is added",
				zap.String("kind", kind), zap.String("inventory_version", inv.Version))
		}
		dopts, err := discovery.FromEnv()
		if err != nil {
			return Spec{}, fmt.Errorf("%s: %w", name, err)
		}
		batching, inflight, err := BatchingFromEnv(os.Getenv)
		if err != nil {
			return Spec{}, fmt.Errorf("%s: %w", name, err)
		}
		if env.Config.AllowUnsealed {
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
			AllowUnsealed: env.Config.AllowUnsealed,
			MAC:           env.Config.MAC,
			Registry:      env.Registry,
			Batching:      batching,
		}
		spec := Spec{
			Groups: []Group{{
				Name:     "lethe-" + name,
				Topics:   []string{event.TopicRequested},
				Handler:  w.Handle,
				InFlight: inflight,
			}},
			Checks: checks,
		}
		if r := discovery.For(kind, store, inv, dopts, env.Metrics, env.Log); r != nil {
			set := discovery.Set{r}
			w.Discovery = set
			h, err := discoveryHandler(set, env.Config.MetricsAddr)
			if err != nil {
				return Spec{}, fmt.Errorf("%s: %w", name, err)
			}
			metrics.Or(env.Metrics).Handle("/discovery", h)
			spec.Run = set.Run
		}
		return spec, nil
	}
}

// InFlightFromEnv reads LETHE_INFLIGHT, how many records of one partition a service handles
// at once (consumer.Config.InFlight; records of one request still one at a time, in
// order); unset: worker.DefaultInFlight.
func InFlightFromEnv(getenv func(string) string) (int, error) {
	v := getenv("LETHE_INFLIGHT")
	if v == "" {
		return worker.DefaultInFlight, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1024 {
		return 0, fmt.Errorf("LETHE_INFLIGHT %q: want a whole number from 1 to 1024", v)
	}
	return n, nil
}

// MaxInFlightFromEnv reads LETHE_INFLIGHT_MAX, how many records a service handles at once
// over all the partitions it owns (consumer.Config.MaxInFlight); unset:
// consumer.DefaultMaxInFlight.
func MaxInFlightFromEnv(getenv func(string) string) (int, error) {
	v := getenv("LETHE_INFLIGHT_MAX")
	if v == "" {
		return consumer.DefaultMaxInFlight, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1<<16 {
		return 0, fmt.Errorf("LETHE_INFLIGHT_MAX %q: want a whole number from 1 to 65536", v)
	}
	return n, nil
}

// BatchingFromEnv reads how a deleter gathers work: LETHE_INFLIGHT (InFlightFromEnv), and
// for a store that can batch (deletion.BatchStore) LETHE_BATCH_MAX subjects at most per
// batch (1 turns batching off), LETHE_BATCH_WAIT, how long a batch waits to fill (a Go
// duration), and LETHE_BATCH_RUNNING, how many batches of one store and operation run at
// once. Unset values take worker.DefaultBatching's.
func BatchingFromEnv(getenv func(string) string) (worker.Batching, int, error) {
	b := worker.DefaultBatching
	inflight, err := InFlightFromEnv(getenv)
	if err != nil {
		return b, 0, err
	}
	if v := getenv("LETHE_BATCH_MAX"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return b, 0, fmt.Errorf("LETHE_BATCH_MAX %q: want a whole number of at least 1", v)
		}
		b.Max = n
	}
	if v := getenv("LETHE_BATCH_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Second {
			return b, 0, fmt.Errorf("LETHE_BATCH_WAIT %q: want a duration from 0 to 1s, such as 2ms", v)
		}
		b.Wait = d
	}
	if v := getenv("LETHE_BATCH_RUNNING"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			return b, 0, fmt.Errorf("LETHE_BATCH_RUNNING %q: want a whole number from 1 to 64", v)
		}
		b.Running = n
	}
	return b, inflight, nil
}

// discoveryHandler serves set's reports on the metrics address. POST /discovery scans
// backends: with credentials configured (auth.FromEnvIfSet) only operators may call it,
// and without them only a loopback listener serves it.
func discoveryHandler(set discovery.Set, addr string) (http.Handler, error) {
	authn, err := auth.FromEnvIfSet()
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
