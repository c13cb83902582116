package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Size is one corpus size: unrelated items per store.
type Size struct {
	Name         string // "small" or "large"
	RedisKeys    int
	QdrantPoints int
	DatasetRows  int
}

// storeTimes are the erasure latencies of one store at one size.
type storeTimes struct {
	lethe, baseline Durations
	// extra is a third way, per store: for Qdrant the baseline on a collection that has
	// payload indexes; for Redis Lethe's adapter with the SCAN fallback for legacy keys
	// (stores without index_only), where the main figure trusts the index.
	extra Durations
}

// storeBench erases subjects from the stores of one Stack, store by store.
type storeBench struct {
	st  *embedded.Stack
	inv *inventory.Inventory
	key subject.Key
	log func(format string, args ...any)
}

// Store names of the per-store figures.
const (
	storeQdrant  = "qdrant"
	storeRedis   = "redis"
	storeDataset = "dataset"
)

// measureSize seeds sz for a fresh tenant, then erases subjects from each store: n (5n for
// Qdrant and Redis) through Lethe's adapters (Erase then Verify, checking every item went
// and none remains), n through the baseline (checking it found every item), and n through
// the store's extra approach (see storeTimes). The Qdrant baseline runs
// as the seeds' pipeline ran, without payload indexes; its extra, before they are dropped.
func (b *storeBench) measureSize(ctx context.Context, sz Size, n int) (map[string]*storeTimes, error) {
	tenant := "bench-" + sz.Name
	// Lethe's Qdrant and Redis erasures take a fraction of a millisecond, where a median of
	// n swings with the machine's noise.
	lethe := 5 * n
	targets := make([]Customer, lethe+2*n) // Lethe's, then the baseline's, then the extra's
	for i := range targets {
		targets[i] = NewCustomer(tenant, "sub", i)
	}
	if err := b.seed(ctx, tenant, sz, targets); err != nil {
		return nil, err
	}
	out := map[string]*storeTimes{}
	coll := Collection(b.inv, tenant)
	adapters := []struct {
		name     string
		store    deletion.Store
		invs     []inventory.Store
		want     int64
		baseline func(Customer) (int, error)
		extra    func(Customer) (int, error)
		subjects int // Lethe's erasures timed
	}{
		{storeQdrant, qdrantstore.New(b.st.Qdrant), withoutSemantic(b.inv.OfKinds(qdrantstore.Kind)), TaggedChunks + LegacyChunks,
			func(c Customer) (int, error) { return BaselineQdrant(ctx, b.st.Qdrant, coll, c) },
			func(c Customer) (int, error) { return BaselineQdrant(ctx, b.st.Qdrant, coll, c) }, lethe},
		{storeRedis, redisstore.New(b.st.Redis), indexOnly(b.inv.OfKinds(redisstore.Kind)), KeysPerSub,
			func(c Customer) (int, error) { return BaselineRedis(ctx, b.st.Redis, c) },
			func(c Customer) (int, error) {
				_, err := eraseVerify(ctx, redisstore.New(b.st.Redis), b.inv.OfKinds(redisstore.Kind), c.Subject(b.key), KeysPerSub)
				return KeysPerSub, err
			}, lethe},
		{storeDataset, datasetstore.New(b.st.S3, ""), b.inv.OfKinds(datasetstore.Kind), 1,
			func(c Customer) (int, error) { return BaselineDataset(ctx, b.st.S3, c) }, nil, n},
	}
	for _, a := range adapters {
		t := &storeTimes{}
		var err error
		for _, c := range targets[:a.subjects] {
			d, err := eraseVerify(ctx, a.store, a.invs, c.Subject(b.key), a.want)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", a.name, sz.Name, err)
			}
			t.lethe = append(t.lethe, d)
		}
		if a.extra != nil {
			if t.extra, err = timeEach(targets[lethe+n:], a.want, a.extra); err != nil {
				return nil, fmt.Errorf("%s %s: extra: %w", a.name, sz.Name, err)
			}
		}
		if a.name == storeQdrant {
			if err := dropPayloadIndexes(ctx, b.st.Qdrant, b.inv, coll); err != nil {
				return nil, err
			}
		}
		if t.baseline, err = timeEach(targets[lethe:lethe+n], a.want, a.baseline); err != nil {
			return nil, fmt.Errorf("%s %s: baseline: %w", a.name, sz.Name, err)
		}
		b.log("  %-8s %-5s lethe p50 %8.3f ms   baseline p50 %8.3f ms", a.name, sz.Name, t.lethe.Median(), t.baseline.Median())
		out[a.name] = t
	}
	if err := b.st.Qdrant.DeleteCollection(ctx, coll); err != nil {
		return nil, fmt.Errorf("drop collection: %w", err)
	}
	return out, nil
}

