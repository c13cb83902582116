// Command aggregator joins erasure.store.done reports into receipts: it writes exactly one
// receipt per request to the audit table and publishes it on erasure.completed.
// Configuration: see package config; the aggregator also needs LETHE_CHAIN_KEY.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Main("aggregator", func(ctx context.Context, env service.Env) (service.Spec, error) {
		store, err := env.Config.AuditStore(ctx)
		if err != nil {
			return service.Spec{}, err
		}
		var target time.Duration // LETHE_SLA_TARGET: the internal target beside the legal window
		if v := os.Getenv("LETHE_SLA_TARGET"); v != "" {
			if target, err = time.ParseDuration(v); err != nil || target <= 0 {
				return service.Spec{}, fmt.Errorf("LETHE_SLA_TARGET must be a positive duration such as 5m")
			}
		}
		sweeps, retain, err := aggregator.SweepsFromEnv(os.Getenv) // LETHE_SWEEPS, LETHE_RETAIN
		if err != nil {
			return service.Spec{}, err
		}
		inflight, err := service.InFlightFromEnv(os.Getenv)
		if err != nil {
			return service.Spec{}, err
		}
		if env.Config.ChainKey == nil {
			return service.Spec{}, errors.New("aggregator: no receipt chain key: set LETHE_CHAIN_KEY (at least 32 bytes, e.g. head -c 32 /dev/urandom | base64) or LETHE_CHAIN_KEY_FILE, and give it to auditors only")
		}
		agg := &aggregator.Aggregator{Store: store, Producer: env.Producer, Log: env.Log, Metrics: env.Metrics, Sealer: env.Sealer, Registry: env.Registry, Inventory: env.Config.Inventory,
			Sweeps: sweeps, Retain: retain, MAC: env.Config.MAC, ChainKey: env.Config.ChainKey}
		watchdog := &aggregator.Watchdog{Store: store, Producer: env.Producer, Log: env.Log, Metrics: env.Metrics, Target: target, Registry: env.Registry}
		return service.Spec{
			Groups: []service.Group{{Name: "lethe-aggregator", Topics: []string{event.TopicRequested, event.TopicStoreDone, event.TopicStoreFound}, Handler: agg.Handle, InFlight: inflight}},
			Run: func(ctx context.Context) error {
				g, ctx := errgroup.WithContext(ctx)
				g.Go(func() error { return watchdog.Run(ctx) })
				g.Go(func() error { return agg.Run(ctx, 15*time.Second) }) // sweeps, shredding, physical erasure
				return g.Wait()
			},
			Checks: []metrics.Check{service.AuditCheck(store)},
		}, nil
	})
}
