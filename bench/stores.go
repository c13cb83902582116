package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"

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

// corpus is one size's corpus: its tenant's Qdrant collection, a Redis database of its own
// (so that a scan covers this size's keyspace only) and dataset objects.
type corpus struct {
	sz      Size
	tenant  string
	coll    string
	redis   redis.UniversalClient
	targets []Customer
}

// measureSizes seeds every size side by side, then erases subjects from each store:
// through Lethe's adapters n per size (20n for Qdrant and Redis; Erase then Verify, checking
// every item went and none remains) after n untimed ones, the sizes taking turns so that
// both see the same moments of the shared machine; then per size n through the store's
// extra approach (see storeTimes) and n through the baseline (checking it found every
// item). The Qdrant baseline runs as the seeds' pipeline ran, without payload indexes; its
// extra, before they are dropped. The result is by size name, then store.
func (b *storeBench) measureSizes(ctx context.Context, sizes []Size, n int) (map[string]map[string]*storeTimes, error) {
	// Lethe's Qdrant and Redis erasures take a fraction of a millisecond, where a median of
	// n swings with the machine's noise.
	lethe := 20 * n
	corpora := make([]*corpus, len(sizes))
	for i, sz := range sizes {
		c := &corpus{sz: sz, tenant: "bench-" + sz.Name,
			redis: redis.NewClient(&redis.Options{Addr: b.st.Addrs.Redis, DB: i + 1})}
		defer c.redis.Close()
		c.coll = Collection(b.inv, c.tenant)
		// Lethe's, then the baseline's, then the extra's, then the untimed ones
		c.targets = make([]Customer, lethe+3*n)
		for j := range c.targets {
			c.targets[j] = NewCustomer(c.tenant, "sub", j)
		}
		if err := b.seed(ctx, c); err != nil {
			return nil, err
		}
		corpora[i] = c
	}
	// The Qdrant emulator shares this process's heap: collect the seeding's garbage now,
	// or the erasures pay for marking a million points' heap while they run, a cost of this
	// benchmark, not of the erasure (Qdrant is a process of its own).
	runtime.GC()
	out := map[string]map[string]*storeTimes{}
	for _, c := range corpora {
		out[c.sz.Name] = map[string]*storeTimes{}
	}
	for _, name := range []string{storeQdrant, storeRedis, storeDataset} {
		as := make([]adapter, len(corpora))
		for i, c := range corpora {
			as[i] = b.adapter(ctx, name, c, lethe, n)
			out[c.sz.Name][name] = &storeTimes{}
			for _, t := range c.targets[lethe+2*n:] {
				if _, err := eraseVerify(ctx, as[i].store, as[i].invs, t.Subject(b.key), as[i].want); err != nil {
					return nil, fmt.Errorf("%s %s: warm-up: %w", name, c.sz.Name, err)
				}
			}
		}
		for j := range as[0].subjects {
			for i, c := range corpora {
				d, err := eraseVerify(ctx, as[i].store, as[i].invs, c.targets[j].Subject(b.key), as[i].want)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", name, c.sz.Name, err)
				}
				t := out[c.sz.Name][name]
				t.lethe = append(t.lethe, d)
			}
		}
		for i, c := range corpora {
			a, t := as[i], out[c.sz.Name][name]
			var err error
			if a.extra != nil {
				if t.extra, err = timeEach(c.targets[lethe+n:lethe+2*n], a.want, a.extra); err != nil {
					return nil, fmt.Errorf("%s %s: extra: %w", name, c.sz.Name, err)
				}
			}
			if name == storeQdrant {
				if err := dropPayloadIndexes(ctx, b.st.Qdrant, b.inv, c.coll); err != nil {
					return nil, err
				}
			}
			if t.baseline, err = timeEach(c.targets[lethe:lethe+n], a.want, a.baseline); err != nil {
				return nil, fmt.Errorf("%s %s: baseline: %w", name, c.sz.Name, err)
			}
			b.log("  %-8s %-5s lethe p50 %8.3f ms   baseline p50 %8.3f ms", name, c.sz.Name, t.lethe.Median(), t.baseline.Median())
		}
	}
	for _, c := range corpora {
		if err := b.st.Qdrant.DeleteCollection(ctx, c.coll); err != nil {
			return nil, fmt.Errorf("drop collection: %w", err)
		}
	}
	return out, nil
}

