// Command redis-deleter erases data subjects from every inventory store of kind "redis": it consumes
// erasure.requested, erases and verifies by reading back, and publishes one
// erasure.store.done per store. Configuration: see package config.
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

func main() {
	service.Main("redis-deleter", func(ctx context.Context, env service.Env) (service.Spec, error) {
		client := env.Config.Redis()
		store := redisstore.New(client)
		w := &worker.Worker{Inventory: env.Config.Inventory, Stores: map[string]deletion.Store{"redis": store}, Producer: env.Producer, Log: env.Log, Metrics: env.Metrics, Sealer: env.Sealer}
		return service.Spec{
			Groups: []service.Group{{Name: "lethe-redis-deleter", Topics: []string{event.TopicRequested}, Handler: w.Handle}},
			Checks: []metrics.Check{{Name: "redis", Fn: func(ctx context.Context) error { return client.Ping(ctx).Err() }}},
		}, nil
	})
}
