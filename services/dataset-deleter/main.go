// Command dataset-deleter erases data subjects from every inventory store of kind
// "dataset": it consumes erasure.requested, rewrites the datasets without the subject's
// rows, verifies by reading back, and publishes one erasure.store.done per store.
// Configuration: packages config, s3env and datasetstore (DirFromEnv, OptionsFromEnv).
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/s3env"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Deleter("dataset-deleter", datasetstore.Kind, func(ctx context.Context, env service.Env) (deletion.Store, []metrics.Check, error) {
		client, err := s3env.Client(ctx, env.Log)
		if err != nil {
			return nil, nil, err
		}
		opts, err := datasetstore.OptionsFromEnv(env.Config.Key)
		if err != nil {
			return nil, nil, err
		}
		check := datasetstore.Check(client, env.Config.Inventory)
		return datasetstore.New(client, datasetstore.DirFromEnv(), opts...), []metrics.Check{check}, nil
	})
}
