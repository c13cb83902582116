// Command qdrant-deleter erases data subjects from every inventory store of kind "qdrant":
// it consumes erasure.requested, erases and verifies by reading back, and publishes one
// erasure.store.done per store. Configuration: qdrantstore.Settings,
// service.DeleterConfig and the settings every service reads (docs/configuration.md).
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Deleter("qdrant-deleter", qdrantstore.Kind, func(ctx context.Context, env service.Env, s qdrantstore.Settings) (deletion.Store, []metrics.Check, error) {
		client, err := s.Client(env.Log)
		if err != nil {
			return nil, nil, err
		}
		return qdrantstore.New(client), []metrics.Check{qdrantstore.Check(client)}, nil
	})
}
