// Command dataset-deleter erases data subjects from every inventory store of kind "dataset": it consumes
// erasure.requested, erases and verifies by reading back, and publishes one
// erasure.store.done per store. Configuration: see package config.
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

func main() {
	service.Main("dataset-deleter", func(ctx context.Context, env service.Env) (service.Spec, error) {
		client, err := env.Config.S3(ctx)
		if err != nil {
			return service.Spec{}, err
		}
		store := datasetstore.New(client, env.Config.DatasetDir)
		w := &worker.Worker{Inventory: env.Config.Inventory, Stores: map[string]deletion.Store{"dataset": store}, Producer: env.Producer, Log: env.Log, Metrics: env.Metrics, Sealer: env.Sealer}
		return service.Spec{
			Groups: []service.Group{{Name: "lethe-dataset-deleter", Topics: []string{event.TopicRequested}, Handler: w.Handle}},
			Checks: []metrics.Check{datasetstore.Check(client, env.Config.Inventory)},
		}, nil
	})
}
