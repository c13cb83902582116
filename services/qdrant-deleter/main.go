// Command qdrant-deleter erases data subjects from every inventory store of kind "qdrant": it consumes
// erasure.requested, erases and verifies by reading back, and publishes one
// erasure.store.done per store. Configuration: see package config.
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

func main() {
	service.Main("qdrant-deleter", func(ctx context.Context, env service.Env) (service.Spec, error) {
		client, err := env.Config.Qdrant()
		if err != nil {
			return service.Spec{}, err
		}
		store := qdrantstore.New(client)
		w := &worker.Worker{Inventory: env.Config.Inventory, Stores: map[string]deletion.Store{"qdrant": store}, Producer: env.Producer, Log: env.Log, Metrics: env.Metrics, Sealer: env.Sealer}
		return service.Spec{
			Groups: []service.Group{{Name: "lethe-qdrant-deleter", Topics: []string{event.TopicRequested}, Handler: w.Handle}},
			Checks: []metrics.Check{{Name: "qdrant", Fn: func(ctx context.Context) error { _, err := client.HealthCheck(ctx); return err }}},
		}, nil
	})
}
