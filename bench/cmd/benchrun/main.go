// Command benchrun measures Lethe's erasure cost against the naive pipeline on the
// embedded stack and writes every figure to a JSON file (see package bench).
//
//	benchrun -out ../.bench/results.json          the full run (about 3 minutes on 2 cores)
//	benchrun -quick -out /tmp/results.json        a smoke run with tiny sizes
//	benchrun -burst-only -out /tmp/burst.json      the burst phase alone: 1,000 erasures of
//	                                              one tenant in a 200k-row dataset object
//
// Sizes can be overridden one by one; -cpuprofile profiles the end-to-end phases only.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/bench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "smoke run with tiny sizes (about a minute)")
	out := fs.String("out", ".bench/results.json", "results file")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the end-to-end phases to this file")
	memprofile := fs.String("memprofile", "", "write an allocation profile of the whole run to this file when it ends")
	storesOnly := fs.Bool("stores-only", false, "measure the per-store figures only")
	systemOnly := fs.Bool("system-only", false, "measure the end-to-end figures only")
	semanticOnly := fs.Bool("semantic-only", false, "measure the semantic read-back figures only")
	burstOnly := fs.Bool("burst-only", false, "measure the burst figures only")
	noBurst := fs.Bool("no-burst", false, "leave the burst phase out (with -system-only: the end-to-end phases alone)")
	burst := fs.Int("burst", 0, "erasures of one tenant submitted at once in the burst phase (default 1000, quick 100)")
	cfg := bench.Default()
	fs.IntVar(&cfg.Large.RedisKeys, "redis-large", cfg.Large.RedisKeys, "unrelated Redis keys in the large corpus")
	fs.IntVar(&cfg.Large.QdrantPoints, "qdrant-large", cfg.Large.QdrantPoints, "unrelated Qdrant points in the large corpus")
	fs.IntVar(&cfg.Large.DatasetRows, "dataset-large", cfg.Large.DatasetRows, "unrelated dataset rows in the large corpus")
	fs.IntVar(&cfg.Subjects, "subjects", cfg.Subjects, "subjects erased per store, size and approach")
	fs.IntVar(&cfg.Rate, "rate", cfg.Rate, "end-to-end requests per second")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of the fixed-rate phase")
	fs.IntVar(&cfg.Throughput, "throughput", cfg.Throughput, "requests per throughput phase")
	fs.IntVar(&cfg.InFlight, "inflight", cfg.InFlight, "requests published for the memory phase")
	brokers := fs.String("brokers", strings.Join(cfg.Brokers, ","), "brokers of the end-to-end phases, comma-separated: kfake (in process), kafka (Apache Kafka and moto's S3)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *quick {
		cfg = bench.Quick()
	}
	cfg.Brokers = strings.Split(*brokers, ",")
	if *burst > 0 {
		cfg.Burst = *burst
	}
	cfg.Log = stderr
	only := *systemOnly || *storesOnly || *semanticOnly || *burstOnly
	cfg.SkipStores = only && !*storesOnly
	cfg.SkipSemantic = only && !*semanticOnly
	cfg.SkipSystem = only && !*systemOnly
	// the burst is an end-to-end phase: -system-only keeps it
	cfg.SkipBurst = *noBurst || only && !*systemOnly && !*burstOnly
	cfg.CPUProfile = func() (func(), error) { return nil, nil }
	if *cpuprofile != "" {
		cfg.CPUProfile = func() (func(), error) {
			f, err := os.Create(*cpuprofile)
			if err != nil {
				return nil, err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
				return nil, err
			}
			return func() { pprof.StopCPUProfile(); f.Close() }, nil
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "benchrun: %v\n", err)
		return 1
	}
	if *memprofile != "" {
		if err := writeHeapProfile(*memprofile); err != nil {
			fmt.Fprintf(stderr, "benchrun: %v\n", err)
			return 1
		}
	}
	res.PrintTable(stdout)
	if err := res.WriteJSON(*out); err != nil {
		fmt.Fprintf(stderr, "benchrun: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "wrote %s in %s\n", *out, time.Since(start).Round(time.Second))
	return 0
}

// writeHeapProfile writes the allocations of the run so far (pprof's alloc_space and
// alloc_objects samples) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
