package main

import (
	"os"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/wal"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// configureWorkflow enables dry runs, cancellation windows ($LETHE_CANCEL_WINDOW),
// approvals of TENANT requests and legal holds when $LETHE_WORKFLOW_FILE names the store
// that keeps them (a write-ahead log directory, one intake process owning it; a JSON file
// of earlier versions there is migrated), and the console's dead letters.
func configureWorkflow(svc *intake.Service, env service.Env, authn *auth.Authenticator) error {
	svc.DeadLetters = &intake.DeadLetters{Brokers: env.Config.Broker, Registry: env.Registry}
	path := os.Getenv("LETHE_WORKFLOW_FILE")
	if path == "" {
		return nil
	}
	wf, err := workflow.OpenFile(path)
	if err != nil {
		return err
	}
	wal.LogRepairs(env.Log, "workflow", wf.Repairs())
	windows, err := intake.WindowsFromEnv()
	if err != nil {
		return err
	}
	svc.Workflow, svc.Windows, svc.RequireApproval = wf, windows, authn != nil && !authn.Disabled()
	return nil
}
