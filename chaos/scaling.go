package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
)

// Deleters are the services that consume erasure.requested for one store kind, by kind.
var Deleters = map[string]string{
	qdrantstore.Kind:  "qdrant-deleter",
	redisstore.Kind:   "redis-deleter",
	datasetstore.Kind: "dataset-deleter",
	auditlog.Kind:     "audit-verifier",
}

// DefaultLatency is the one-way delay ScalingConfig injects in front of each store unless
// told otherwise: a managed object store, and vector, cache and key-value stores in the
// same region.
var DefaultLatency = map[string]time.Duration{
	"s3":       20 * time.Millisecond,
	"qdrant":   2 * time.Millisecond,
	"redis":    500 * time.Microsecond,
	"dynamodb": 2 * time.Millisecond,
}

// LimitedInFlight is LETHE_INFLIGHT_MAX for deleter instances held to a CPU share: at 50m,
// 256 records in hand starved an instance's group heartbeats (it was dropped from its group
// and its work cancelled), where a few records already keep its share of a core busy.
const LimitedInFlight = 64

// ScalingConfig configures Scaling. Zero values take the defaults.
type ScalingConfig struct {
	N         int   // erasures per phase; default 240
	Instances []int // instances of each scaled deleter, one phase each; default 1, 2, 4
	// Scale names the deleter services (values of Deleters) a phase runs Instances of; the
	// others run Others instances in every phase, as when a platform team scales out the
	// deleter that bounds throughput and gives the others what they need. Default: every
	// deleter.
	Scale   []string
	Others  int                      // instances of each deleter Scale leaves out; default 1
	Latency map[string]time.Duration // per store (Stores); nil: DefaultLatency; a missing store: none
	// Batchings are the LETHE_BATCH_MAX values to run every instance count with, in order;
	// "" is the default batching. Default: "" only.
	Batchings []string
	// InstanceCPU, when above zero, confines each deleter instance to that share of one
	// core (a cgroup CPU quota, as a container's CPU limit does), so that an instance is
	// bound by its own CPU, as in a deployment where each runs in a pod with a CPU limit,
	// and instances add CPU. It fails on a machine without a cgroup cpu controller. Such
	// instances run with LETHE_INFLIGHT_MAX=LimitedInFlight, as a pod with a fraction of a
	// core should (docs/performance.md, "Scaling out over processes").
	InstanceCPU float64
	// Partitions of every topic; default 12, so that 1, 2, 3, 4 and 6 instances each get
	// an equal share (with 6, four instances get 2, 2, 1 and 1: the busiest has a third
	// of the work, and four can never do more than three times what one does).
	Partitions int32
	PerTenant  int           // erased subjects per tenant; default 8
	Warmup     int           // erasures before each phase, not measured; default 12
	Deadline   time.Duration // how long a phase may take; default 5m
	Dir        string        // logs and broker data; default a new temporary directory
	Log        io.Writer     // progress; default none
	S3         string        // the S3 server: S3Moto (default) or S3Gofakes3
}

