// Command aggregator joins erasure.store.done reports into receipts: it writes exactly one
// receipt per request to the audit table and publishes it on erasure.completed.
// Configuration: see package config.
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Main("aggregator", func(ctx context.Context, env service.Env) ([]service.Group, func(context.Context) error, error) {
		store, err := env.Config.AuditStore(ctx)
		if err != nil {
			return nil, nil, err
		}
		agg := &aggregator.Aggregator{Store: store, Producer: env.Producer, Log: env.Log}
		return []service.Group{{Name: "lethe-aggregator", Topics: []string{event.TopicRequested, event.TopicStoreDone}, Handler: agg.Handle}}, nil, nil
	})
}
