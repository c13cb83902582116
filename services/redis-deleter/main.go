// Command redis-deleter erases data subjects from every inventory store of kind "redis":
// it consumes erasure.requested, erases and verifies by reading back, and publishes one
// erasure.store.done per store. Configuration: redisstore.Settings,
// service.DeleterConfig and the settings every service reads (docs/configuration.md).
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Deleter("redis-deleter", redisstore.Kind, func(ctx context.Context, env service.Env, s redisstore.Settings) (deletion.Store, []metrics.Check, error) {
		client, err := s.Client(env.Log)
		if err != nil {
			return nil, nil, err
		}
		return redisstore.New(client), []metrics.Check{redisstore.Check(client)}, nil
	})
}