// adapter is how one store of one corpus is erased: Lethe's adapter over invs (want
// items a subject), the baseline and the extra approach (nil for none), and how many of
// Lethe's erasures are timed.
type adapter struct {
	store    deletion.Store
	invs     []inventory.Entry
	want     int64
	baseline func(Customer) (int, error)
	extra    func(Customer) (int, error)
	subjects int
}

// adapter returns how the store name of c is erased.
func (b *storeBench) adapter(ctx context.Context, name string, c *corpus, lethe, n int) adapter {
	switch name {
	case storeQdrant:
		base := func(cu Customer) (int, error) { return BaselineQdrant(ctx, b.st.Qdrant, c.coll, cu) }
		return adapter{qdrantstore.New(b.st.Qdrant), withoutSemantic(b.inv.OfKinds(qdrantstore.Kind)), TaggedChunks + LegacyChunks, base, base, lethe}
	case storeRedis:
		store := redisstore.New(c.redis)
		return adapter{store, indexOnly(b.inv.OfKinds(redisstore.Kind)), KeysPerSub,
			func(cu Customer) (int, error) { return BaselineRedis(ctx, c.redis, cu) },
			func(cu Customer) (int, error) { // the same adapter on stores without index_only
				_, err := eraseVerify(ctx, store, b.inv.OfKinds(redisstore.Kind), cu.Subject(b.key), KeysPerSub)
				return KeysPerSub, err
			}, lethe}
	default:
		return adapter{datasetstore.New(b.st.S3, ""), b.inv.OfKinds(datasetstore.Kind), 1,
			func(cu Customer) (int, error) { return BaselineDataset(ctx, b.st.S3, cu) }, nil, n}
	}
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
func eraseVerify(ctx context.Context, store deletion.Store, invs []inventory.Entry, s deletion.Subject, want int64) (time.Duration, error) {
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

// seed writes c's corpus with every target's footprint.
func (b *storeBench) seed(ctx context.Context, c *corpus) error {
	start := time.Now()
	if err := CreateCollection(ctx, b.st.Qdrant, b.inv, c.tenant); err != nil {
		return err
	}
	others := make([]Customer, c.sz.QdrantPoints/otherChunks)
	for i := range others {
		others[i] = NewCustomer(c.tenant, "other", i)
	}
	if _, err := SeedQdrant(ctx, b.st.Qdrant, b.key, c.coll, c.targets, others, 1); err != nil {
		return err
	}
	b.log("  seeded qdrant %s: %d points in %s", c.sz.Name, c.sz.QdrantPoints+len(c.targets)*(TaggedChunks+LegacyChunks), time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if err := SeedRedisOthers(ctx, c.redis, b.inv, c.tenant, 0, c.sz.RedisKeys); err != nil {
		return err
	}
	if err := SeedRedisTargets(ctx, c.redis, b.inv, b.key, c.targets); err != nil {
		return err
	}
	dbsize, _ := c.redis.DBSize(ctx).Result()
	b.log("  seeded redis %s: %d keys in %s", c.sz.Name, dbsize, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if err := SeedDataset(ctx, b.st.S3, c.tenant, c.targets, c.sz.DatasetRows); err != nil {
		return err
	}
	b.log("  seeded dataset %s: %d rows in %s", c.sz.Name, c.sz.DatasetRows+len(c.targets), time.Since(start).Round(time.Millisecond))
	return nil
}

// indexOnly returns copies of the Redis stores that trust their index (index_only): the
// app writes every key of a subject through it, as the benchmark's seeding does.
func indexOnly(sts []inventory.Entry) []inventory.Entry {
	out := make([]inventory.Entry, len(sts))
	for i, st := range sts {
		st.Locators = st.Locators.With("index_only", true)
		out[i] = st
	}
	return out
}

// withoutSemantic turns the semantic read-back off in sts, so that the per-store figures
// compare the same work as the seeds' approach; runSemantic measures the read-back beside
// the erasure without it.
func withoutSemantic(sts []inventory.Entry) []inventory.Entry {
	out := make([]inventory.Entry, len(sts))
	for i, st := range sts {
		st.Locators = st.Locators.With("similar", qdrantstore.SimilarOff)
		out[i] = st
	}
	return out
}
