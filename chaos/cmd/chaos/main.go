// Command chaos runs Lethe's fault-injection harness (package chaos): the six services as
// separate processes on real components, n erasure requests submitted over HTTP while
// services and the broker are SIGKILLed and restarted, then every guarantee checked. It
// prints the figures and exits 1 when a guarantee broke.
//
//	go run ./cmd/chaos -n 5000 -kills 60
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lethe-erasure/lethe/chaos"
)

func main() { os.Exit(run()) }

func run() int {
	defer chaos.RemoveBuilds()
	var cfg chaos.Config
	var targets string
	flag.IntVar(&cfg.N, "n", 5000, "erasure requests")
	flag.IntVar(&cfg.PerTenant, "per-tenant", 8, "erased subjects per tenant")
	flag.IntVar(&cfg.Kills, "kills", 40, "SIGKILLs (negative: none)")
	flag.StringVar(&targets, "targets", "", "comma-separated kill targets: service names and kafka (default all)")
	flag.DurationVar(&cfg.Gap, "gap", 1500*time.Millisecond, "mean time between kills")
	flag.DurationVar(&cfg.MaxDown, "max-down", time.Second, "longest delay before a killed process restarts")
	flag.StringVar(&cfg.Scale, "scale", "redis-deleter", "deleter to grow 1→3→1 instances during the run (empty: none)")
	flag.DurationVar(&cfg.Deadline, "deadline", 10*time.Minute, "how long to wait for receipts after the chaos")
	flag.StringVar(&cfg.S3, "s3", chaos.S3Gofakes3, "S3 server: gofakes3, or moto (its memory grows past 20 GB over 5000 requests' dataset versions)")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "random seed (0: from the clock)")
	flag.StringVar(&cfg.Dir, "dir", "", "directory for logs and broker data (default: a new temporary directory)")
	flag.Parse()
	if targets != "" {
		cfg.Targets = strings.Split(targets, ",")
	}
	cfg.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	temp := cfg.Dir == ""
	res, err := chaos.Run(ctx, cfg)
	if res != nil {
		fmt.Print(res)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		return 2
	}
	if !res.OK() {
		fmt.Println("FAIL: a delivery guarantee broke")
		return 1
	}
	if temp { // a passing run's logs and broker and store data go; -dir keeps them
		os.RemoveAll(res.Dir)
		fmt.Printf("logs and data in %s removed (the run passed; -dir keeps them)\n", res.Dir)
	}
	fmt.Println("PASS")
	return 0
}
