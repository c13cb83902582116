// Command audit-verifier erases data subjects from every inventory store of kind "audit_log": it consumes
// erasure.requested, erases and verifies by reading back, and publishes one
// erasure.store.done per store. Configuration: see package config.
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

func main() {
	service.Main("audit-verifier", func(ctx context.Context, env service.Env) (service.Spec, error) {
		audit, err := env.Config.AuditStore(ctx)
		if err != nil {
			return service.Spec{}, err
		}
		store := auditlog.NewVerifier(audit)
		w := &worker.Worker{Inventory: env.Config.Inventory, Stores: map[string]deletion.Store{"audit_log": store}, Producer: env.Producer, Log: env.Log, Metrics: env.Metrics, Sealer: env.Sealer}
		return service.Spec{
			Groups: []service.Group{{Name: "lethe-audit-verifier", Topics: []string{event.TopicRequested}, Handler: w.Handle}},
			Checks: []metrics.Check{service.AuditCheck(audit)},
		}, nil
	})
}