// timeEach erases each of cs with erase, checking it deleted want items, and returns the
// time each took.
func timeEach(cs []Customer, want int64, erase func(Customer) (int, error)) (Durations, error) {
	var out Durations
	for _, c := range cs {
		start := time.Now()
		got, err := erase(c)
		if err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
		if int64(got) != want {
			return nil, fmt.Errorf("deleted %d items of a subject, want %d", got, want)
		}
	}
	return out, nil
}

// eraseVerify erases s from every inventory store in invs and verifies each, failing
// unless exactly want items went and none remain. It returns the time taken.
func eraseVerify(ctx context.Context, store deletion.Store, invs []inventory.Store, s deletion.Subject, want int64) (time.Duration, error) {
	start := time.Now()
	var deleted, remaining int64
	for _, inv := range invs {
		res, err := store.Erase(ctx, inv, s)
		if err != nil {
			return 0, fmt.Errorf("erase: %w", err)
		}
		v, err := store.Verify(ctx, inv, s)
		if err != nil {
			return 0, fmt.Errorf("verify: %w", err)
		}
		deleted += currentRows(res)
		remaining += v.Remaining
	}
	d := time.Since(start)
	if deleted != want || remaining != 0 {
		return 0, fmt.Errorf("erased %d items of a subject and %d remain, want %d and 0", deleted, remaining, want)
	}
	return d, nil
}

// currentRows is the deleted count of r without old dataset versions, which are copies.
func currentRows(r deletion.Result) int64 {
	var n int64
	for _, l := range r.Locations {
		if len(l.Location) > 15 && l.Location[len(l.Location)-15:] == " (old versions)" {
			continue
		}
		n += l.Deleted
	}
	return n
}

// seed writes sz's corpus for tenant with every target's footprint, after clearing Redis
// so that each size is measured on its own corpus.
func (b *storeBench) seed(ctx context.Context, tenant string, sz Size, targets []Customer) error {
	start := time.Now()
	if err := CreateCollection(ctx, b.st.Qdrant, b.inv, tenant); err != nil {
		return err
	}
	others := make([]Customer, sz.QdrantPoints/otherChunks)
	for i := range others {
		others[i] = NewCustomer(tenant, "other", i)
	}
	if _, err := SeedQdrant(ctx, b.st.Qdrant, b.key, Collection(b.inv, tenant), targets, others, 1); err != nil {
		return err
	}
	b.log("  seeded qdrant %s: %d points in %s", sz.Name, sz.QdrantPoints+len(targets)*(TaggedChunks+LegacyChunks), time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if err := b.st.Redis.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("redis flush: %w", err)
	}
	if err := SeedRedisOthers(ctx, b.st.Redis, b.inv, tenant, 0, sz.RedisKeys); err != nil {
		return err
	}
	if err := SeedRedisTargets(ctx, b.st.Redis, b.inv, b.key, targets); err != nil {
		return err
	}
	dbsize, _ := b.st.Redis.DBSize(ctx).Result()
	b.log("  seeded redis %s: %d keys in %s", sz.Name, dbsize, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if err := SeedDataset(ctx, b.st.S3, tenant, targets, sz.DatasetRows); err != nil {
		return err
	}
	b.log("  seeded dataset %s: %d rows in %s", sz.Name, sz.DatasetRows+len(targets), time.Since(start).Round(time.Millisecond))
	return nil
}

// indexOnly returns copies of the Redis stores that trust their index (index_only): the
// app writes every key of a subject through it, as the benchmark's seeding does.
func indexOnly(sts []inventory.Store) []inventory.Store {
	out := make([]inventory.Store, len(sts))
	for i, st := range sts {
		st.Locators = st.Locators.With("index_only", true)
		out[i] = st
	}
	return out
}

// withoutSemantic turns the semantic read-back off in sts, so that the per-store figures
// compare the same work as the seeds' approach; runSemantic measures the read-back beside
// the erasure without it.
func withoutSemantic(sts []inventory.Store) []inventory.Store {
	out := make([]inventory.Store, len(sts))
	for i, st := range sts {
		st.Locators = st.Locators.With("similar", qdrantstore.SimilarOff)
		out[i] = st
	}
	return out
}
