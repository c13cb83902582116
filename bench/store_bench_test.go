package bench_test

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"testing"

	"github.com/lethe-erasure/lethe/bench"
	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

var largeCorpus = flag.Int("large", 100_000, "unrelated items per store in the large corpus of the Go benchmarks")

// BenchmarkErase measures one subject's Erase + Verify per store through Lethe's adapters
// and through the baseline, on a small (10k) and a large (-large) corpus. Each iteration
// seeds a fresh subject with the full footprint outside the timer.
func BenchmarkErase(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	st, err := embedded.StartStack(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	if st.RedisKind != "redis-server" {
		b.Fatal("redis-server is required (Debian package redis-server)")
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	key, err := subject.NewKey("bench", secret)
	if err != nil {
		b.Fatal(err)
	}
	inv := inventory.Reference()
	for _, size := range []struct {
		name string
		n    int
	}{{"small", 10_000}, {"large", *largeCorpus}} {
		tenant := "gobench-" + size.name
		coll := bench.Collection(inv, tenant)
		if err := bench.CreateCollection(ctx, st.Qdrant, inv, tenant); err != nil {
			b.Fatal(err)
		}
		others := make([]bench.Customer, size.n/20)
		for i := range others {
			others[i] = bench.NewCustomer(tenant, "other", i)
		}
		nextID, err := bench.SeedQdrant(ctx, st.Qdrant, key, coll, nil, others, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Redis.FlushAll(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		if err := bench.SeedRedisOthers(ctx, st.Redis, inv, tenant, 0, size.n); err != nil {
			b.Fatal(err)
		}
		// Datasets are a fifth of the size, as in the driver's defaults (200k rows at 1M).
		if err := bench.SeedDataset(ctx, st.S3, tenant, nil, size.n/5); err != nil {
			b.Fatal(err)
		}
		n := 0
		next := func() bench.Customer { n++; return bench.NewCustomer(tenant, fmt.Sprintf("sub%s", size.name), n) }
		seedOne := func(b *testing.B, c bench.Customer, store string) {
			var err error
			switch store {
			case "qdrant":
				nextID, err = bench.SeedQdrant(ctx, st.Qdrant, key, coll, []bench.Customer{c}, nil, nextID)
			case "redis":
				err = bench.SeedRedisTargets(ctx, st.Redis, inv, key, []bench.Customer{c})
			case "dataset":
				err = bench.SeedDataset(ctx, st.S3, tenant, []bench.Customer{c}, size.n/5)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		stores := map[string]struct {
			store    deletion.Store
			kind     string
			baseline func(bench.Customer) (int, error)
		}{
			"qdrant":  {qdrantstore.New(st.Qdrant), qdrantstore.Kind, func(c bench.Customer) (int, error) { return bench.BaselineQdrant(ctx, st.Qdrant, coll, c) }},
			"redis":   {redisstore.New(st.Redis), redisstore.Kind, func(c bench.Customer) (int, error) { return bench.BaselineRedis(ctx, st.Redis, c) }},
			"dataset": {datasetstore.New(st.S3, ""), datasetstore.Kind, func(c bench.Customer) (int, error) { return bench.BaselineDataset(ctx, st.S3, c) }},
		}
		for _, name := range []string{"qdrant", "redis", "dataset"} {
			s := stores[name]
			b.Run(fmt.Sprintf("%s/%s/lethe", name, size.name), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					c := next()
					seedOne(b, c, name)
					b.StartTimer()
					for _, inv := range inv.OfKinds(s.kind) {
						if _, err := s.store.Erase(ctx, inv, c.Subject(key)); err != nil {
							b.Fatal(err)
						}
						if v, err := s.store.Verify(ctx, inv, c.Subject(key)); err != nil || v.Remaining != 0 {
							b.Fatalf("verify: %v, %d remain", err, v.Remaining)
						}
					}
				}
			})
			b.Run(fmt.Sprintf("%s/%s/baseline", name, size.name), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					c := next()
					seedOne(b, c, name)
					b.StartTimer()
					if got, err := s.baseline(c); err != nil || got == 0 {
						b.Fatalf("baseline: %v, deleted %d", err, got)
					}
				}
			})
		}
		if err := st.Qdrant.DeleteCollection(ctx, coll); err != nil {
			b.Fatal(err)
		}
	}
}
