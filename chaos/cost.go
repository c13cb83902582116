package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"
)

// CostConfig configures Cost. Zero values take the defaults.
type CostConfig struct {
	Low     int // erasures submitted one at a time, each after the last one's receipt; default 30
	Backlog int // erasures submitted at once; default 400
	// Baseline is a git revision whose six services are measured the same way in the same
	// run, before this tree's, on stand-ins built from it; "" measures this tree alone.
	Baseline string
	// Profiles, when set, is a directory for a CPU profile of each service over the first
	// ProfileSeconds (default 10) of the backlog phase once the services face it (the
	// intake's: after the submissions): <revision or "current">-<service>.pprof.
	Profiles       string
	ProfileSeconds int
	ByOperation    bool      // count calls by backend and operation (backend:op), not by backend alone
	Dir            string    // logs and broker data; default a new temporary directory
	Log            io.Writer // progress; default none
}

func (c *CostConfig) defaults() {
	if c.Low <= 0 {
		c.Low = 30
	}
	if c.Backlog <= 0 {
		c.Backlog = 400
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.ProfileSeconds <= 0 {
		c.ProfileSeconds = 10
	}
}

// CostPhases are the phases of a cost run, in order.
var CostPhases = []string{"low_rate", "backlog"}

// ServiceCost is what one service spent per erasure in a phase, all its instances
// together.
type ServiceCost struct {
	CPUms  float64 // CPU milliseconds, from the process's own accounting
	Allocs float64 // heap allocations (go_memstats_mallocs_total)
	// Calls are the calls to each backend (lethe_backend_calls_total), by backend, or
	// backend/table for DynamoDB; nil when the service does not count them (a baseline
	// built before the counter).
	Calls map[string]float64
}

// CostPhase is one measured phase.
type CostPhase struct {
	Name     string
	Erasures int
	Complete int
	Wall     time.Duration
	Services map[string]ServiceCost // by service
	StandIns map[string]float64     // CPU milliseconds per erasure of each stand-in and of Kafka
}

// CPU is the sum of the services' CPU milliseconds per erasure.
func (p CostPhase) CPU() float64 {
	var sum float64
	for _, c := range p.Services {
		sum += c.CPUms
	}
	return sum
}

// Calls is the sum over services of the calls per erasure to backend (a key of
// ServiceCost.Calls, counted by operation or not).
func (p CostPhase) Calls(backend string) float64 {
	var sum float64
	for _, c := range p.Services {
		for b, n := range c.Calls {
			if b == backend || strings.HasPrefix(b, backend+":") {
				sum += n
			}
		}
	}
	return sum
}

// counted reports whether the phase's services count their backend calls (a baseline
// built before lethe_backend_calls_total does not).
func (p CostPhase) counted() bool {
	for _, c := range p.Services {
		if c.Calls != nil {
			return true
		}
	}
	return false
}

// CostRun is the phases of one build.
type CostRun struct {
	Revision string // the baseline's revision; "" for this tree
	Kafka    string // the brokers' version
	Phases   []CostPhase
}

// CostResult is a cost run of this tree and, when asked for, of the baseline.
type CostResult struct {
	Current  CostRun
	Baseline *CostRun
}

// AuditTableCalls is the backend key of the audit table's calls in ServiceCost.Calls.
const AuditTableCalls = "dynamodb/" + auditTable

// Cost measures what Lethe's services spend per erasure on the separate-process topology:
// the six services as processes, Apache Kafka (one node) unless LETHE_TEST_BROKER=kfake,
// moto's S3, dynalite, redis-server and the Qdrant emulator, each store behind a proxy
// adding DefaultLatency. A low-rate phase submits erasures one at a time; a backlog phase
// submits cfg.Backlog at once. Each service's CPU time, allocations and backend calls are
// read before and after each phase; the stand-ins' CPU is reported apart. With
// cfg.Baseline, the same phases run first on the services of that revision.
func Cost(ctx context.Context, cfg CostConfig) (*CostResult, error) {
	cfg.defaults()
	root, err := prepare(&cfg.Dir, "lethe-cost-")
	if err != nil {
		return nil, err
	}
	logf := timestamped(cfg.Log)
	res := &CostResult{}
	if cfg.Baseline != "" {
		broot, err := checkout(ctx, root, cfg.Baseline, filepath.Join(cfg.Dir, "baseline-src"))
		if err != nil {
			return nil, err
		}
		logf("baseline %s checked out", cfg.Baseline)
		run, err := costRun(ctx, broot, filepath.Join(cfg.Dir, "baseline"), cfg.Baseline, cfg, logf)
		if err != nil {
			return nil, fmt.Errorf("baseline %s: %w", cfg.Baseline, err)
		}
		run.Revision = cfg.Baseline
		res.Baseline = run
	}
	run, err := costRun(ctx, root, filepath.Join(cfg.Dir, "current"), "current", cfg, logf)
	if err != nil {
		return res, err
	}
	res.Current = *run
	return res, nil
}

// checkout writes the tree of revision rev of the repository at root to dir, with root's
// .tools beside it.
func checkout(ctx context.Context, root, rev, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, rev, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("chaos: check out %s: %w\n%s", rev, err, out)
	}
	if err := os.Symlink(filepath.Join(root, ".tools"), filepath.Join(dir, ".tools")); err != nil {
		return "", err
	}
	return dir, nil
}

