package aggregator

import (
	"cmp"
	"context"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/service"
)

// Intervals of the aggregator service's loops.
const (
	// DefaultSweepEvery is how often the service reads the schedule of sweeps, shredding
	// and physical-erasure dates.
	DefaultSweepEvery = 15 * time.Second
	// DefaultWatchdogEvery is how often the service's Watchdog lists open requests.
	DefaultWatchdogEvery = 10 * time.Second
)

// Config is the aggregator service's declared configuration.
type Config struct {
	SLATarget time.Duration `env:"LETHE_SLA_TARGET" min:"0s" doc:"Internal target beside each request's legal window, e.g. 5m: the watchdog reports crossings of it as of the window; 0: none."`
	Sweeps    Sweeps        `env:"LETHE_SWEEPS" default:"1m,1h,24h,7d" doc:"Re-verification delays after each receipt, comma separated (whole days with a d suffix); off: none, and each request's data key is destroyed at its receipt."`
	Retain    Days          `env:"LETHE_RETAIN" default:"35d" doc:"How long a request's data key is kept after its last sweep, for re-applying the erasure after a restore, e.g. 35d."`
	InFlight  service.InFlight
	// SweepEvery and WatchdogEvery are the loops' intervals, set by programs and tests
	// only; zero: DefaultSweepEvery and DefaultWatchdogEvery.
	SweepEvery, WatchdogEvery time.Duration
}

// New builds the aggregator service of cfg over env and the audit store: the Aggregator,
// whose group consumes erasure.requested, erasure.store.done and erasure.store.found, and a
// Spec whose Run runs the Watchdog and the schedule. The caller may set the Aggregator's
// clock before running the Spec.
func New(cfg Config, env service.Env, store AuditLog) (*Aggregator, service.Spec) {
	agg := &Aggregator{Store: store, Producer: env.Producer, Log: env.Log, Metrics: env.Metrics, Sealer: env.Sealer, Registry: env.Registry,
		Inventory: env.Config.Inventory, Sweeps: []time.Duration(cfg.Sweeps), Retain: time.Duration(cfg.Retain), MAC: env.Config.MAC, ChainKey: env.Config.ChainKey}
	watchdog := &Watchdog{Store: store, Producer: env.Producer, Log: env.Log, Metrics: env.Metrics, Target: cfg.SLATarget, Registry: env.Registry,
		Interval: cmp.Or(cfg.WatchdogEvery, DefaultWatchdogEvery)}
	every := cmp.Or(cfg.SweepEvery, DefaultSweepEvery)
	return agg, service.Spec{
		Groups: []service.Group{{Name: "lethe-aggregator", Topics: []string{event.TopicRequested, event.TopicStoreDone, event.TopicStoreFound},
			Handler: agg.Handle, InFlight: cfg.InFlight.PerPartition}},
		Run: func(ctx context.Context) error {
			g, ctx := errgroup.WithContext(ctx)
			g.Go(func() error { return watchdog.Run(ctx) })
			g.Go(func() error { return agg.Run(ctx, every) }) // sweeps, shredding, physical erasure
			return g.Wait()
		},
		Checks: []metrics.Check{service.AuditCheck(store)},
	}
}
