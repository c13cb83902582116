package embedded

import (
	"path/filepath"

	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// startWorkflow gives the intake its workflow store (DataDir/workflow.json), windows,
// approvals and the dead letters of the stack's broker.
func startWorkflow(svc *intake.Service, o Options, st *Stack) error {
	wf, err := workflow.OpenFile(filepath.Join(o.DataDir, "workflow.json"))
	if err != nil {
		return err
	}
	svc.Workflow, svc.Windows, svc.RequireApproval = wf, o.Windows, o.RequireApproval
	svc.DeadLetters = &intake.DeadLetters{Brokers: st.Broker, Registry: st.Registry}
	return nil
}
