package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Config sizes a run. Default is the full run; Quick a smoke run of about a minute.
type Config struct {
	Small, Large Size
	Subjects     int           // subjects erased per store, size and approach
	Rate         int           // end-to-end requests per second
	LowRate      int           // a second fixed rate the system sustains, for unsaturated latency
	Duration     time.Duration // of the fixed-rate phase
	Drain        time.Duration // longest wait for outstanding receipts after a phase
	Throughput   int           // requests per throughput phase
	InFlight     int           // requests published for the memory phase
	Log          io.Writer     // progress; nil for none
	// E2E is the corpus of the end-to-end system (the stores are erased per request, so
	// its size bounds the rate the system can sustain).
	E2E Size
	// Burst is how many erasures of one tenant the burst phase submits at once, their rows
	// in one dataset object of Large.DatasetRows other rows; BurstDrain is the longest
	// wait for their receipts.
	Burst      int
	BurstDrain time.Duration
	// SkipStores, SkipSemantic, SkipSystem and SkipBurst leave out the per-store, the
	// semantic read-back, the end-to-end or the burst phases.
	SkipStores, SkipSemantic, SkipSystem, SkipBurst bool
	// Brokers are the brokers the end-to-end phases run on, each naming its figures
	// (BrokerKfake, BrokerKafka); the memory and burst phases run on the first.
	Brokers []string
	// CPUProfile, when set, starts a CPU profile around the end-to-end phases and returns
	// the function that stops it.
	CPUProfile func() (stop func(), err error)
}

// Default is the full benchmark: 10k and 1M Redis keys and Qdrant points, 1k and 200k
// dataset rows.
func Default() Config {
	return Config{
		Small:    Size{Name: "small", RedisKeys: 10_000, QdrantPoints: 10_000, DatasetRows: 1_000},
		Large:    Size{Name: "large", RedisKeys: 1_000_000, QdrantPoints: 1_000_000, DatasetRows: 200_000},
		Subjects: 9, Rate: 200, LowRate: 10, Duration: 10 * time.Second, Drain: 150 * time.Second,
		Throughput: 4000, InFlight: 100_000, Burst: 1000, BurstDrain: 10 * time.Minute,
		E2E:     Size{Name: "e2e", RedisKeys: 10_000, QdrantPoints: 10_000, DatasetRows: 1_000},
		Brokers: []string{BrokerKfake, BrokerKafka},
	}
}

// Quick is a smoke run with tiny sizes.
func Quick() Config {
	return Config{
		Small:    Size{Name: "small", RedisKeys: 1_000, QdrantPoints: 1_000, DatasetRows: 100},
		Large:    Size{Name: "large", RedisKeys: 10_000, QdrantPoints: 10_000, DatasetRows: 2_000},
		Subjects: 3, Rate: 50, LowRate: 10, Duration: 2 * time.Second, Drain: 30 * time.Second,
		Throughput: 100, InFlight: 2_000, Burst: 100, BurstDrain: time.Minute,
		E2E:     Size{Name: "e2e", RedisKeys: 1_000, QdrantPoints: 1_000, DatasetRows: 100},
		Brokers: []string{BrokerKfake, BrokerKafka},
	}
}

