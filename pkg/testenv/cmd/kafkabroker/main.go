// Command kafkabroker starts Apache Kafka from .tools/kafka (make tools) for the test
// suites, runs a command with LETHE_TEST_KAFKA_BROKERS (and LETHE_TEST_KAFKA_SASL_BROKERS)
// naming it, stops the broker and exits with the command's status:
//
//	kafkabroker [-nodes 1] -- go test ./...
//
// Without a command it prints the variables and runs until interrupted. The broker dies
// with this process, however it ends. With -archive it starts a broker, has it serve
// what the tests ask of one (topics, produce, consumer groups of both protocols, configs),
// and writes the classes it loaded to a class-data sharing archive there, which later
// brokers start from (make tools).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/testenv"
)

func main() {
	os.Exit(run())
}

func run() int {
	nodes := flag.Int("nodes", 1, "KRaft nodes, each broker and controller")
	archive := flag.String("archive", "", "write a class-data sharing archive of the broker to this file, and exit")
	flag.Parse()
	if *archive != "" {
		if err := writeArchive(*archive); err != nil {
			fmt.Fprintln(os.Stderr, "kafkabroker:", err)
			return 1
		}
		return 0
	}
	// Interrupts reach the command (it shares the terminal's process group); this process
	// waits for it, then stops the broker.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	began := time.Now()
	c, err := testenv.StartKafka(testenv.KafkaOptions{Nodes: *nodes})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafkabroker:", err)
		return 1
	}
	defer c.Stop()
	brokers, sasl := strings.Join(c.Brokers(), ","), strings.Join(c.SASLBrokers(), ",")
	fmt.Printf("== Apache Kafka %s (KRaft, %d node(s)) on %s, started in %.1fs\n", c.Version, *nodes, brokers, time.Since(began).Seconds())
	if flag.NArg() == 0 {
		fmt.Printf("%s=%s\n%s=%s\n", testenv.EnvKafka, brokers, testenv.EnvKafkaSASL, sasl)
		<-sigs
		return 0
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), testenv.EnvKafka+"="+brokers, testenv.EnvKafkaSASL+"="+sasl)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "kafkabroker:", err)
		return 1
	}
	go func() {
		for s := range sigs {
			if s == syscall.SIGTERM {
				_ = cmd.Process.Signal(s) // it may have exited already
			}
		}
	}()
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	default:
		fmt.Fprintln(os.Stderr, "kafkabroker:", err)
		return 1
	}
}

// writeArchive runs a broker through the requests the tests make and has it write the
// classes it loaded to file when it stops.
func writeArchive(file string) error {
	tmp := file + ".tmp"
	os.Remove(tmp)
	c, err := testenv.StartKafka(testenv.KafkaOptions{ArchiveClasses: tmp})
	if err != nil {
		return err
	}
	err = exercise(c.Brokers())
	c.Stop()
	if err != nil {
		return err
	}
	if _, err := os.Stat(tmp); err != nil {
		return fmt.Errorf("the broker wrote no archive: %w\n%s", err, c.Logs(0, 20))
	}
	return os.Rename(tmp, file)
}

// exercise creates a compacted topic, produces to it, consumes it in a group of each
// protocol, commits, reads configs and offsets, and deletes the topic.
func exercise(brokers []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "warm-up"); err != nil {
		return err
	}
	for i := range 100 {
		r := &kgo.Record{Topic: "warm-up", Key: []byte(strconv.Itoa(i % 10)), Value: []byte("v")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return err
		}
	}
	for _, opts := range [][]kgo.Opt{nil, {kgo.ServerSideBalancer()}} {
		g, err := kgo.NewClient(append(opts, kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("warm-up"),
			kgo.ConsumeTopics("warm-up"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		if err != nil {
			return err
		}
		for n := 0; n < 100; {
			fs := g.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				g.Close()
				return err
			}
			n += len(fs.Records())
		}
		err = g.CommitUncommittedOffsets(ctx)
		g.Close()
		if err != nil {
			return err
		}
		if _, err := adm.DeleteGroup(ctx, "warm-up"); err != nil {
			return err
		}
	}
	if _, err := adm.DescribeTopicConfigs(ctx, "warm-up"); err != nil {
		return err
	}
	if _, err := adm.ListEndOffsets(ctx, "warm-up"); err != nil {
		return err
	}
	_, err = adm.DeleteTopic(ctx, "warm-up")
	return err
}
