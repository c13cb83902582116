// Command kafkabroker starts Apache Kafka from .tools/kafka (make tools) for the test
// suites, runs a command with LETHE_TEST_KAFKA_BROKERS (and LETHE_TEST_KAFKA_SASL_BROKERS)
// naming it, stops the broker and exits with the command's status:
//
//	kafkabroker [-nodes 1] -- make test-modules
//
// Without a command it prints the variables and runs until interrupted. The broker dies
// with this process, however it ends.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lethe-erasure/lethe/pkg/testenv"
)

func main() {
	os.Exit(run())
}

func run() int {
	nodes := flag.Int("nodes", 1, "KRaft nodes, each broker and controller")
	flag.Parse()
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
				cmd.Process.Signal(s)
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
