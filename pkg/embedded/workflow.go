package embedded

import (
	"path/filepath"

	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/wal"
	"github.com/lethe-erasure/lethe/pkg/workflow"
	"go.uber.org/zap"
)

// startWorkflow gives the intake its workflow store (the log directory
// DataDir/workflow.json; a JSON file of earlier versions there is migrated), windows,
// approvals and the dead letters of the stack's broker. It returns the store to close.
func startWorkflow(svc *intake.Service, o Options, st *Stack, log *zap.Logger) (*workflow.FileStore, error) {
	wf, err := workflow.OpenFile(filepath.Join(o.DataDir, "workflow.json"))
	if err != nil {
		return nil, err
	}
	wal.LogRepairs(log, "workflow", wf.Repairs())
	svc.Workflow, svc.Windows, svc.RequireApproval = wf, o.Windows, o.RequireApproval
	svc.DeadLetters = &intake.DeadLetters{Brokers: st.Broker, Registry: st.Registry}
	return wf, nil
}