func costRun(ctx context.Context, root, dir, label string, cfg CostConfig, logf func(string, ...any)) (*CostRun, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Sweeps an hour and more after each receipt: scheduled (and so counted) like the
	// default's, but none runs within the run.
	sys, err := start(ctx, root, dir, 1, 12, S3Moto, []string{"LETHE_SWEEPS=1h,24h,7d", "LETHE_PPROF=true"})
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	const warmup = 12
	pop := NewPopulation(warmup+cfg.Low+cfg.Backlog, 8)
	if err := sys.Seed(ctx, pop); err != nil {
		return nil, err
	}
	for st, d := range DefaultLatency {
		sys.Proxies[st].SetLatency(d)
	}
	w, err := Watch(sys.Broker)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	run := &CostRun{Kafka: sys.Kafka.Version}
	subs := interleave(pop.Erased())
	logf("%s: system up on %s, %d subjects seeded", root, sys.Kafka.Version, len(pop.Subjects))
	if _, err := sys.burst(ctx, w, subs[:warmup], 5*time.Minute); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	subs = subs[warmup:]
	for _, name := range CostPhases {
		n := cfg.Low
		if name == "backlog" {
			n = cfg.Backlog
		}
		profiled := func() {}
		profile := func() {
			if cfg.Profiles != "" {
				profiled = sys.profile(ctx, cfg.Profiles, label, cfg.ProfileSeconds, logf)
			}
		}
		ph, err := sys.costPhase(ctx, w, name, subs[:n], cfg.ByOperation, profile)
		profiled()
		if err != nil {
			return nil, fmt.Errorf("%s phase: %w", name, err)
		}
		subs = subs[n:]
		run.Phases = append(run.Phases, *ph)
		logf("%s: %d erasures in %s, %d COMPLETE, Lethe %.2f ms CPU and %.2f audit-table calls per erasure",
			name, ph.Erasures, ph.Wall.Round(time.Millisecond), ph.Complete, ph.CPU(), ph.Calls(AuditTableCalls))
	}
	return run, nil
}

// backlogged are the services the backlog phase stops while the requests are submitted
// and starts again to face them all.
var backlogged = []string{"aggregator", "audit-verifier", "dataset-deleter", "qdrant-deleter", "redis-deleter"}

