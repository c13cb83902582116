// Command postgres-deleter erases data subjects from every inventory store of kind
// "postgres": it consumes erasure.requested, deletes the subject's rows and verifies by
// COUNT, and publishes one erasure.store.done per store. Configuration:
// postgresstore.Settings (LETHE_POSTGRES_DSN or LETHE_POSTGRES_DSN_FILE, a secret),
// service.DeleterConfig and the settings every service reads (docs/configuration.md).
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/postgresstore"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Deleter("postgres-deleter", postgresstore.Kind, func(ctx context.Context, env service.Env, s postgresstore.Settings) (deletion.Store, []metrics.Check, error) {
		pool, err := s.Pool(env.Log)
		if err != nil {
			return nil, nil, err
		}
		return postgresstore.New(pool), postgresstore.Checks(pool, env.Config.Inventory), nil
	})
}
