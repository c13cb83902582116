package s3prefixstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
)

// BenchmarkEraseAndVerify erases one subject (10 uploads of two versions, a delete marker,
// 10 session documents: 31 items) beside 1,000 other subjects' uploads, then verifies.
func BenchmarkEraseAndVerify(b *testing.B) {
	w := newWorld(b)
	for i := range 1000 {
		w.put(b, uploadsBucket, userPrefix(deletiontest.NewSubject("acme", fmt.Sprintf("other-%d", i)))+"f", "x")
	}
	st, store := New(w.client), testStore()
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		s := deletiontest.NewSubject("acme", fmt.Sprintf("cust-%d", i))
		want := w.seed(b, s, 10)
		b.StartTimer()
		res, err := st.Erase(ctx, store, s)
		if err != nil || res.Deleted() != int64(want) {
			b.Fatalf("Erase = %d, %v; want %d", res.Deleted(), err, want)
		}
		if v, err := st.Verify(ctx, store, s); err != nil || !v.Clean() {
			b.Fatalf("Verify = %+v, %v", v, err)
		}
	}
}