// costPhase erases subs and measures what each process spent: for the low-rate phase one
// at a time, each submitted after the last one's receipt; for the backlog, all of them
// submitted (16 at a time) while every service but the intake is stopped, then those
// services started again, measured from when they are up (their start-up left out).
// With the backlog, profile is called once the services face it.
func (s *System) costPhase(ctx context.Context, w *Watcher, name string, subs []*Subject, byOp bool, profile func()) (*CostPhase, error) {
	cpu0, m0 := cpuOf(s.cpuProcs()), s.scrapeServices(ctx)
	start := time.Now()
	ph := &CostPhase{Name: name, Erasures: len(subs), Services: map[string]ServiceCost{}, StandIns: map[string]float64{}}
	if name == "backlog" {
		for _, svc := range backlogged {
			for len(s.Instances(svc)) > 0 {
				if err := s.RemoveInstance(svc); err != nil {
					return nil, err
				}
			}
			delete(cpu0, svc)
			delete(m0, svc)
		}
		start = time.Now()
		ids, err := s.submitAll(ctx, subs)
		if err != nil {
			return nil, err
		}
		for _, svc := range backlogged {
			p, err := s.AddInstance(ctx, svc)
			if err != nil {
				return nil, err
			}
			// from here, as soon as it listens: what it spent on starting up is not the
			// backlog's (it has not joined its group yet)
			up, err := p.CPU()
			if err != nil {
				return nil, err
			}
			cpu0[svc] = up
			if m0[svc], err = scrape(ctx, &http.Client{Timeout: 5 * time.Second}, p.Port); err != nil {
				return nil, err
			}
		}
		profile()
		for _, id := range ids {
			status, err := w.waitReceipt(ctx, id, 10*time.Minute)
			if err != nil {
				return nil, err
			}
			if status == "COMPLETE" {
				ph.Complete++
			}
		}
	} else {
		for _, sub := range subs {
			id, _, err := s.Submit(ctx, sub, fmt.Sprintf("cost-%d", sub.Index))
			if err != nil {
				return nil, err
			}
			status, err := w.waitReceipt(ctx, id, time.Minute)
			if err != nil {
				return nil, err
			}
			if status == "COMPLETE" {
				ph.Complete++
			}
		}
	}
	ph.Wall = time.Since(start)
	cpu1, m1 := cpuOf(s.cpuProcs()), s.scrapeServices(ctx)
	per := func(d float64) float64 { return round3(d / float64(len(subs))) }
	for proc, d := range cpu1 {
		ms := per(float64((d - cpu0[proc]).Microseconds()) / 1000)
		if isService(proc) {
			c := ph.Services[proc]
			c.CPUms = ms
			ph.Services[proc] = c
		} else {
			ph.StandIns[proc] = ms
		}
	}
	for svc, after := range m1 {
		c := ph.Services[svc]
		before := m0[svc]
		c.Allocs = per(after["go_memstats_mallocs_total"] - before["go_memstats_mallocs_total"])
		for series, v := range after {
			backend, ok := backendOf(series, byOp)
			if !ok {
				continue
			}
			if c.Calls == nil {
				c.Calls = map[string]float64{}
			}
			c.Calls[backend] += v - before[series]
		}
		for b, v := range c.Calls {
			c.Calls[b] = per(v)
		}
		ph.Services[svc] = c
	}
	return ph, nil
}

// profile fetches a CPU profile of seconds from each service's first instance into dir,
// in the background; the function it returns waits for them. A service that serves none
// (a baseline built before LETHE_PPROF) is logged and left out.
func (s *System) profile(ctx context.Context, dir, label string, seconds int, logf func(string, ...any)) func() {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		logf("profiles: %v", err)
		return func() {}
	}
	var wg sync.WaitGroup
	cl := &http.Client{Timeout: time.Duration(seconds+30) * time.Second}
	for _, svc := range Services {
		ps := s.Instances(svc)
		if len(ps) == 0 {
			continue
		}
		wg.Add(1)
		go func(port int) {
			defer wg.Done()
			path := filepath.Join(dir, label+"-"+svc+".pprof")
			if err := fetchTo(ctx, cl, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", port, seconds), path); err != nil {
				logf("profile of %s: %v", svc, err)
			}
		}(ps[0].Port)
	}
	return wg.Wait
}

