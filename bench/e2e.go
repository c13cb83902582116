package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// system is a running Lethe with a seeded tenant and a receipt watcher.
type system struct {
	*embedded.System
	receipts *receipts
	tenant   string
	next     int // next unused target customer
	client   *http.Client
	stopExt  func() // stops the components started apart from the system; nil: none
}

// startSystem starts Lethe on brokerName (BrokerKfake or BrokerKafka) with instances
// consumers per deleter and seeds the tenant bench-e2e with the corpus sz and targets
// customers that have the full footprint.
func startSystem(ctx context.Context, key subject.Key, brokerName string, instances int, sz Size, targets int, logf func(string, ...any)) (*system, error) {
	ext, stop, err := externals(ctx, brokerName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", brokerName, err)
	}
	s, err := startSystemWith(ctx, key, instances, sz, targets, "bench-e2e", ext, logf)
	if err != nil {
		stop()
		return nil, err
	}
	s.stopExt = stop
	return s, nil
}

// startSystemWith is startSystem seeding tenant, on the running components of ext.
func startSystemWith(ctx context.Context, key subject.Key, instances int, sz Size, targets int, tenant string, ext embedded.External, logf func(string, ...any)) (*system, error) {
	// The app follows the Redis convention (every key listed in the subject's index), so
	// the system's inventory trusts the index, as an operator would configure it. The
	// semantic read-back is off: the emulator has no HNSW index and would answer each of its
	// queries by scoring every point, which measures the emulator, not Lethe (runSemantic
	// measures the read-back on its own).
	inv := inventory.Reference()
	for i, st := range inv.Stores {
		switch st.Kind {
		case redisstore.Kind:
			inv.Stores[i].Locators = st.Locators.With("index_only", true)
		case qdrantstore.Kind:
			inv.Stores[i].Locators = st.Locators.With("similar", qdrantstore.SimilarOff)
		}
	}
	// The bench measures erasures, not the intake's rate limit or the sweeps after them.
	cfg := embedded.DefaultConfig()
	cfg.Intake.RateLimit, cfg.Aggregator.Sweeps, cfg.Aggregator.Retain = auth.Rate{}, nil, 0
	sys, err := embedded.Start(ctx, embedded.Options{Key: key, Instances: instances, Log: serviceLog(), Inventory: inv, External: ext, Config: &cfg})
	if err != nil {
		return nil, fmt.Errorf("start system: %w", err)
	}
	s := &system{System: sys, tenant: tenant, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	ok := false
	defer func() {
		if !ok {
			s.stop()
		}
	}()
	cs := make([]Customer, targets)
	for i := range cs {
		cs[i] = NewCustomer(s.tenant, "sub", i)
	}
	st := sys.Stack
	start := time.Now()
	if err := CreateCollection(ctx, st.Qdrant, sys.Inventory, s.tenant); err != nil {
		return nil, err
	}
	others := make([]Customer, sz.QdrantPoints/otherChunks)
	for i := range others {
		others[i] = NewCustomer(s.tenant, "other", i)
	}
	if _, err := SeedQdrant(ctx, st.Qdrant, key, Collection(sys.Inventory, s.tenant), cs, others, 1); err != nil {
		return nil, err
	}
	if err := SeedRedisOthers(ctx, st.Redis, sys.Inventory, s.tenant, 0, sz.RedisKeys); err != nil {
		return nil, err
	}
	if err := SeedRedisTargets(ctx, st.Redis, sys.Inventory, key, cs); err != nil {
		return nil, err
	}
	if err := SeedDataset(ctx, st.S3, s.tenant, cs, sz.DatasetRows); err != nil {
		return nil, err
	}
	logf("  system with %d instance(s) per deleter seeded (%d customers with a footprint) in %s", instances, targets, time.Since(start).Round(time.Millisecond))
	if s.receipts, err = watchReceipts(st.Broker, st.Registry); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// serviceLog logs the services to stderr at the level in $LETHE_BENCH_LOG (debug, info,
// warn, error); by default they do not log, so that logging is not measured.
func serviceLog() *zap.Logger {
	lvl, err := zap.ParseAtomicLevel(os.Getenv("LETHE_BENCH_LOG"))
	if os.Getenv("LETHE_BENCH_LOG") == "" || err != nil {
		return zap.NewNop()
	}
	cfg := zap.NewDevelopmentConfig()
	cfg.Level = lvl
	l, err := cfg.Build()
	if err != nil {
		return zap.NewNop()
	}
	return l
}

func (s *system) stop() {
	if s.receipts != nil {
		s.receipts.close()
	}
	s.Stop()
	if s.stopExt != nil {
		s.stopExt()
	}
}

// submit posts an erasure of the next seeded customer and records its submission time.
func (s *system) submit(ctx context.Context, c Customer) error {
	body, _ := json.Marshal(intake.SubmitRequest{TenantID: c.Tenant, SubjectID: c.ID, SessionIDs: c.Sessions, Regulation: "GDPR"})
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.BaseURL+"/v1/erasures", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("submit: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	var acc intake.Accepted
	if err := json.Unmarshal(b, &acc); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	s.receipts.sentAt(acc.RequestID, start)
	return nil
}

// take returns the next n seeded customers.
func (s *system) take(n int) []Customer {
	out := make([]Customer, n)
	for i := range out {
		out[i] = NewCustomer(s.tenant, "sub", s.next)
		s.next++
	}
	return out
}

// phase is what a fixed-rate phase measured: the latencies from submission to receipt,
// each store's erasure durations, how many requests were submitted and how many receipts
// arrived, and the process's CPU time from the first submission to the last receipt.
type phase struct {
	latency    Durations
	stores     map[string]Durations
	sent, done int
	cpu        time.Duration
	batches    map[string]float64 // mean subjects per batch, by "store/op"
}

// fixedRate submits rate requests per second for d, then waits up to drain for every
// receipt.
func (s *system) fixedRate(ctx context.Context, rate int, d, drain time.Duration) (phase, error) {
	s.receipts.reset()
	before := s.receipts.count()
	cs := s.take(int(float64(rate) * d.Seconds()))
	interval := time.Second / time.Duration(rate)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	cpu, bt := processCPU(), batches(s.Metrics.Registry)
	start := time.Now()
	for i, c := range cs {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		wg.Go(func() {
			if err := s.submit(ctx, c); err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return phase{}, err
	}
	s.receipts.waitFor(before+len(cs), drain)
	cpu = processCPU() - cpu
	lat, stores := s.receipts.reset()
	return phase{latency: lat, stores: stores, sent: len(cs), done: s.receipts.count() - before, cpu: cpu,
		batches: batches(s.Metrics.Registry).since(bt)}, nil
}

// throughput submits n requests as fast as 32 clients can and returns receipts per second
// from the first submission to the last receipt (or to the drain deadline), the receipts
// and the process's CPU time over that span.
func (s *system) throughput(ctx context.Context, n int, drain time.Duration) (float64, int, time.Duration, error) {
	before := s.receipts.count()
	cs := s.take(n)
	work := make(chan Customer)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	cpu := processCPU()
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			for c := range work {
				if err := s.submit(ctx, c); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	for _, c := range cs {
		work <- c
	}
	close(work)
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return 0, 0, 0, err
	}
	s.receipts.waitFor(before+n, drain)
	done := s.receipts.count() - before
	rate, cpu := float64(done)/time.Since(start).Seconds(), processCPU()-cpu
	s.receipts.reset()
	return rate, done, cpu, nil
}
