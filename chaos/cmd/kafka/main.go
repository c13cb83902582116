// Command kafka runs a single-broker kfake cluster on a fixed loopback port for the
// chaos harness and local development. With -dir it persists to that directory and, when
// started again on it (after a crash or SIGKILL too), reloads what it persisted: topics,
// every record batch written to a segment, committed group offsets and group metadata,
// and idempotent producer ids. The topics Lethe uses are created on first start.
//
// It stops on SIGINT or SIGTERM (an orderly shutdown that also saves producer sequence
// windows and group member sessions).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	port := flag.Int("port", 9092, "listen port on 127.0.0.1")
	dir := flag.String("dir", "", "data directory (empty: in memory only)")
	partitions := flag.Int("partitions", 6, "partitions of the topics created on first start")
	sync := flag.Bool("sync", false, "fsync every produced batch (survives a machine crash, not only a process kill)")
	flag.Parse()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(*port), kfake.SeedTopics(int32(*partitions), service.Topics...)}
	if *dir != "" {
		opts = append(opts, kfake.DataDir(*dir))
	}
	if *sync {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kafka: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "kafka: listening on %v (data dir %q)\n", c.ListenAddrs(), *dir)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	c.Close()
}