func fetchTo(ctx context.Context, cl *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// submitAll submits the erasure of every subject, 16 at a time, and returns the request
// ids.
func (s *System) submitAll(ctx context.Context, subs []*Subject) ([]string, error) {
	ids := make([]string, len(subs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, sub := range subs {
		g.Go(func() (err error) {
			ids[i], _, err = s.Submit(gctx, sub, fmt.Sprintf("cost-%d", sub.Index))
			return err
		})
	}
	return ids, g.Wait()
}

func isService(name string) bool {
	for _, s := range Services {
		if s == name {
			return true
		}
	}
	return false
}

// backendOf returns the key a lethe_backend_calls_total series counts under: its backend,
// and for DynamoDB backend/table; with byOp, followed by :operation.
func backendOf(series string, byOp bool) (string, bool) {
	labels, ok := strings.CutPrefix(series, "lethe_backend_calls_total{")
	if !ok {
		return "", false
	}
	get := func(name string) string {
		_, v, _ := strings.Cut(labels, name+`="`)
		v, _, _ = strings.Cut(v, `"`)
		return v
	}
	b := get("backend")
	if t := get("target"); t != "" {
		b += "/" + t
	}
	if byOp {
		b += ":" + get("op")
	}
	return b, true
}

// scrapeServices reads every service instance's metrics and sums each series by service.
// An instance that cannot be read fails nothing: its service's figures come out short,
// never made up.
func (s *System) scrapeServices(ctx context.Context) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	cl := &http.Client{Timeout: 5 * time.Second}
	for _, svc := range Services {
		for _, p := range s.Instances(svc) {
			samples, err := scrape(ctx, cl, p.Port)
			if err != nil {
				continue
			}
			if out[svc] == nil {
				out[svc] = map[string]float64{}
			}
			for k, v := range samples {
				out[svc][k] += v
			}
		}
	}
	return out
}

// scrape returns the samples of the metrics served on port, by series (name and labels).
func scrape(ctx context.Context, cl *http.Client, port int) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return nil, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// Figures lists the result as figures named cost/<service>/<phase>/<figure>, the stand-ins
// under cost/standins/, the sums under cost/lethe/, and the baseline's under
// cost/baseline/ with the ratio of this tree's CPU per erasure to the baseline's.
func (r *CostResult) Figures() []Figure {
	out := r.Current.figures("cost/", "")
	if b := r.Baseline; b != nil {
		out = append(out, b.figures("cost/baseline/", "revision "+b.Revision)...)
		for i, ph := range r.Current.Phases {
			if i < len(b.Phases) && b.Phases[i].CPU() > 0 {
				out = append(out, Figure{"cost/lethe/" + ph.Name + "/cpu_ratio_over_baseline", round3(ph.CPU() / b.Phases[i].CPU()), "x",
					fmt.Sprintf("Lethe's CPU per erasure over revision %s's, same phases in one run", b.Revision)})
			}
		}
	}
	return out
}

func (run *CostRun) figures(prefix, note string) []Figure {
	var out []Figure
	for _, ph := range run.Phases {
		out = append(out, Figure{prefix + "lethe/" + ph.Name + "/cpu_ms_per_erasure", round3(ph.CPU()), "ms",
			strings.TrimPrefix(fmt.Sprintf("%s; %d erasures, %d COMPLETE, in %s on %s; the services' CPU summed, the stand-ins' left out", note, ph.Erasures, ph.Complete, ph.Wall.Round(time.Millisecond), run.Kafka), "; ")})
		if ph.counted() {
			out = append(out, Figure{prefix + "lethe/" + ph.Name + "/audit_table_calls_per_erasure", round3(ph.Calls(AuditTableCalls)), "calls", note})
		}
		for _, svc := range sortedKeys(ph.Services) {
			c := ph.Services[svc]
			p := prefix + svc + "/" + ph.Name + "/"
			out = append(out, Figure{p + "cpu_ms_per_erasure", c.CPUms, "ms", note}, Figure{p + "allocs_per_erasure", c.Allocs, "allocs", note})
			for _, b := range sortedKeys(c.Calls) {
				out = append(out, Figure{p + "calls_per_erasure/" + b, c.Calls[b], "calls", note})
			}
		}
		for _, name := range sortedKeys(ph.StandIns) {
			out = append(out, Figure{prefix + "standins/" + name + "/" + ph.Name + "/cpu_ms_per_erasure", ph.StandIns[name], "ms", note})
		}
	}
	return out
}

// PrintTable writes, per phase, one row per service: CPU, allocations and calls per erasure
// to each backend; then the stand-ins' CPU and, with a baseline, its CPU beside this tree's.
func (r *CostResult) PrintTable(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, ph := range r.Current.Phases {
		backends := map[string]bool{}
		for _, c := range ph.Services {
			for b := range c.Calls {
				backends[b] = true
			}
		}
		fmt.Fprintf(tw, "\n%s: %d erasures, %d COMPLETE, %s (%s)\t\n", ph.Name, ph.Erasures, ph.Complete, ph.Wall.Round(time.Millisecond), r.Current.Kafka)
		fmt.Fprint(tw, "service\tCPU ms\tallocs\t")
		for _, b := range sortedKeys(backends) {
			fmt.Fprintf(tw, "%s\t", b)
		}
		fmt.Fprintln(tw)
		for _, svc := range sortedKeys(ph.Services) {
			c := ph.Services[svc]
			fmt.Fprintf(tw, "%s\t%.2f\t%.0f\t", svc, c.CPUms, c.Allocs)
			for _, b := range sortedKeys(backends) {
				fmt.Fprintf(tw, "%.2f\t", c.Calls[b])
			}
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "Lethe\t%.2f\t\t\n", ph.CPU())
		fmt.Fprint(tw, "stand-ins (CPU ms)\t")
		for _, n := range sortedKeys(ph.StandIns) {
			fmt.Fprintf(tw, "%s %.2f\t", n, ph.StandIns[n])
		}
		fmt.Fprintln(tw)
	}
	if b := r.Baseline; b != nil {
		fmt.Fprintf(tw, "\nCPU ms per erasure\tbaseline %s\tthis tree\tratio\t\n", b.Revision)
		for i, ph := range r.Current.Phases {
			if i >= len(b.Phases) {
				break
			}
			bp := b.Phases[i]
			for _, svc := range sortedKeys(ph.Services) {
				fmt.Fprintf(tw, "%s %s\t%.2f\t%.2f\t\t\n", ph.Name, svc, bp.Services[svc].CPUms, ph.Services[svc].CPUms)
			}
			ratio := 0.0
			if bp.CPU() > 0 {
				ratio = ph.CPU() / bp.CPU()
			}
			fmt.Fprintf(tw, "%s Lethe\t%.2f\t%.2f\t%.2fx\t\n", ph.Name, bp.CPU(), ph.CPU(), ratio)
		}
	}
	tw.Flush()
}

// MergeFigures replaces the cost/ figures of the JSON array of figures in path with figs,
// keeping the others; a missing file is a new one.
func MergeFigures(path string, figs []Figure) error {
	var all []json.RawMessage
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(b, &all); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	kept := all[:0]
	for _, raw := range all {
		var f struct{ Name string }
		if json.Unmarshal(raw, &f) == nil && strings.HasPrefix(f.Name, "cost/") {
			continue
		}
		kept = append(kept, raw)
	}
	for _, f := range figs {
		raw, err := json.Marshal(f)
		if err != nil {
			return err
		}
		kept = append(kept, raw)
	}
	if b, err = json.MarshalIndent(kept, "", "  "); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
