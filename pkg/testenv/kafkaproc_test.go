package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A three-node cluster replicates a topic to every node with min.insync.replicas 2, keeps
// taking acks=all writes with one node SIGKILLed, and takes the node back on its data.
func TestKafkaThreeNodes(t *testing.T) {
	if os.Getenv(EnvBroker) == "kfake" {
		t.Skip("Apache Kafka's own processes: not run on kfake")
	}
	c := KafkaProcesses(t, KafkaOptions{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(30*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "replicated"); err != nil {
		t.Fatal(err)
	}
	// A topic created a moment ago may be unknown yet to the broker the describe reaches:
	// its configs are then empty, so the check waits for them.
	var rc kadm.ResourceConfig
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		cfg, err := adm.DescribeTopicConfigs(ctx, "replicated")
		if err != nil {
			t.Fatal(err)
		}
		if rc, _ = cfg.On("replicated", nil); len(rc.Configs) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if !hasConfig(rc, "min.insync.replicas", "2") {
		t.Errorf("min.insync.replicas of a new topic: %+v, want 2", rc.Configs)
	}
	leader := awaitISR(ctx, t, adm, 3)
	produce := func(v string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "replicated", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	produce("before")

	i := int(leader) - 1 // node ids are 1-based
	pid := c.PID(i)
	c.Kill(i)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) || c.PID(i) != 0 {
		t.Fatalf("node %d (pid %d) after Kill: %v, PID %d", leader, pid, err, c.PID(i))
	}
	produce("one node down")
	if err := c.Restart(i); err != nil {
		t.Fatal(err)
	}
	awaitISR(ctx, t, adm, 3)
	produce("back")
	if n := len(ReadTopic(t, c.Brokers(), "replicated")); n != 3 {
		t.Errorf("read %d records, want 3", n)
	}
}

// awaitISR waits until the partition of topic replicated has n in-sync replicas and
// returns its leader.
func awaitISR(ctx context.Context, t *testing.T, adm *kadm.Client, n int) int32 {
	t.Helper()
	for {
		td, err := adm.ListTopics(kadm.WithAuthorizedOps(ctx), "replicated")
		if err == nil {
			if p, ok := td["replicated"].Partitions[0]; ok && p.Err == nil && len(p.ISR) == n && p.Leader >= 0 {
				return p.Leader
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("replicated has not %d in-sync replicas: %v %+v", n, err, td["replicated"])
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func hasConfig(rc kadm.ResourceConfig, key, value string) bool {
	for _, c := range rc.Configs {
		if c.Key == key && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}

// envChild makes the test binary the process whose death TestKafkaDiesWithItsProcess
// watches.
const envChild = "LETHE_TESTENV_KAFKA_CHILD"

// A broker dies with the test process that started it, even one killed by SIGKILL, and its
// data directory is removed.
func TestKafkaDiesWithItsProcess(t *testing.T) {
	if os.Getenv(envChild) != "" {
		c, err := StartKafka(KafkaOptions{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Printf("started %d %s\n", c.PID(0), c.dir)
		time.Sleep(time.Hour)
	}
	if os.Getenv(EnvBroker) == "kfake" {
		t.Skip("Apache Kafka's own processes: not run on kfake")
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestKafkaDiesWithItsProcess$")
	child.Env = append(os.Environ(), envChild+"=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the child printed %q: %v", line, err)
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "started" {
		t.Fatalf("the child: %s", line)
	}
	pid, _ := strconv.Atoi(f[1])
	dir := f[2]
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the broker (pid %d) is not running: %v", pid, err)
	}
	child.Process.Kill()
	child.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(-pid, syscall.SIGKILL)
			t.Fatalf("the broker (pid %d) outlived its test process", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			os.RemoveAll(dir)
			t.Fatalf("%s outlived the test process", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
