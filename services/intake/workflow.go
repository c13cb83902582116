package main

import (
	"context"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/service"
)

// configureWorkflow gives the intake the console's dead letters and, when the
// configuration names a workflow store (config.WorkflowStore: the DynamoDB audit table,
// shared by every replica, or $LETHE_WORKFLOW_FILE, one process owning it), dry runs,
// cancellation windows ($LETHE_CANCEL_WINDOW), approvals of TENANT requests whenever
// authentication is on, and legal holds. It logs which store it chose.
func configureWorkflow(ctx context.Context, svc *intake.Service, env service.Env, authn *auth.Authenticator) error {
	svc.DeadLetters = &intake.DeadLetters{Brokers: env.Config.Broker, Registry: env.Registry}
	wf, err := env.Config.WorkflowStore(ctx)
	if err != nil {
		return err
	}
	if wf != nil {
		windows, err := intake.WindowsFromEnv()
		if err != nil {
			return err
		}
		svc.Workflow, svc.Windows, svc.RequireApproval = wf, windows, authn != nil && !authn.Disabled()
	}
	store := env.Config.WorkflowName()
	env.Log.Info("workflow", zap.String("store", store), zap.Bool("approval", svc.RequireApproval))
	switch {
	case wf == nil:
		env.Log.Warn("no workflow store: no dry runs, cancellation windows, approvals or legal holds; set LETHE_AUDIT_TABLE or LETHE_WORKFLOW_FILE")
	case env.Config.WorkflowFile != "" && env.Config.AuditTable != "":
		env.Log.Warn("workflow file beside a DynamoDB audit table: run one intake process, or unset LETHE_WORKFLOW_FILE to keep the workflow in the audit table",
			zap.String("store", store))
	}
	return nil
}
