// Command webhook-deleter erases data subjects held by processors and vendors, every
// inventory store of kind "webhook": it consumes erasure.requested, sends each processor a
// signed erase and verify request (docs/webhook-contract.md), and publishes one
// erasure.store.done per store with the processor's attestation. Configuration:
// webhookstore.Settings, service.DeleterConfig and the settings every service reads
// (docs/configuration.md).
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/webhookstore"
)

func main() {
	service.Deleter("webhook-deleter", webhookstore.Kind, func(ctx context.Context, env service.Env, s webhookstore.Settings) (deletion.Store, []metrics.Check, error) {
		client, err := s.Client(env.Log)
		if err != nil {
			return nil, nil, err
		}
		return webhookstore.New(client), nil, nil
	})
}
