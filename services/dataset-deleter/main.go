// Command dataset-deleter erases data subjects from every inventory store of kind
// "dataset": it consumes erasure.requested, rewrites the datasets without the subject's
// rows, verifies by reading back, and publishes one erasure.store.done per store.
// Configuration: see package config.
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Deleter("dataset-deleter", datasetstore.Kind, func(ctx context.Context, env service.Env) (deletion.Store, []metrics.Check, error) {
		client, err := env.Config.S3(ctx)
		if err != nil {
			return nil, nil, err
		}
		check := datasetstore.Check(client, env.Config.Inventory)
		return datasetstore.New(client, env.Config.DatasetDir), []metrics.Check{check}, nil
	})
}
