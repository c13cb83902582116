package storagecmp

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/lethe-erasure/lethe/pkg/wal"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// walWorkflow is the third candidate for the workflow store: records in memory, each
// write one record appended to a pkg/wal log and fsynced, as auditlog.DirStore does. It
// implements only what BenchmarkWorkflowCreate calls, and holds its lock across the fsync
// (one writer at a time, no group commit), which is enough for one writer.
type walWorkflow struct {
	mu      sync.Mutex
	log     *wal.Log
	records map[string]workflow.Record
}

func openWALWorkflow(dir string) (*walWorkflow, error) {
	s := &walWorkflow{records: map[string]workflow.Record{}}
	var err error
	s.log, err = wal.Open(dir, "wf-bench-1", func(p []byte, _ int64) error {
		var r workflow.Record
		if err := json.Unmarshal(p, &r); err != nil {
			return err
		}
		s.records[r.RequestID] = r
		return nil
	})
	return s, err
}

func (s *walWorkflow) Create(_ context.Context, r workflow.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.records[r.RequestID]; ok {
		return workflow.ErrExists
	}
	r.Version = 1
	js, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b, _, err := s.log.Append(js, 0)
	if err != nil {
		return err
	}
	if err := s.log.Commit(b); err != nil {
		return err
	}
	s.records[r.RequestID] = r
	return nil
}

func (s *walWorkflow) Close() error { return s.log.Close() }
