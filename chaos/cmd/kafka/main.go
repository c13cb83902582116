// Command kafka runs a single-broker kfake cluster on a fixed loopback port for the
// chaos harness and local development. With -dir it persists to that directory and, when
// started again on it (after a crash or SIGKILL too), reloads what it persisted: topics,
// every record batch written to a segment, committed group offsets and group metadata,
// and idempotent producer ids. The topics Lethe uses are created on first start.
//
// It stops on SIGINT or SIGTERM (an orderly shutdown that also saves producer sequence
// windows and group member sessions). Group members silent past their session and
// rebalance timeouts are expired, which kfake alone misses for a member that died
// waiting in a join (see memberWatch).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

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
	w := newMemberWatch()
	c.Control(w.observe)
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		fmt.Fprintf(os.Stderr, "kafka: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go w.run(ctx, c, admin, time.Second, func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) })
	<-ctx.Done()
	admin.Close()
	c.Close()
}
