package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/bench"
	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// BenchmarkDatasetChain measures what the dataset deleter does for a batch of subjects of
// one tenant, as in the end-to-end phases: CountBatch (the find recorded before erasing),
// EraseBatch and VerifyBatch, with summaries, on the embedded stack's versioned bucket,
// over the tenant's one CSV object of 1,000 unrelated rows and one row per subject (4,000
// subjects; the object is seeded again once every subject was erased). It reports each
// step's share per batch (find-ms/op, erase-ms/op, verify-ms/op) and the CPU time of the
// process per batch (cpu-ms/op, the in-process S3 server's included), which overlapping
// goroutines hide from the wall time.
func BenchmarkDatasetChain(b *testing.B) {
	ctx := context.Background()
	key, err := subject.NewKey("bench", bytes.Repeat([]byte("k"), 32))
	if err != nil {
		b.Fatal(err)
	}
	st, err := embedded.StartStack(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const tenant, subjects = "bench-chain", 4000
	cs := make([]bench.Customer, subjects)
	for i := range cs {
		cs[i] = bench.NewCustomer(tenant, "sub", i)
	}
	ds := inventory.Reference().OfKinds(datasetstore.Kind)[0]
	store := datasetstore.New(st.S3, b.TempDir(), datasetstore.WithSummaries(key))
	for _, size := range []int{1, 8} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			next := subjects // seed before the first batch
			var find, erase, verify, seeding time.Duration
			cpu0 := cpuTime(b)
			for b.Loop() {
				if next+size > subjects {
					b.StopTimer()
					c := cpuTime(b)
					if err := bench.SeedDataset(ctx, st.S3, tenant, cs, 1000); err != nil {
						b.Fatal(err)
					}
					next, seeding = 0, seeding+cpuTime(b)-c
					b.StartTimer()
				}
				batch := make([]deletion.Subject, size)
				for i := range batch {
					batch[i] = cs[next].Subject(key)
					next++
				}
				t0 := time.Now()
				found, errs := store.CountBatch(ctx, ds, batch)
				if errs[0] != nil || found[0][0].Deleted != 1 {
					b.Fatalf("find: %+v, %v", found[0], errs[0])
				}
				t1 := time.Now()
				if _, errs := store.EraseBatch(ctx, ds, batch); errs[0] != nil {
					b.Fatal(errs[0])
				}
				t2 := time.Now()
				if v, errs := store.VerifyBatch(ctx, ds, batch); errs[0] != nil || v[0].Remaining != 0 {
					b.Fatalf("verify: %+v, %v", v[0], errs[0])
				}
				find, erase, verify = find+t1.Sub(t0), erase+t2.Sub(t1), verify+time.Since(t2)
			}
			cpu := cpuTime(b) - cpu0 - seeding
			n := float64(b.N) * 1e6
			b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ms/op")
			b.ReportMetric(float64(find.Nanoseconds())/n, "find-ms/op")
			b.ReportMetric(float64(erase.Nanoseconds())/n, "erase-ms/op")
			b.ReportMetric(float64(verify.Nanoseconds())/n, "verify-ms/op")
		})
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
