// Package chaos is Lethe's fault-injection harness. It runs the six services as separate
// processes on real components (a kfake broker persisting to disk, the Qdrant emulator,
// gofakes3, redis-server, dynalite), seeds data subjects across the five stores, submits
// erasure requests over HTTP while it SIGKILLs and restarts services and the broker, and
// then checks the delivery guarantee: every acknowledged request (one that got 202) ends
// in exactly one receipt or a visible failure, every receipt proves every store clean,
// the erased subjects are gone from every store, the others are intact, the audit table
// agrees with the event trail (package replay) and every tenant's receipt chain verifies.
//
// Run does a whole run; System, Proxy and Watcher are its parts, used by the outage and
// scaling tests too.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Config configures Run. Zero values take the defaults.
type Config struct {
	N         int           // erasure requests (subjects to erase); default 200
	PerTenant int           // erased subjects per tenant; default 8
	Kills     int           // SIGKILLs; default 8
	Targets   []string      // what may be killed: service names, TargetController, TargetLeader and "kafka" (a node at random); default every service and the first two
	Gap       time.Duration // mean time between kills; default 1s
	MaxDown   time.Duration // longest wait before a killed process is started again; default 1s
	Scale     string        // a deleter to grow from 1 to 3 instances and back during the run; "" none
	S3        string        // the S3 server: S3Moto (default) or S3Gofakes3
	Deadline  time.Duration // how long to wait for receipts after the last kill; default 3m
	Seed      uint64        // random seed; 0: from the clock
	Dir       string        // logs and broker data; default a new temporary directory
	Log       io.Writer     // progress; default none
}

func (c *Config) defaults() {
	if c.N <= 0 {
		c.N = 200
	}
	if c.PerTenant <= 0 {
		c.PerTenant = 8
	}
	if c.Kills < 0 {
		c.Kills = 0
	} else if c.Kills == 0 {
		c.Kills = 8
	}
	if len(c.Targets) == 0 {
		c.Targets = append([]string{TargetController, TargetLeader}, Services...)
	}
	if c.S3 == "" {
		c.S3 = S3Moto
	}
	if c.Gap <= 0 {
		c.Gap = time.Second
	}
	if c.MaxDown <= 0 {
		c.MaxDown = time.Second
	}
	if c.Deadline <= 0 {
		c.Deadline = 3 * time.Minute
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Run starts a system, runs the chaos and checks the outcome. The error is for a run that
// could not be carried out; a broken guarantee is reported in Result.Problems.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	root, err := prepare(&cfg.Dir, "lethe-chaos-")
	if err != nil {
		return nil, err
	}
	logf := timestamped(cfg.Log)
	began := time.Now()
	sys, err := start(ctx, root, cfg.Dir, 3, 6, cfg.S3, nil)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	logf("system up in %s (logs in %s)", time.Since(began).Round(time.Millisecond), cfg.Dir)
	pop := NewPopulation(cfg.N, cfg.PerTenant)
	if err := sys.Seed(ctx, pop); err != nil {
		return nil, err
	}
	before, err := sys.Footprints(ctx, pop)
	if err != nil {
		return nil, err
	}
	logf("seeded %d subjects in %d tenants", len(pop.Subjects), len(pop.Tenants))
	w, err := Watch(sys.Broker)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	elections, err := WatchElections(sys.Kafka)
	if err != nil {
		return nil, err
	}

	res := &Result{Requests: cfg.N, Kills: map[string]int{}, Seed: cfg.Seed, Dir: cfg.Dir, Broker: sys.Kafka.Version}
	rnd := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed>>1|1))
	runStart := time.Now()
	window := time.Duration(cfg.Kills+1) * cfg.Gap
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); chaosLoop(ctx, sys, cfg, rnd, res, logf) }()
	if cfg.Scale != "" {
		wg.Add(1)
		go func() { defer wg.Done(); scaleLoop(ctx, sys, cfg.Scale, window, res, logf) }()
	}
	acked := submitAll(ctx, sys, pop, window, cfg.Deadline, res, logf)
	res.Submit = time.Since(runStart)
	wg.Wait()
	logf("chaos over: %d kills; %d of %d acknowledged; waiting for receipts", res.totalKills(), res.Acknowledged, res.Requests)
	drainStart := time.Now()
	drain(ctx, sys, w, pop, acked, cfg.Deadline, res, logf)
	res.Drain = time.Since(drainStart)
	res.Wall = time.Since(runStart)
	res.LeaderElections, res.ControllerElections = elections.Close()
	if err := check(ctx, sys, pop, acked, before, res); err != nil {
		return res, err
	}
	return res, nil
}