func (c *ScalingConfig) defaults() {
	if c.N <= 0 {
		c.N = 240
	}
	if len(c.Instances) == 0 {
		c.Instances = []int{1, 2, 4}
	}
	if c.Latency == nil {
		c.Latency = DefaultLatency
	}
	if len(c.Batchings) == 0 {
		c.Batchings = []string{""}
	}
	if c.S3 == "" {
		c.S3 = S3Moto
	}
	if c.Partitions <= 0 {
		c.Partitions = 12
	}
	if c.Others <= 0 {
		c.Others = 1
	}
	if c.PerTenant <= 0 {
		c.PerTenant = 8
	}
	if c.Warmup <= 0 {
		c.Warmup = 12
	}
	if c.Deadline <= 0 {
		c.Deadline = 5 * time.Minute
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Phase is one measured burst: N erasures submitted at once with Instances instances of
// every deleter.
type Phase struct {
	Batching  string // LETHE_BATCH_MAX, "" for the default
	Instances int
	Deployed  map[string]int // instances of each deleter service during the phase
	Erasures  int
	Complete  int           // receipts with status COMPLETE
	Other     int           // receipts with another status
	Wall      time.Duration // first submission to last receipt
	PerSecond float64       // receipts per second over Wall
	// SteadyPerSecond is the receipts per second between the tenth and the ninetieth
	// percentile receipt: the rate while every instance has work, without the burst's
	// start (the first batches' way through the pipeline) and its tail (the instance whose
	// partitions drew the largest share of the burst's request ids finishing alone).
	SteadyPerSecond float64
	// AckedPerSecond is how fast the intake acknowledged the burst (first submission to
	// last 202): when it is close to PerSecond, the intake bounds the phase.
	AckedPerSecond float64
	// StoreRate is each store's reports per second (first submission to its last report);
	// the lowest one is the bottleneck deleter's.
	StoreRate map[string]float64
	// CPUPerErasure is each process's CPU time in the phase divided by Erasures, in
	// milliseconds, by service (all its instances together) and component.
	CPUPerErasure map[string]float64
	// EraseBatch is the mean subjects per erase batch of each deleter service, read off
	// its instances' lethe_store_batch_subjects: how much of its work batching shared.
	EraseBatch map[string]float64
}

// Bottleneck is the store whose reports came slowest.
func (p Phase) Bottleneck() string {
	best, rate := "", 0.0
	for st, r := range p.StoreRate {
		if best == "" || r < rate || (r == rate && st < best) {
			best, rate = st, r
		}
	}
	return best
}

// ScalingResult is every phase of a Scaling run.
type ScalingResult struct {
	Latency     map[string]time.Duration
	InstanceCPU float64 // each deleter instance's CPU limit in cores; 0: none
	Partitions  int32
	Scale       []string // the scaled deleters; nil: every deleter
	Others      int      // instances of each deleter not scaled
	Phases      []Phase
}

// Scaling starts a system, injects cfg.Latency in front of the stores, and for each
// batching and instance count runs every deleter with that many instances and measures a
// burst of cfg.N erasures: receipts per second from the first submission to the last
// receipt, each store's report rate, and the CPU time each process spent per erasure. Each
// phase erases subjects of its own. An error is a phase that could not be measured, for
// example a receipt missing at the deadline.
func Scaling(ctx context.Context, cfg ScalingConfig) (*ScalingResult, error) {
	cfg.defaults()
	root, err := prepare(&cfg.Dir, "lethe-scaling-")
	if err != nil {
		return nil, err
	}
	logf := timestamped(cfg.Log)
	// No re-verification sweeps: a sweep a minute after each receipt would land in a later
	// phase and be measured as part of its work.
	sys, err := start(ctx, root, cfg.Dir, 1, cfg.Partitions, cfg.S3, []string{"LETHE_SWEEPS=off"})
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	phases := len(cfg.Instances) * len(cfg.Batchings)
	pop := NewPopulation(phases*(cfg.N+cfg.Warmup), cfg.PerTenant)
	if err := sys.Seed(ctx, pop); err != nil {
		return nil, err
	}
	logf("system up, %d subjects seeded (logs in %s)", len(pop.Subjects), cfg.Dir)
	if err := sys.checkPartitions(ctx, cfg.Partitions); err != nil {
		return nil, err
	}
	w, err := Watch(sys.Broker)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	for st, d := range cfg.Latency {
		p, ok := sys.Proxies[st]
		if !ok {
			return nil, fmt.Errorf("chaos: no store %q to delay (stores: %s)", st, strings.Join(Stores, ", "))
		}
		p.SetLatency(d)
	}
	for _, svc := range cfg.Scale {
		if !isDeleter(svc) {
			return nil, fmt.Errorf("chaos: cannot scale %q: not a deleter (%s)", svc, strings.Join(sortedDeleters(), ", "))
		}
	}
	res := &ScalingResult{Latency: cfg.Latency, InstanceCPU: cfg.InstanceCPU, Partitions: cfg.Partitions, Scale: cfg.Scale, Others: cfg.Others}
	none := func(string) int { return 0 }
	if cfg.InstanceCPU > 0 {
		l, err := newCPULimiter(cfg.InstanceCPU)
		if err != nil {
			return nil, err
		}
		sys.mu.Lock()
		sys.deleterCPU = l
		sys.mu.Unlock()
		sys.Setenv(fmt.Sprintf("LETHE_INFLIGHT_MAX=%d", LimitedInFlight))
		defer func() {
			// the instances' groups go with them, then the limiter's own (a failure leaves
			// an empty group behind, which costs nothing)
			_ = sys.scaleDeleters(context.WithoutCancel(ctx), none)
			_ = l.Close()
		}()
		if err := sys.scaleDeleters(ctx, none); err != nil { // restart them limited
			return res, err
		}
	}
	subs := pop.Erased()
	for _, batching := range cfg.Batchings {
		if batching != "" {
			sys.Setenv("LETHE_BATCH_MAX=" + batching)
			if err := sys.scaleDeleters(ctx, none); err != nil { // restart them with the new setting
				return res, err
			}
		}
		for _, n := range cfg.Instances {
			want := func(svc string) int {
				if len(cfg.Scale) == 0 || slices.Contains(cfg.Scale, svc) {
					return n
				}
				return cfg.Others
			}
			if err := sys.scaleDeleters(ctx, want); err != nil {
				return res, err
			}
			if err := sys.waitGroups(ctx, want); err != nil {
				return res, err
			}
			warm, rest := subs[:cfg.Warmup], subs[cfg.Warmup:]
			if _, err := sys.burst(ctx, w, warm, cfg.Deadline); err != nil {
				return res, fmt.Errorf("warm-up with %d instances: %w", n, err)
			}
			ph, err := sys.burst(ctx, w, rest[:cfg.N], cfg.Deadline)
			subs = rest[cfg.N:]
			if err != nil {
				return res, fmt.Errorf("phase with %d instances: %w", n, err)
			}
			ph.Batching, ph.Instances, ph.Deployed = batching, n, map[string]int{}
			for _, svc := range sortedDeleters() {
				ph.Deployed[svc] = len(sys.Instances(svc))
			}
			res.Phases = append(res.Phases, *ph)
			logf("batch max %s, %d instances: %d erasures in %s, %.1f/s, steady %.1f/s (bottleneck %s; subjects per erase batch: %s)",
				orDefault(batching), n, ph.Erasures, ph.Wall.Round(time.Millisecond), ph.PerSecond, ph.SteadyPerSecond, ph.Bottleneck(), formatMeans(ph.EraseBatch))
		}
	}
	return res, nil
}

func orDefault(batching string) string {
	if batching == "" {
		return "default"
	}
	return batching
}

// scaleDeleters starts or stops (SIGTERM) instances until every deleter has as many as
// want says.
func (s *System) scaleDeleters(ctx context.Context, want func(svc string) int) error {
	for _, svc := range sortedDeleters() {
		n := want(svc)
		for len(s.Instances(svc)) > n {
			if err := s.RemoveInstance(svc); err != nil {
				return err
			}
		}
		for len(s.Instances(svc)) < n {
			if _, err := s.AddInstance(ctx, svc); err != nil {
				return err
			}
		}
	}
	return nil
}

// isDeleter reports whether service is one of Deleters.
func isDeleter(service string) bool {
	for _, svc := range Deleters {
		if svc == service {
			return true
		}
	}
	return false
}

func sortedDeleters() []string {
	var out []string
	for _, svc := range Deleters {
		out = append(out, svc)
	}
	sort.Strings(out)
	return out
}

// checkPartitions fails unless the topic the deleters consume has n partitions: the
// share of each instance, and so what scaling can show, depends on it.
func (s *System) checkPartitions(ctx context.Context, n int32) error {
	cl, err := kgo.NewClient(s.Broker.Options()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(ctx, event.TopicRequested)
	if err != nil {
		return err
	}
	if got := len(td[event.TopicRequested].Partitions); got != int(n) {
		return fmt.Errorf("chaos: %s has %d partitions, want %d", event.TopicRequested, got, n)
	}
	return nil
}

// waitGroups waits until every deleter's consumer group is stable with as many members as
// want says.
func (s *System) waitGroups(ctx context.Context, want func(svc string) int) error {
	cl, err := kgo.NewClient(s.Broker.Options()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	members := map[string]int{} // group -> members wanted
	for _, svc := range sortedDeleters() {
		members["lethe-"+svc] = want(svc)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		described, err := adm.DescribeGroups(ctx, slices.Collect(maps.Keys(members))...)
		ready := err == nil
		for g, n := range members {
			d, ok := described[g]
			if !ok || d.Err != nil || d.State != "Stable" || len(d.Members) != n {
				ready = false
			}
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: consumer groups not stable with the wanted members after a minute: %v", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// burst submits the erasure of every subject at once (16 at a time over HTTP, tenants
// interleaved), waits for their receipts and measures the phase.
func (s *System) burst(ctx context.Context, w *Watcher, subs []*Subject, deadline time.Duration) (*Phase, error) {
	procs := s.cpuProcs()
	before, batchesBefore := cpuOf(procs), s.eraseBatches(ctx)
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	ids := map[string]bool{}
	var mu sync.Mutex
	var lastAck time.Time
	var firstErr error
	next := make(chan *Subject)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sub := range next {
				id, _, err := s.Submit(ctx, sub, fmt.Sprintf("scaling-%d", sub.Index))
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					ids[id] = true
					lastAck = time.Now()
				}
				mu.Unlock()
			}
		}()
	}
	for _, sub := range interleave(subs) {
		next <- sub
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	ph := &Phase{Erasures: len(subs), StoreRate: map[string]float64{}, CPUPerErasure: map[string]float64{}}
	var ats []time.Time
	for id := range ids {
		for {
			status, at, ok := w.Receipt(id)
			if ok {
				if status == "COMPLETE" {
					ph.Complete++
				} else {
					ph.Other++
				}
				ats = append(ats, at)
				break
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("chaos: %d of %d receipts after %s", ph.Complete+ph.Other, len(ids), deadline)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	after := cpuOf(procs)
	ph.EraseBatch = s.eraseBatches(ctx).means(batchesBefore)
	ph.Wall, ph.SteadyPerSecond = rates(start, ats)
	ph.PerSecond = float64(len(subs)) / ph.Wall.Seconds()
	ph.AckedPerSecond = float64(len(subs)) / lastAck.Sub(start).Seconds()
	for st, at := range w.LastReports(ids) {
		ph.StoreRate[st] = float64(len(subs)) / at.Sub(start).Seconds()
	}
	for name, d := range after {
		if b, ok := before[name]; ok {
			ph.CPUPerErasure[name] = float64((d - b).Microseconds()) / 1000 / float64(len(subs))
		}
	}
	return ph, nil
}

// rates returns the time from start to the last of the receipts' times ats (which it
// sorts in place) and the receipts per second between the tenth and the ninetieth
// percentile receipt (0 with fewer than ten receipts or no time between them).
func rates(start time.Time, ats []time.Time) (wall time.Duration, steady float64) {
	if len(ats) == 0 {
		return 0, 0
	}
	slices.SortFunc(ats, time.Time.Compare)
	wall = ats[len(ats)-1].Sub(start)
	if lo, hi := len(ats)/10, len(ats)*9/10; len(ats) >= 10 && ats[hi].After(ats[lo]) {
		steady = float64(hi-lo) / ats[hi].Sub(ats[lo]).Seconds()
	}
	return wall, steady
}

// interleave orders subs round-robin by tenant (one of each tenant in turn), so requests
// submitted together concern different tenants' datasets, as independent requests do.
func interleave(subs []*Subject) []*Subject {
	var tenants []string
	by := map[string][]*Subject{}
	for _, s := range subs {
		if by[s.Tenant] == nil {
			tenants = append(tenants, s.Tenant)
		}
		by[s.Tenant] = append(by[s.Tenant], s)
	}
	out := make([]*Subject, 0, len(subs))
	for len(out) < len(subs) {
		for _, t := range tenants {
			if len(by[t]) > 0 {
				out = append(out, by[t][0])
				by[t] = by[t][1:]
			}
		}
	}
	return out
}

// cpuProcs returns the running service instances and components, by what CPU time is
// reported under: the service name (instances add up) or the component's.
func (s *System) cpuProcs() map[cpuReader]string {
	out := map[cpuReader]string{s.Kafka: "kafka"}
	for name, p := range s.Stores {
		out[p] = name
	}
	for _, svc := range Services {
		for _, p := range s.Instances(svc) {
			out[p] = svc
		}
	}
	return out
}

// cpuReader is a process, or processes, whose CPU time can be read: a Proc, Brokers.
type cpuReader interface{ CPU() (time.Duration, error) }

// cpuOf sums the CPU time of procs by name; a process that cannot be read (it exited)
// leaves its name out, so the phase reports no figure rather than a wrong one.
func cpuOf(procs map[cpuReader]string) map[string]time.Duration {
	out := map[string]time.Duration{}
	bad := map[string]bool{}
	for p, name := range procs {
		d, err := p.CPU()
		if err != nil {
			bad[name] = true
		}
		out[name] += d
	}
	for name := range bad {
		delete(out, name)
	}
	return out
}

// Figure is one measured value, in the shape of the bench module's results.
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Note  string  `json:"note,omitempty"`
}

// Figures lists the result as figures: per batching, each phase's throughput, the ratio
// of the most instances to one, and each process's CPU milliseconds per erasure.
func (r *ScalingResult) Figures() []Figure {
	var out []Figure
	lat := r.latencyNote()
	root := "scaling/"
	if r.InstanceCPU > 0 {
		root += "instance_cpu=" + FormatCPU(r.InstanceCPU) + "/"
	}
	for _, b := range r.batchings() {
		prefix := root + "batch_max=" + orDefault(b)
		var one, most Phase
		for _, ph := range r.Phases {
			if ph.Batching != b {
				continue
			}
			if one.Instances == 0 || ph.Instances < one.Instances {
				one = ph
			}
			if ph.Instances > most.Instances {
				most = ph
			}
			p := fmt.Sprintf("%s/instances=%d", prefix, ph.Instances)
			out = append(out,
				Figure{p + "/erasures_per_s", round3(ph.PerSecond), "1/s", fmt.Sprintf("%d erasures in %s, %d COMPLETE; bottleneck %s; %s",
					ph.Erasures, ph.Wall.Round(time.Millisecond), ph.Complete, ph.Bottleneck(), lat)},
				Figure{p + "/steady_erasures_per_s", round3(ph.SteadyPerSecond), "1/s", "receipts per second from the tenth to the ninetieth percentile receipt"},
				Figure{p + "/intake_acks_per_s", round3(ph.AckedPerSecond), "1/s", ""})
			for _, st := range sortedKeys(ph.StoreRate) {
				out = append(out, Figure{p + "/reports_per_s/" + st, round3(ph.StoreRate[st]), "1/s", ""})
			}
			for _, name := range sortedKeys(ph.CPUPerErasure) {
				out = append(out, Figure{p + "/cpu_ms_per_erasure/" + name, round3(ph.CPUPerErasure[name]), "ms", ""})
			}
			for _, name := range sortedKeys(ph.EraseBatch) {
				out = append(out, Figure{p + "/subjects_per_erase_batch/" + name, round3(ph.EraseBatch[name]), "subjects", ""})
			}
		}
		if one.PerSecond > 0 && most.Instances > one.Instances {
			out = append(out, Figure{fmt.Sprintf("%s/ratio_%d_over_%d", prefix, most.Instances, one.Instances),
				round3(most.PerSecond / one.PerSecond), "x", "throughput with " + r.scaledNote() + " scaled out over one instance each"})
			if one.SteadyPerSecond > 0 && most.SteadyPerSecond > 0 {
				out = append(out, Figure{fmt.Sprintf("%s/steady_ratio_%d_over_%d", prefix, most.Instances, one.Instances),
					round3(most.SteadyPerSecond / one.SteadyPerSecond), "x", "steady throughput (tenth to ninetieth percentile receipt) with " + r.scaledNote() + " scaled out over one instance each"})
			}
		}
	}
	return out
}

// scaledNote names the deleters the phases scaled.
func (r *ScalingResult) scaledNote() string {
	if len(r.Scale) == 0 {
		return "every deleter"
	}
	return fmt.Sprintf("%s (the other deleters %d instance(s) each)", strings.Join(r.Scale, ", "), r.Others)
}

func (r *ScalingResult) batchings() []string {
	var out []string
	for _, ph := range r.Phases {
		if !slices.Contains(out, ph.Batching) {
			out = append(out, ph.Batching)
		}
	}
	return out
}

func (r *ScalingResult) latencyNote() string {
	var parts []string
	for _, st := range sortedKeys(r.Latency) {
		parts = append(parts, fmt.Sprintf("%s %s", st, r.Latency[st]))
	}
	note := "no latency injected"
	if len(parts) > 0 {
		note = "one-way latency " + strings.Join(parts, ", ")
	}
	if r.InstanceCPU > 0 {
		note += fmt.Sprintf("; each deleter instance limited to %s CPU and %d records in hand", FormatCPU(r.InstanceCPU), LimitedInFlight)
	}
	if r.Partitions > 0 {
		note += fmt.Sprintf("; %d partitions per topic", r.Partitions)
	}
	return note
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

// WriteJSON writes the figures as a JSON array to path, creating its directory.
func (r *ScalingResult) WriteJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r.Figures(), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// PrintTable writes one row per phase and one column per figure, then the CPU time per
// erasure of every process.
func (r *ScalingResult) PrintTable(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s; scaled: %s\n", r.latencyNote(), r.scaledNote())
	fmt.Fprintln(tw, "batch max\tinstances\terasures\tCOMPLETE\twall\terasures/s\tsteady/s\tintake acks/s\tbottleneck (reports/s)\t")
	for _, ph := range r.Phases {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%.1f\t%.1f\t%.1f\t%s (%.1f)\t\n", orDefault(ph.Batching), ph.Instances, ph.Erasures,
			ph.Complete, ph.Wall.Round(time.Millisecond), ph.PerSecond, ph.SteadyPerSecond, ph.AckedPerSecond, ph.Bottleneck(), ph.StoreRate[ph.Bottleneck()])
	}
	tw.Flush()
	names := map[string]bool{}
	for _, ph := range r.Phases {
		for n := range ph.CPUPerErasure {
			names[n] = true
		}
	}
	fmt.Fprintln(tw, "\nCPU ms per erasure")
	fmt.Fprint(tw, "batch max\tinstances\t")
	for _, n := range sortedKeys(names) {
		fmt.Fprintf(tw, "%s\t", n)
	}
	fmt.Fprintln(tw)
	for _, ph := range r.Phases {
		fmt.Fprintf(tw, "%s\t%d\t", orDefault(ph.Batching), ph.Instances)
		for _, n := range sortedKeys(names) {
			fmt.Fprintf(tw, "%.2f\t", ph.CPUPerErasure[n])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, f := range r.Figures() {
		if strings.Contains(f.Name, "/ratio_") {
			fmt.Fprintf(out, "%s: %.2fx\n", f.Name, f.Value)
		}
	}
}
