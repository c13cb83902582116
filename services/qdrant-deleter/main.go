// Command qdrant-deleter erases data subjects from every inventory store of kind "qdrant":
// it consumes erasure.requested, erases and verifies by reading back, and publishes one
// erasure.store.done per store. Configuration: see package config.
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Deleter("qdrant-deleter", qdrantstore.Kind, func(ctx context.Context, env service.Env) (deletion.Store, []metrics.Check, error) {
		client, err := env.Config.Qdrant()
		if err != nil {
			return nil, nil, err
		}
		check := metrics.Check{Name: "qdrant", Fn: func(ctx context.Context) error { _, err := client.HealthCheck(ctx); return err }}
		return qdrantstore.New(client), []metrics.Check{check}, nil
	})
}
