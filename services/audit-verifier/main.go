// Command audit-verifier verifies every inventory store of kind "audit_log": it consumes
// erasure.requested, reads the subject's audit events back for raw identifiers and PII
// patterns, and publishes one erasure.store.done per store. Configuration:
// service.DeleterConfig and the settings every service reads (docs/configuration.md).
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Deleter("audit-verifier", auditlog.Kind, func(ctx context.Context, env service.Env, _ struct{}) (deletion.Store, []metrics.Check, error) {
		audit, err := env.Config.AuditStore(ctx)
		if err != nil {
			return nil, nil, err
		}
		return auditlog.NewVerifier(audit), []metrics.Check{service.AuditCheck(audit)}, nil
	})
}
