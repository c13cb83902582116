// Command scaling measures how Lethe's throughput follows the number of deleter instances
// when the stores answer with a realistic latency (package chaos, Scaling): the six
// services as separate processes, a one-way delay injected in front of each store, and for
// 1, 2 and 4 instances of every deleter (with -scale, of the named deleters only) a burst
// of erasures timed from the first submission to the last receipt, with each process's
// CPU time per erasure. It prints a table and writes the figures as JSON. With
// -instance-cpu every deleter instance is held to that share of a core (a cgroup CPU
// quota, as a pod's CPU limit), so that instances bring CPU of their own as they do on
// separate nodes, which processes sharing this machine's cores otherwise do not.
//
//	go run ./cmd/scaling -out ../.bench/scaling.json
//	go run ./cmd/scaling -batch-max ',1' -instance-cpu 50m -out ../.bench/scaling-cpu-limited.json
//	go run ./cmd/scaling -scale dataset-deleter -instances 1,4 -instance-cpu 50m
//	go run ./cmd/scaling -quick
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lethe-erasure/lethe/chaos"
)

func main() { os.Exit(run()) }

func run() (code int) {
	defer chaos.RemoveBuilds()
	var cfg chaos.ScalingConfig
	var instances, batchings, instanceCPU, out string
	var quick bool
	lat := map[string]*time.Duration{}
	flag.IntVar(&cfg.N, "n", 240, "erasures per phase")
	flag.StringVar(&instances, "instances", "1,2,4", "instances of every deleter, one phase each")
	flag.Func("scale", "deleter services to scale, comma-separated (default: every deleter; the others run -others instances)", func(v string) error {
		cfg.Scale = strings.Split(v, ",")
		return nil
	})
	flag.IntVar(&cfg.Others, "others", 1, "with -scale, instances of each deleter it leaves out")
	flag.StringVar(&batchings, "batch-max", ",1", "LETHE_BATCH_MAX values to run every phase with (empty: the default batching)")
	for _, st := range chaos.Stores {
		d := chaos.DefaultLatency[st]
		lat[st] = &d
		flag.DurationVar(lat[st], st+"-latency", d, "one-way latency injected in front of "+st)
	}
	flag.StringVar(&instanceCPU, "instance-cpu", "", "limit each deleter instance to this share of a core (50m, 0.05), as a pod's CPU limit does; needs a cgroup cpu controller")
	flag.Func("partitions", "partitions of every topic (default 12)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			return fmt.Errorf("want a whole number of at least 1")
		}
		cfg.Partitions = int32(n)
		return nil
	})
	flag.StringVar(&cfg.Dir, "dir", "", "directory for logs and broker data (default: a new temporary directory)")
	flag.StringVar(&out, "out", "", "write the figures as JSON to this file")
	flag.StringVar(&cfg.S3, "s3", chaos.S3Moto, "the S3 server: moto or gofakes3")
	flag.BoolVar(&quick, "quick", false, "a smoke run: 24 erasures per phase, 1 and 2 instances, default batching only")
	flag.Parse()
	if quick {
		cfg.N, instances, batchings = 24, "1,2", ""
	}
	for _, s := range strings.Split(instances, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "scaling: -instances %q: want whole numbers of at least 1\n", instances)
			return 2
		}
		cfg.Instances = append(cfg.Instances, n)
	}
	cfg.Batchings = strings.Split(batchings, ",")
	if instanceCPU != "" {
		v, err := chaos.ParseCPU(instanceCPU)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scaling: -instance-cpu: %v\n", err)
			return 2
		}
		cfg.InstanceCPU = v
	}
	cfg.Latency = map[string]time.Duration{}
	for st, d := range lat {
		cfg.Latency[st] = *d
	}
	cfg.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Dir == "" { // a temporary directory, removed when every phase passed
		dir, err := os.MkdirTemp("", "lethe-scaling-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "scaling: %v\n", err)
			return 2
		}
		cfg.Dir = dir
		defer func() {
			if code == 0 {
				os.RemoveAll(dir)
			}
		}()
	}
	res, err := chaos.Scaling(ctx, cfg)
	if res != nil {
		res.PrintTable(os.Stdout)
		if out != "" {
			if werr := res.WriteJSON(out); werr != nil {
				fmt.Fprintf(os.Stderr, "scaling: %v\n", werr)
				return 2
			}
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "scaling: %v\n", err)
		return 1
	}
	for _, ph := range res.Phases {
		if ph.Complete != ph.Erasures {
			fmt.Printf("FAIL: %d of %d receipts COMPLETE with %d instances\n", ph.Complete, ph.Erasures, ph.Instances)
			return 1
		}
	}
	return 0
}
