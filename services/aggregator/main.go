// Command aggregator joins erasure.store.done reports into receipts: it writes exactly one
// receipt per request to the audit table and publishes it on erasure.completed.
// Configuration: aggregator.Config and the settings every service reads
// (docs/configuration.md); the aggregator also needs LETHE_CHAIN_KEY.
package main

import (
	"context"
	"errors"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Main("aggregator", func(ctx context.Context, env service.Env, cfg aggregator.Config) (service.Spec, error) {
		if env.Config.ChainKey == nil {
			return service.Spec{}, errors.New("aggregator: no receipt chain key: set LETHE_CHAIN_KEY (at least 32 bytes, e.g. head -c 32 /dev/urandom | base64) or LETHE_CHAIN_KEY_FILE, and give it to auditors only")
		}
		store, err := env.Config.AuditStore(ctx)
		if err != nil {
			return service.Spec{}, err
		}
		_, spec := aggregator.New(cfg, env, store)
		return spec, nil
	})
}
