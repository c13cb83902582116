package workflow_test

import (
	"path/filepath"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/workflow"
	"github.com/lethe-erasure/lethe/pkg/workflow/workflowtest"
)

const oneOwner = "one process owns a FileStore (an exclusive lock on its directory)"

// The file store passes the conformance suite on disk and in memory.
func TestFileStoreConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"Log", func(t *testing.T) string { return filepath.Join(t.TempDir(), "workflow") }},
		{"Memory", func(*testing.T) string { return "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			workflowtest.Run(t, workflowtest.Fixture{
				New: func(t *testing.T) workflow.Store {
					s, err := workflow.OpenFile(tc.path(t))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { s.Close() })
					return s
				},
				NoReplica: oneOwner,
			})
		})
	}
}
