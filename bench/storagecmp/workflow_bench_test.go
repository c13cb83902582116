package storagecmp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// workflowStore is what BenchmarkWorkflowCreate needs of a workflow store.
type workflowStore interface {
	Create(ctx context.Context, r workflow.Record) error
}

// gatedRecord is a request waiting out its cancellation window, as the intake stores one:
// two transitions and the sealed erasure.requested event (here 400 opaque bytes).
func gatedRecord(id string, at time.Time) workflow.Record {
	return workflow.Record{
		RequestID: id, TenantID: "acme", SubjectHash: id + "0123456789abcdef0123456789abcdef",
		Scope: event.ScopeSubject, Regulation: "GDPR", State: workflow.Scheduled,
		SubmittedBy: "portal", SubmittedAt: at, DueAt: at.Add(30 * 24 * time.Hour), ExecuteAt: at.Add(24 * time.Hour),
		Window: 24 * time.Hour,
		History: []workflow.Transition{
			{To: workflow.Previewed, Actor: "portal", At: at},
			{From: workflow.Previewed, To: workflow.Scheduled, Action: workflow.Confirm, Actor: "dpo@acme", At: at.Add(time.Minute)},
		},
		Event: make([]byte, 400),
	}
}

// workflowFile writes a store file holding n records in the JSON layout of the earlier
// workflow.FileStore (one JSON object with records and holds) and returns its path.
func workflowFile(b *testing.B, dir string, n int) string {
	recs := make([]workflow.Record, n)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range recs {
		recs[i] = gatedRecord(requestID(), t0.Add(time.Duration(i)*time.Second))
		recs[i].Version = 1
	}
	js, err := json.Marshal(map[string]any{"records": recs, "holds": []workflow.Hold{}})
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "workflow.json")
	if err := os.WriteFile(path, js, 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// openWorkflow opens a store of kind ("wal": the production workflow.FileStore on
// pkg/wal, or "bbolt") holding n records.
func openWorkflow(b *testing.B, kind string, n int) workflowStore {
	dir := b.TempDir()
	switch kind {
	case "wal":
		// Filled by migrating a JSON file of n records: the log holds one record per
		// gated request, the bytes that n durable creates append.
		s, err := workflow.OpenFile(workflowFile(b, dir, n))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		if got, _ := s.List(context.Background()); len(got) != n {
			b.Fatalf("store opened with %d records, want %d", len(got), n)
		}
		return s
	default:
		s, err := OpenBoltWorkflow(filepath.Join(dir, "workflow.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		s.db.NoSync = true // the fill only; durable writes below
		t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		for i := range n {
			if err := s.Create(context.Background(), gatedRecord(requestID(), t0.Add(time.Duration(i)*time.Second))); err != nil {
				b.Fatal(err)
			}
		}
		s.db.NoSync = false
		if err := s.db.Sync(); err != nil {
			b.Fatal(err)
		}
		return s
	}
}

// BenchmarkWorkflowCreate is one durable Create of a gated request into a store that holds
// records=n already: workflow.FileStore (store=wal) appends and fsyncs the record to its
// log, bbolt writes the record's pages. (The JSON-file store of earlier versions, which
// rewrote and fsynced the whole file, is gone; its figures are in docs/storage.md.)
func BenchmarkWorkflowCreate(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		for _, kind := range []string{"wal", "bbolt"} {
			b.Run(fmt.Sprintf("records=%d/store=%s", n, kind), func(b *testing.B) {
				s := openWorkflow(b, kind, n)
				ctx := context.Background()
				at := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if err := s.Create(ctx, gatedRecord(requestID(), at)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