// prepare finds the repository root and, when *dir is empty, makes a new temporary
// directory named with prefix for a run's logs and data.
func prepare(dir *string, prefix string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	if *dir == "" {
		*dir, err = os.MkdirTemp("", prefix)
	}
	return root, err
}

// timestamped returns a printf to w that starts each line with the time of day.
func timestamped(w io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) {
		fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, a...)...)
	}
}

// chaosLoop kills cfg.Kills times, cfg.Gap apart on average, and starts each killed
// process again after a random delay up to cfg.MaxDown. Targets are dealt in shuffled
// rounds, so a run with at least len(cfg.Targets) kills kills every target; a service
// target kills one of its instances at random.
func chaosLoop(ctx context.Context, sys *System, cfg Config, rnd *rand.Rand, res *Result, logf func(string, ...any)) {
	var mu sync.Mutex // rnd is not safe for concurrent use
	var deck []string // targets left in this round
	randDur := func(max time.Duration) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return time.Duration(rnd.Int64N(int64(max))) + 1
	}
	for i := 0; i < cfg.Kills; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(cfg.Gap/2 + randDur(cfg.Gap)):
		}
		mu.Lock()
		if len(deck) == 0 {
			deck = slices.Clone(cfg.Targets)
			rnd.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		target := deck[0]
		deck = deck[1:]
		if isBroker(target) {
			mu.Unlock()
			killBroker(ctx, sys, target, randDur(cfg.MaxDown), res, logf)
			continue
		}
		var p *Proc
		if ps := sys.Instances(target); len(ps) > 0 {
			p = ps[rnd.IntN(len(ps))]
		}
		mu.Unlock()
		if p == nil {
			continue
		}
		if err := p.Kill(); err != nil {
			res.problem("kill %s: %v", p.Name, err)
			continue
		}
		down := randDur(cfg.MaxDown)
		res.count(func() { res.Kills[target]++ })
		logf("SIGKILL %s, restarting in %s", p.Name, down.Round(time.Millisecond))
		time.Sleep(down)
		for try := 1; ; try++ {
			err := p.Start(ctx)
			if errors.Is(err, errRetired) {
				break // scaled down meanwhile
			}
			if err == nil {
				res.count(func() { res.Restarts++ })
				break
			}
			res.problem("restart %s (try %d): %v", p.Name, try, err)
			p.Kill()
			if try == 3 || ctx.Err() != nil {
				return
			}
		}
	}
}

func isBroker(target string) bool {
	return target == "kafka" || target == TargetController || target == TargetLeader
}

// killBroker kills the node target names (a random one for "kafka"), waits down and starts
// it again, so at most one node is down at a time: with min.insync.replicas 2 of 3, every
// write still has its quorum.
func killBroker(ctx context.Context, sys *System, target string, down time.Duration, res *Result, logf func(string, ...any)) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(sys.Kafka.Addrs...))
	if err != nil {
		res.problem("kill %s: %v", target, err)
		return
	}
	defer cl.Close()
	pick := target
	if target == "kafka" {
		pick = []string{TargetController, TargetLeader}[rand.IntN(2)]
	}
	node, what, err := sys.Kafka.pick(ctx, cl, pick)
	if err != nil {
		res.problem("kill %s: %v", target, err)
		return
	}
	if err := sys.Kafka.Kill(node); err != nil {
		res.problem("kill %s: %v", target, err)
		return
	}
	res.count(func() {
		res.Kills[target]++
		res.BrokerKills = append(res.BrokerKills, what)
	})
	logf("SIGKILL %s (%s), restarting in %s", target, what, down.Round(time.Millisecond))
	time.Sleep(down)
	began := time.Now()
	for try := 1; ; try++ {
		err := sys.Kafka.Start(ctx, node)
		if err == nil {
			res.count(func() { res.Restarts++ })
			logf("kafka node %d serves again after %s", node+1, time.Since(began).Round(time.Millisecond))
			return
		}
		res.problem("restart kafka node %d (try %d): %v", node+1, try, err)
		if try == 3 || ctx.Err() != nil {
			return
		}
	}
}

