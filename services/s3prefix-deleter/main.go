// Command s3prefix-deleter erases data subjects from every inventory store of kind
// "s3prefix": it consumes erasure.requested, deletes every object version and delete marker
// under the subject's S3 prefixes, verifies by listing the versions again, and publishes
// one erasure.store.done per store. Configuration: s3env.Settings, service.DeleterConfig
// and the settings every service reads (docs/configuration.md).
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/s3env"
	"github.com/lethe-erasure/lethe/pkg/s3prefixstore"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Deleter("s3prefix-deleter", s3prefixstore.Kind, func(ctx context.Context, env service.Env, s s3env.Settings) (deletion.Store, []metrics.Check, error) {
		client, err := s.Client(ctx, env.Log)
		if err != nil {
			return nil, nil, err
		}
		return s3prefixstore.New(client, s3prefixstore.WithKey(env.Config.Key)), []metrics.Check{s3prefixstore.Check(client, env.Config.Inventory)}, nil
	})
}
