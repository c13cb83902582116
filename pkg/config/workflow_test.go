package config

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/workflow"
	wfdynamo "github.com/lethe-erasure/lethe/pkg/workflow/dynamo"
)

// WorkflowStore opens the file when one is named (it wins over the table), else the
// DynamoDB audit table's store, else none; WorkflowName says which.
func TestWorkflowStore(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	file := filepath.Join(t.TempDir(), "workflow")
	for _, tc := range []struct {
		name        string
		table, file string
		want        string
		check       func(workflow.Store) bool
	}{
		{"table", "lethe-audit", "", "dynamodb:lethe-audit", func(s workflow.Store) bool { _, ok := s.(*wfdynamo.Store); return ok }},
		{"file", "", file, "dir:" + file, func(s workflow.Store) bool { _, ok := s.(*workflow.FileStore); return ok }},
		{"file beside a table", "lethe-audit", file, "dir:" + file, func(s workflow.Store) bool { _, ok := s.(*workflow.FileStore); return ok }},
		{"neither", "", "", "none", func(s workflow.Store) bool { return s == nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{Service: "intake", AuditTable: tc.table, LogLevel: "error"}
			defer c.Close()
			s, err := c.WorkflowStore(context.Background(), tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(s) || c.WorkflowName(tc.file) != tc.want {
				t.Errorf("WorkflowStore = %T, WorkflowName = %q; want %s", s, c.WorkflowName(tc.file), tc.want)
			}
		})
	}
}