// scaleLoop grows service from its one instance to three a quarter into the window and
// back to one (SIGTERM, the orderly way) three quarters in.
func scaleLoop(ctx context.Context, sys *System, service string, window time.Duration, res *Result, logf func(string, ...any)) {
	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	if !sleep(window / 4) {
		return
	}
	for range 2 {
		if _, err := sys.AddInstance(ctx, service); err != nil {
			res.problem("scale up %s: %v", service, err)
			return
		}
	}
	res.count(func() { res.ScaleEvents = append(res.ScaleEvents, fmt.Sprintf("%s 1→3", service)) })
	logf("scaled %s to %d instances", service, len(sys.Instances(service)))
	if !sleep(window / 2) {
		return
	}
	for len(sys.Instances(service)) > 1 {
		if err := sys.RemoveInstance(service); err != nil {
			res.problem("scale down %s: %v", service, err)
			return
		}
	}
	res.count(func() { res.ScaleEvents = append(res.ScaleEvents, fmt.Sprintf("%s 3→1", service)) })
	logf("scaled %s back to 1 instance", service)
}

// submitAll submits every erasure, spread over window, from 8 goroutines, and returns the
// acknowledged request ids by subject index.
func submitAll(ctx context.Context, sys *System, pop *Population, window, deadline time.Duration, res *Result, logf func(string, ...any)) map[int]string {
	subs := pop.Erased()
	acked := map[int]string{}
	var mu sync.Mutex
	next := make(chan *Subject)
	ctx, cancel := context.WithTimeout(ctx, window+deadline)
	defer cancel()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sub := range next {
				id, tries, err := sys.Submit(ctx, sub, fmt.Sprintf("chaos-%d", sub.Index))
				mu.Lock()
				res.SubmitRetries += tries - 1
				if err != nil {
					res.Unacknowledged++
					res.problem("subject %d: %v", sub.Index, err)
				} else {
					acked[sub.Index] = id
					res.Acknowledged++
				}
				mu.Unlock()
			}
		}()
	}
	pace := window / time.Duration(len(subs)+1)
	for _, sub := range subs {
		next <- sub
		time.Sleep(pace)
	}
	close(next)
	wg.Wait()
	logf("submitted %d: %d acknowledged, %d retries of a submission", len(subs), len(acked), res.SubmitRetries)
	return acked
}

// drain waits until every acknowledged request has a published receipt, re-driving (POST
// /v1/erasures/{id}/retry) the stores of requests that report FAILED, up to 3 times each.
func drain(ctx context.Context, sys *System, w *Watcher, pop *Population, acked map[int]string, deadline time.Duration, res *Result, logf func(string, ...any)) {
	end := time.Now().Add(deadline)
	attempts := map[int]int{}
	for time.Now().Before(end) && ctx.Err() == nil {
		pending := 0
		for idx, id := range acked {
			if w.Completed(id) {
				continue
			}
			pending++
			att := max(attempts[idx], 1)
			failed := w.Failed(id, att)
			if len(failed) == 0 || att > 3 {
				continue
			}
			var stores []string
			for st, reason := range failed {
				stores = append(stores, st)
				res.count(func() {
					res.FailedReports = append(res.FailedReports, fmt.Sprintf("%s attempt %d %s: %s", id, att, st, reason))
				})
			}
			sort.Strings(stores)
			if err := sys.Retry(ctx, id, pop.Subjects[idx], stores); err != nil {
				logf("re-drive %s: %v", id, err)
				continue
			}
			attempts[idx] = att + 1
			res.count(func() { res.Redriven++ })
			logf("re-drove %s for %s", id, strings.Join(stores, ","))
		}
		if pending == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
