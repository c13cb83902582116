// Command dataset-deleter erases data subjects from every inventory store of kind
// "dataset": it consumes erasure.requested, rewrites the datasets without the subject's
// rows, verifies by reading back, and publishes one erasure.store.done per store.
// Configuration: datasetstore.DeleterSettings, service.DeleterConfig and the settings
// every service reads (docs/configuration.md).
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Deleter("dataset-deleter", datasetstore.Kind, func(ctx context.Context, env service.Env, s datasetstore.DeleterSettings) (deletion.Store, []metrics.Check, error) {
		client, err := s.S3.Client(ctx, env.Log)
		if err != nil {
			return nil, nil, err
		}
		check := datasetstore.Check(client, env.Config.Inventory)
		return s.Dataset.Store(client, env.Config.Key), []metrics.Check{check}, nil
	})
}
