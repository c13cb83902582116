// Command redis-deleter erases data subjects from every inventory store of kind "redis": it
// consumes erasure.requested, erases and verifies by reading back, and publishes one
// erasure.store.done per store. Configuration: see package config.
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Deleter("redis-deleter", redisstore.Kind, func(ctx context.Context, env service.Env) (deletion.Store, []metrics.Check, error) {
		client := env.Config.Redis()
		check := metrics.Check{Name: "redis", Fn: func(ctx context.Context) error { return client.Ping(ctx).Err() }}
		return redisstore.New(client), []metrics.Check{check}, nil
	})
}
