// Command cost measures what Lethe's services spend per erasure on the separate-process
// topology (package chaos, Cost): CPU milliseconds, allocations and calls to each backend
// per erasure, by service, for erasures at a low rate and for a backlog, with the
// stand-ins' CPU apart; with -baseline, a revision's services measured the same way in the
// same run. It prints the table and merges the figures (cost/...) into a results file.
//
//	go run ./cmd/cost -baseline 52a4fcf -out ../.bench/results.json
//	go run ./cmd/cost -low 10 -backlog 100
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lethe-erasure/lethe/chaos"
)

func main() { os.Exit(run()) }

func run() (code int) {
	defer chaos.RemoveBuilds()
	var cfg chaos.CostConfig
	var out string
	flag.IntVar(&cfg.Low, "low", 30, "erasures at a low rate: one at a time, each after the last one's receipt")
	flag.IntVar(&cfg.Backlog, "backlog", 400, "erasures submitted at once")
	flag.StringVar(&cfg.Baseline, "baseline", "", "a git revision whose services are measured the same way first, for the ratio")
	flag.StringVar(&cfg.Profiles, "profiles", "", "write a CPU profile of each service over the backlog's first -profile-seconds to this directory")
	flag.IntVar(&cfg.ProfileSeconds, "profile-seconds", 10, "length of each profile")
	flag.BoolVar(&cfg.ByOperation, "by-operation", false, "count calls by backend and operation (backend:op)")
	flag.StringVar(&cfg.Dir, "dir", "", "directory for logs and broker data (default: a new temporary directory)")
	flag.StringVar(&out, "out", "", "merge the figures into this JSON results file (replacing its cost/ figures)")
	flag.Parse()
	cfg.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "lethe-cost-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "cost: %v\n", err)
			return 2
		}
		cfg.Dir = dir
		defer func() {
			if code == 0 {
				os.RemoveAll(dir)
			}
		}()
	}
	res, err := chaos.Cost(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cost: %v (logs in %s)\n", err, cfg.Dir)
		return 1
	}
	res.PrintTable(os.Stdout)
	if out != "" {
		if err := chaos.MergeFigures(out, res.Figures()); err != nil {
			fmt.Fprintf(os.Stderr, "cost: %v\n", err)
			return 2
		}
	}
	for _, ph := range res.Current.Phases {
		if ph.Complete != ph.Erasures {
			fmt.Printf("FAIL: %s: %d of %d receipts COMPLETE\n", ph.Name, ph.Complete, ph.Erasures)
			return 1
		}
	}
	return 0
}
