package envelope_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/envelope"
)

// BenchmarkCreateParallel measures durable creates of new data keys from concurrent
// callers, as intake creates one per request.
func BenchmarkCreateParallel(b *testing.B) {
	s, err := envelope.NewDirKeyStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	wrapped := make([]byte, 60)
	b.Cleanup(func() { s.Close() })
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := b.Context()
		for pb.Next() {
			if err := s.Create(ctx, fmt.Sprintf("er_%d", n.Add(1)), wrapped); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
