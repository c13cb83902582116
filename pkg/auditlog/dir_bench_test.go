package auditlog_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// BenchmarkPutReportParallel measures durable report writes from concurrent callers, each
// to its own (request, store) item, as the aggregator writes them.
func BenchmarkPutReportParallel(b *testing.B) {
	s, err := auditlog.OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := b.Context()
		for pb.Next() {
			i := n.Add(1)
			d := event.StoreDone{RequestID: fmt.Sprintf("er_%d", i/5), TenantID: "acme", Store: fmt.Sprintf("store-%d", i%5),
				Status: event.StatusDeleted, Locations: []event.LocationCount{{Location: "c", Deleted: 3}}, Attempt: 1}
			if err := s.PutReport(ctx, d); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
