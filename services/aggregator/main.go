// Command aggregator joins erasure.store.done reports into receipts: it writes exactly one
// receipt per request to the audit table and publishes it on erasure.completed.
// Configuration: see package config.
package main

import (
	"context"

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
		agg := &aggregator.Aggregator{Store: store, Producer: env.Producer, Log: env.Log, Metrics: env.Metrics, Sealer: env.Sealer, Inventory: env.Config.Inventory}
		return service.Spec{
			Groups: []service.Group{{Name: "lethe-aggregator", Topics: []string{event.TopicRequested, event.TopicStoreDone}, Handler: agg.Handle}},
			Run:    (&aggregator.Watchdog{Store: store, Producer: env.Producer, Log: env.Log, Metrics: env.Metrics}).Run,
			Checks: []metrics.Check{service.AuditCheck(store)},
		}, nil
	})
}