// Run measures everything cfg asks for and returns the figures. It fails when
// redis-server is not installed: the Redis figures are meaningless on miniredis.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errors.New("redis-server is not on PATH (Debian package redis-server)")
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	key, err := subject.NewKey("bench", secret)
	if err != nil {
		return nil, err
	}
	res := &Results{}
	if !cfg.SkipStores {
		if err := runStores(ctx, cfg, key, res, logf); err != nil {
			return nil, err
		}
	}
	if !cfg.SkipSemantic {
		if err := runSemantic(ctx, cfg, res, logf); err != nil {
			return nil, err
		}
	}
	if cfg.SkipSystem && cfg.SkipBurst {
		return res, nil
	}
	if cfg.CPUProfile != nil {
		stop, err := cfg.CPUProfile()
		if err != nil {
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		if stop != nil {
			defer stop()
		}
	}
	if !cfg.SkipSystem {
		for _, b := range cfg.Brokers {
			if err := runSystem(ctx, cfg, key, b, res, logf); err != nil {
				return nil, err
			}
		}
		if err := runMemory(ctx, cfg, key, res, logf); err != nil {
			return nil, err
		}
	}
	if !cfg.SkipBurst {
		if err := runBurst(ctx, cfg, key, res, logf); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// runStores measures per-store erasure against the baseline at both sizes.
func runStores(ctx context.Context, cfg Config, key subject.Key, res *Results, logf func(string, ...any)) error {
	dir, err := os.MkdirTemp("", "lethe-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := embedded.StartStack(ctx, dir)
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	defer st.Close()
	b := &storeBench{st: st, inv: inventory.Reference(), key: key, log: logf}
	logf("per-store erasure, %d subjects per store, size and approach", cfg.Subjects)
	bySize, err := b.measureSizes(ctx, []Size{cfg.Small, cfg.Large}, cfg.Subjects)
	if err != nil {
		return err
	}
	small, large := bySize[cfg.Small.Name], bySize[cfg.Large.Name]
	sizeOf := map[string]func(Size) int{
		storeQdrant:  func(s Size) int { return s.QdrantPoints },
		storeRedis:   func(s Size) int { return s.RedisKeys },
		storeDataset: func(s Size) int { return s.DatasetRows },
	}
	for _, name := range []string{storeQdrant, storeRedis, storeDataset} {
		for _, sz := range []struct {
			s Size
			t *storeTimes
		}{{cfg.Small, small[name]}, {cfg.Large, large[name]}} {
			prefix := fmt.Sprintf("%s/%s", name, sz.s.Name)
			res.AddVs(prefix+"/erase_verify_p50", sz.t.lethe.Median(), sz.t.baseline.Median(), "ms")
			res.AddVs(prefix+"/erase_verify_p95", sz.t.lethe.Quantile(0.95), sz.t.baseline.Quantile(0.95), "ms")
			res.List[len(res.List)-2].Note = fmt.Sprintf("%d unrelated items in the corpus", sizeOf[name](sz.s))
		}
		extra := map[string]string{storeQdrant: "baseline_with_payload_index", storeRedis: "with_scan_fallback"}[name]
		for _, sz := range []struct {
			s Size
			t *storeTimes
		}{{cfg.Small, small[name]}, {cfg.Large, large[name]}} {
			if extra == "" {
				break
			}
			if name == storeQdrant {
				// the seeds' pipeline on an indexed collection, against Lethe
				res.AddVs(fmt.Sprintf("%s/%s/%s_p50", name, sz.s.Name, extra), sz.t.lethe.Median(), sz.t.extra.Median(), "ms")
			} else {
				// the adapter with its SCAN fallback for unindexed keys, against KEYS + DEL
				res.AddVs(fmt.Sprintf("%s/%s/%s_p50", name, sz.s.Name, extra), sz.t.extra.Median(), sz.t.baseline.Median(), "ms")
			}
		}
		res.AddRatio(name+"/lethe_large_over_small_p50", large[name].lethe.Median(), small[name].lethe.Median(),
			fmt.Sprintf("corpus grew %dx", sizeOf[name](cfg.Large)/max(sizeOf[name](cfg.Small), 1)))
		res.AddRatio(name+"/baseline_large_over_small_p50", large[name].baseline.Median(), small[name].baseline.Median(), "")
	}
	return nil
}

// runSystem measures the whole system: latency at a fixed rate and throughput with one
// consumer instance per deleter, throughput with three, and memory with many requests in
// flight.
func runSystem(ctx context.Context, cfg Config, key subject.Key, brokerName string, res *Results, logf func(string, ...any)) error {
	targets := int(float64(cfg.Rate+cfg.LowRate) * cfg.Duration.Seconds())
	logf("end to end on %s: %d and %d req/s for %s each, then %d requests as fast as possible", brokerName, cfg.LowRate, cfg.Rate, cfg.Duration, cfg.Throughput)
	sys, err := startSystem(ctx, key, brokerName, 1, cfg.E2E, targets, logf)
	if err != nil {
		return err
	}
	for _, ph := range []struct {
		name string
		rate int
	}{{"e2e_low_rate", cfg.LowRate}, {"e2e", cfg.Rate}} {
		got, err := sys.fixedRate(ctx, ph.rate, cfg.Duration, cfg.Drain)
		if err != nil {
			sys.stop()
			return err
		}
		lat := got.latency
		note := fmt.Sprintf("%d req/s for %s: %d submitted, %d receipts", ph.rate, cfg.Duration, got.sent, got.done)
		res.Add(brokerName+"/"+ph.name+"/latency_p50", lat.Quantile(0.5), "ms", note)
		res.Add(brokerName+"/"+ph.name+"/latency_p95", lat.Quantile(0.95), "ms", "")
		res.Add(brokerName+"/"+ph.name+"/latency_p99", lat.Quantile(0.99), "ms", "")
		res.Add(brokerName+"/"+ph.name+"/receipts_of_submitted", float64(got.done)/float64(max(got.sent, 1)), "fraction", "")
		res.Add(brokerName+"/"+ph.name+"/cpu_ms_per_erasure", cpuPerErasure(got.cpu, got.done), "ms", cpuNote[brokerName])
		logf("  %d req/s: p50 %.1f ms p95 %.1f ms p99 %.1f ms (%d/%d receipts), %.2f ms CPU per erasure", ph.rate, lat.Quantile(0.5), lat.Quantile(0.95), lat.Quantile(0.99), got.done, got.sent, cpuPerErasure(got.cpu, got.done))
		// where the time goes: each store's report, from its start to its finish
		for _, name := range slices.Sorted(maps.Keys(got.stores)) {
			d := got.stores[name]
			res.Add(brokerName+"/"+ph.name+"/store_"+name+"_p50", d.Quantile(0.5), "ms", fmt.Sprintf("%d reports, from the report's start to its finish", len(d)))
			res.Add(brokerName+"/"+ph.name+"/store_"+name+"_p99", d.Quantile(0.99), "ms", "")
			logf("    store %s: p50 %.1f ms p99 %.1f ms (%d reports)", name, d.Quantile(0.5), d.Quantile(0.99), len(d))
		}
		for _, k := range slices.Sorted(maps.Keys(got.batches)) {
			res.Add(brokerName+"/"+ph.name+"/batch_mean_"+strings.ReplaceAll(k, "/", "_"), got.batches[k], "subjects", "")
		}
		logf("    mean subjects per batch: %s", formatBatches(got.batches))
	}
	bad := sys.receipts.badCount()
	sys.stop()
	if bad > 0 {
		return fmt.Errorf("%d receipts were not COMPLETE", bad)
	}
	tput := map[int]float64{}
	for _, instances := range []int{1, 3} {
		s, err := startSystem(ctx, key, brokerName, instances, cfg.E2E, cfg.Throughput, logf)
		if err != nil {
			return err
		}
		bt := batches(s.Metrics.Registry)
		t, done, cpu, err := s.throughput(ctx, cfg.Throughput, cfg.Drain)
		means := batches(s.Metrics.Registry).since(bt)
		bad := s.receipts.badCount()
		s.stop()
		if err != nil {
			return err
		}
		if bad > 0 {
			return fmt.Errorf("%d receipts were not COMPLETE", bad)
		}
		tput[instances] = t
		res.Add(fmt.Sprintf("%s/throughput/instances_%d", brokerName, instances), t, "erasures/s", fmt.Sprintf("%d of %d receipts", done, cfg.Throughput))
		res.Add(fmt.Sprintf("%s/throughput/instances_%d_cpu_ms_per_erasure", brokerName, instances), cpuPerErasure(cpu, done), "ms", "")
		logf("  throughput with %d instance(s) per deleter: %.1f erasures/s (%d/%d receipts), %.2f ms CPU per erasure", instances, t, done, cfg.Throughput, cpuPerErasure(cpu, done))
		logf("    mean subjects per batch: %s", formatBatches(means))
	}
	res.AddRatio(brokerName+"/throughput/instances_3_over_1", tput[3], tput[1], "")
	return nil
}

// cpuNote says what the CPU figures of each broker's run count.
var cpuNote = map[string]string{
	BrokerKfake: "CPU time of the process (every service and stand-in but redis-server) from the first submission to the last receipt, per receipt",
	BrokerKafka: "CPU time of the process (every service and the Qdrant emulator; not Kafka, moto or redis-server) from the first submission to the last receipt, per receipt",
}

// runMemory measures the heap of requests in flight, on the first of cfg.Brokers.
func runMemory(ctx context.Context, cfg Config, key subject.Key, res *Results, logf func(string, ...any)) error {
	logf("memory: publishing %d requests straight to erasure.requested", cfg.InFlight)
	sysm, err := startSystem(ctx, key, cfg.Brokers[0], 1, cfg.E2E, 0, logf)
	if err != nil {
		return err
	}
	base, peak, err := sysm.inFlight(ctx, cfg.InFlight, 2*time.Second)
	sysm.stop()
	if err != nil {
		return err
	}
	const mib = 1 << 20
	res.Add("memory/in_flight_peak", float64(peak.InFlight), "requests", fmt.Sprintf("target %d", cfg.InFlight))
	res.Add("memory/heap_inuse_idle", float64(base.HeapInUse)/mib, "MiB", "")
	res.Add("memory/heap_inuse_at_peak", float64(peak.HeapInUse)/mib, "MiB", "")
	res.Add("memory/rss_idle", float64(base.RSS)/mib, "MiB", "")
	res.Add("memory/rss_at_peak", float64(peak.RSS)/mib, "MiB", "")
	if peak.InFlight > 0 {
		res.Add("memory/heap_per_in_flight_request", float64(peak.HeapInUse-min(base.HeapInUse, peak.HeapInUse))/float64(peak.InFlight), "bytes", "")
	}
	logf("  peak %d in flight: heap %.0f MiB (idle %.0f), RSS %.0f MiB (idle %.0f)", peak.InFlight, float64(peak.HeapInUse)/mib, float64(base.HeapInUse)/mib, float64(peak.RSS)/mib, float64(base.RSS)/mib)
	return nil
}
