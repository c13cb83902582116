package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KafkaOptions configure StartKafka.
type KafkaOptions struct {
	// Nodes is the number of KRaft nodes, each broker and controller (default 1). With more
	// than one, topics are replicated to 3 nodes (or Nodes, if fewer) and
	// min.insync.replicas is 2, as in production.
	Nodes int
	// Ports are the PLAINTEXT listener ports, one per node; missing or 0: a free port.
	Ports []int
	// ArchiveClasses, when set, is where the first node's JVM writes the classes it loaded
	// as a class-data sharing archive when Stop ends it (gracefully, then). make tools
	// writes .tools/kafka/kafka.jsa so; the nodes started after it map their classes from
	// there and start in about 60 % of the time.
	ArchiveClasses string
}

// KafkaCluster is Apache Kafka (KRaft) run as processes from the jars `make tools` puts in
// .tools/kafka, on loopback ports of its own, with data in a temporary directory. Each node
// has a PLAINTEXT listener (Brokers) and a SASL_PLAINTEXT one with SCRAM (SASLBrokers) on
// which the StandardAuthorizer applies; PLAINTEXT clients are super users.
//
// A node runs in a process group of its own, is killed with SIGKILL when the process that
// started it dies (even by SIGKILL), and is stopped by Stop. Its methods are safe for
// concurrent use.
type KafkaCluster struct {
	Version  string // as the broker logged it at start, e.g. 4.4.0
	dir      string
	nodes    []*kafkaNode
	watchdog *exec.Cmd
	graceful bool // Stop waits for an orderly shutdown (ArchiveClasses)
}

type kafkaNode struct {
	id             int
	port, sasl     int
	props, logFile string
	mu             sync.Mutex
	cmd            *exec.Cmd
	exited         chan struct{}
}

// StartKafka formats and starts a cluster and returns once every node answers metadata
// requests listing all the nodes. On error nothing is left running.
func StartKafka(o KafkaOptions) (*KafkaCluster, error) {
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	home, err := kafkaHome()
	if err != nil {
		return nil, err
	}
	sweepKafkaDirs()
	dir, err := os.MkdirTemp("", fmt.Sprintf("lethe-kafka-%d-", os.Getpid()))
	if err != nil {
		return nil, err
	}
	c := &KafkaCluster{dir: dir, graceful: o.ArchiveClasses != ""}
	// The nodes die with this process (procAttr); the watchdog then removes their data.
	c.watchdog = exec.Command("sh", "-c", `while kill -0 "$1" 2>/dev/null; do sleep 1; done; sleep 1; rm -rf "$2"`,
		"watchdog", strconv.Itoa(os.Getpid()), dir)
	c.watchdog.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.watchdog.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("testenv: kafka watchdog: %w", err)
	}
	go c.watchdog.Wait()
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	ports, err := freePorts(3*o.Nodes, o.Ports)
	if err != nil {
		return nil, err
	}
	var voters []string
	for i := range o.Nodes {
		n := &kafkaNode{id: i + 1, port: ports[3*i], sasl: ports[3*i+1]}
		n.props = filepath.Join(dir, fmt.Sprintf("node-%d.properties", n.id))
		n.logFile = filepath.Join(dir, fmt.Sprintf("node-%d.log", n.id))
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", n.id, ports[3*i+2]))
		c.nodes = append(c.nodes, n)
	}
	for i, n := range c.nodes {
		props := kafkaProperties(n, ports[3*i+2], filepath.Join(dir, fmt.Sprintf("data-%d", n.id)), voters)
		if err := os.WriteFile(n.props, []byte(props), 0o600); err != nil {
			return nil, err
		}
	}
	// Every node is formatted with the same cluster id; one node alone is its own quorum.
	clusterID := "-"
	for strings.HasPrefix(clusterID, "-") { // as Kafka's own ids: an argument must not look like an option
		id := make([]byte, 16)
		rand.Read(id)
		clusterID = base64.RawURLEncoding.EncodeToString(id)
	}
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() {
			args := []string{"kafka.tools.StorageTool", "format", "--cluster-id", clusterID, "--config", n.props}
			if len(c.nodes) == 1 {
				args = append(args, "--standalone")
			}
			cmd := exec.Command(javaBin(), append(home.jvmArgs(), args...)...)
			cmd.SysProcAttr = procAttr()
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("testenv: format kafka node %d: %w\n%s", n.id, err, out)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i, n := range c.nodes {
		var extra []string
		if i == 0 && o.ArchiveClasses != "" {
			extra = []string{"-XX:ArchiveClassesAtExit=" + o.ArchiveClasses}
		}
		if err := n.start(home, extra...); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range c.nodes {
		if err := c.waitNode(ctx, n); err != nil {
			return nil, err
		}
	}
	c.Version = loggedVersion(c.nodes[0].logFile)
	ok = true
	return c, nil
}

// Brokers returns the PLAINTEXT listeners, host:port, in node order.
func (c *KafkaCluster) Brokers() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", n.port))
	}
	return out
}

// SASLBrokers returns the SASL_PLAINTEXT listeners (SCRAM-SHA-256 and -512), in node order.
func (c *KafkaCluster) SASLBrokers() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", n.sasl))
	}
	return out
}

// PID returns the process id of node i (0-based), 0 if it is not running.
func (c *KafkaCluster) PID(i int) int {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	select {
	case <-n.exited:
		return 0
	default:
		return n.cmd.Process.Pid
	}
}

// Kill sends SIGKILL to node i (0-based), as a crash would, and waits until it is gone.
func (c *KafkaCluster) Kill(i int) { c.nodes[i].stop(syscall.SIGKILL, 0) }

// Restart starts node i again on its data and ports and waits until it serves.
func (c *KafkaCluster) Restart(i int) error {
	n := c.nodes[i]
	n.stop(syscall.SIGKILL, 0)
	home, err := kafkaHome()
	if err != nil {
		return err
	}
	if err := n.start(home); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return c.waitNode(ctx, n)
}

// Stop kills every node (their data is thrown away: nothing needs an orderly shutdown) and
// removes the cluster's directory. With ArchiveClasses it stops them with SIGTERM and
// waits up to a minute for the archive to be written.
func (c *KafkaCluster) Stop() {
	sig, grace := syscall.SIGKILL, time.Duration(0)
	if c.graceful {
		sig, grace = syscall.SIGTERM, time.Minute
	}
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() { n.stop(sig, grace) })
	}
	wg.Wait()
	os.RemoveAll(c.dir)
	c.watchdog.Process.Kill()
}

// Logs returns the last lines (at most max) of node i's log: warnings, errors and the
// start.
func (c *KafkaCluster) Logs(i, max int) string {
	return tail(c.nodes[i].logFile, max)
}

// KafkaProcesses starts a cluster with StartKafka, fails t if it cannot, and stops it when
// t ends.
func KafkaProcesses(t testing.TB, o KafkaOptions) *KafkaCluster {
	t.Helper()
	c, err := StartKafka(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// start runs the node's kafka.Kafka process, with extra JVM options.
func (n *kafkaNode) start(home kafkaInstall, extra ...string) error {
	f, err := os.OpenFile(n.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	args := home.jvmArgs()
	if len(extra) > 0 { // writing an archive: none is read
		args = slices.DeleteFunc(append(extra, args...), func(a string) bool { return strings.HasPrefix(a, "-XX:SharedArchiveFile=") })
	}
	cmd := exec.Command(javaBin(), append(args, "kafka.Kafka", n.props)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = procAttr()
	exited, err := startTied(cmd)
	if err != nil {
		return fmt.Errorf("testenv: start kafka node %d: %w", n.id, err)
	}
	n.mu.Lock()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()
	return nil
}

// stop signals the node's process group and waits for it, sending SIGKILL after grace.
func (n *kafkaNode) stop(sig syscall.Signal, grace time.Duration) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	pgid := cmd.Process.Pid
	syscall.Kill(-pgid, sig)
	select {
	case <-exited:
	case <-time.After(grace):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	// Threads or children the broker left in its group go with it.
	syscall.Kill(-pgid, syscall.SIGKILL)
}

// waitNode waits until node n answers a metadata request naming every node of c.
func (c *KafkaCluster) waitNode(ctx context.Context, n *kafkaNode) error {
	addr := fmt.Sprintf("127.0.0.1:%d", n.port)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	var last error
	for {
		n.mu.Lock()
		exited := n.exited
		n.mu.Unlock()
		select {
		case <-exited:
			return fmt.Errorf("testenv: kafka node %d exited while starting:\n%s", n.id, tail(n.logFile, 30))
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		cancel()
		switch {
		case err != nil:
			last = err
		case len(resp.Brokers) < len(c.nodes) || resp.ControllerID < 0:
			last = fmt.Errorf("metadata lists %d of %d brokers, controller %d", len(resp.Brokers), len(c.nodes), resp.ControllerID)
		default:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: kafka node %d on %s is not ready: %v\n%s", n.id, addr, last, tail(n.logFile, 30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kafkaProperties is the server.properties of node n, tuned for tests on a small machine.
func kafkaProperties(n *kafkaNode, controller int, data string, voters []string) string {
	rf, minISR := min(len(voters), 3), min(len(voters), 2)
	p := []string{
		"process.roles=broker,controller",
		"node.id=" + strconv.Itoa(n.id),
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,SASL_PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.port, n.sasl, controller),
		fmt.Sprintf("advertised.listeners=PLAINTEXT://127.0.0.1:%d,SASL_PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.port, n.sasl, controller),
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=PLAINTEXT",
		"log.dirs=" + data,
		// SCRAM on the SASL listener; the authorizer refuses what no ACL allows, except to the
		// PLAINTEXT and controller listeners' ANONYMOUS principal (tests and the cluster itself).
		"sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:ANONYMOUS",
		// Topics are created on purpose, as on a production cluster.
		"auto.create.topics.enable=false",
		"num.partitions=1",
		"default.replication.factor=" + strconv.Itoa(rf),
		"min.insync.replicas=" + strconv.Itoa(minISR),
		"offsets.topic.replication.factor=" + strconv.Itoa(rf),
		"transaction.state.log.replication.factor=" + strconv.Itoa(rf),
		"transaction.state.log.min.isr=" + strconv.Itoa(minISR),
		"share.coordinator.state.topic.replication.factor=" + strconv.Itoa(rf),
		"share.coordinator.state.topic.min.isr=" + strconv.Itoa(minISR),
		// Two cores: few partitions for the internal topics, few threads.
		"offsets.topic.num.partitions=4",
		"transaction.state.log.num.partitions=4",
		"share.coordinator.state.topic.num.partitions=1",
		"num.network.threads=2",
		"num.io.threads=2",
		"background.threads=2",
		"num.recovery.threads.per.data.dir=1",
		"log.cleaner.threads=1",
		"log.cleaner.dedupe.buffer.size=8388608",
		"log.cleaner.backoff.ms=500", // a compacted topic is cleaned within a second
		// Groups: no wait for more members before the first assignment, session timeouts as
		// short as tests need (classic groups choose theirs within these bounds; KIP-848
		// groups get the broker's), KIP-848 heartbeats every half second.
		"group.initial.rebalance.delay.ms=0",
		"group.min.session.timeout.ms=500",
		"group.consumer.min.session.timeout.ms=1000",
		"group.consumer.session.timeout.ms=10000",
		"group.consumer.min.heartbeat.interval.ms=500",
		"group.consumer.heartbeat.interval.ms=500",
	}
	if len(voters) > 1 {
		p = append(p, "controller.quorum.voters="+strings.Join(voters, ","))
	} else {
		p = append(p, fmt.Sprintf("controller.quorum.bootstrap.servers=127.0.0.1:%d", controller))
	}
	return strings.Join(p, "\n") + "\n"
}

// kafkaInstall is where the jars and the logging configuration are.
type kafkaInstall struct{ libs, log4j, archive string }

// jvmArgs are the JVM's options: the class-data sharing archive first (-Xshare:auto, the
// default: without the archive, or with one of other jars, the JVM loads the classes
// itself), a heap of 512 MB, the serial collector and the first JIT tier only (on two
// cores the optimising compiler's work costs more than it gains in a test run).
func (h kafkaInstall) jvmArgs() []string {
	var args []string
	if _, err := os.Stat(h.archive); err == nil {
		args = append(args, "-XX:SharedArchiveFile="+h.archive)
	}
	return append(args, "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-XX:+ExitOnOutOfMemoryError", "-XX:-UsePerfData", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile="+h.log4j, "-cp", filepath.Join(h.libs, "*"))
}

// kafkaHome finds .tools/kafka (libs and log4j2.properties) in the working directory or
// one of its parents.
func kafkaHome() (kafkaInstall, error) {
	wd, err := os.Getwd()
	if err != nil {
		return kafkaInstall{}, err
	}
	for d := wd; ; d = filepath.Dir(d) {
		k := filepath.Join(d, ".tools", "kafka")
		h := kafkaInstall{libs: filepath.Join(k, "libs"), log4j: filepath.Join(k, "log4j2.properties"), archive: filepath.Join(k, "kafka.jsa")}
		jars, _ := filepath.Glob(filepath.Join(h.libs, "kafka_*.jar"))
		if _, err := os.Stat(h.log4j); err == nil && len(jars) > 0 {
			return h, nil
		}
		if filepath.Dir(d) == d {
			return kafkaInstall{}, fmt.Errorf("testenv: no Apache Kafka in .tools/kafka of %s or a parent (run make tools; it needs Java and Maven)", wd)
		}
	}
}

func javaBin() string {
	if h := os.Getenv("JAVA_HOME"); h != "" {
		return filepath.Join(h, "bin", "java")
	}
	return "java"
}

// startTied starts cmd from a goroutine locked to its OS thread until cmd exits: the
// parent-death signal of procAttr fires when the thread that started the child ends, so
// the thread must live as long as the child.
func startTied(cmd *exec.Cmd) (exited chan struct{}, err error) {
	started := make(chan error, 1)
	exited = make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(exited)
	}()
	return exited, <-started
}

// freePorts returns n loopback ports: fixed[i] where given, else ports free a moment ago
// (all distinct: the listeners stay open until every port is chosen).
func freePorts(n int, fixed []int) ([]int, error) {
	out := make([]int, n)
	var open []net.Listener
	defer func() {
		for _, l := range open {
			l.Close()
		}
	}()
	for i := range out {
		if i%3 == 0 && i/3 < len(fixed) && fixed[i/3] != 0 {
			out[i] = fixed[i/3]
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		open = append(open, l)
		out[i] = l.Addr().(*net.TCPAddr).Port
	}
	return out, nil
}

// loggedVersion returns the version in the broker's "Kafka version: X" log line.
func loggedVersion(logFile string) string {
	f, err := os.Open(logFile)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if _, v, ok := strings.Cut(sc.Text(), "Kafka version: "); ok {
			return strings.Fields(v)[0]
		}
	}
	return "unknown"
}

// tail returns the last max lines of a file.
func tail(name string, max int) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > max {
		lines = lines[len(lines)-max:]
	}
	return strings.Join(lines, "\n")
}

// sweepKafkaDirs removes the directories of clusters whose starting process is gone (its
// nodes died with it, but nothing removed their data).
func sweepKafkaDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "lethe-kafka-*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.Split(strings.TrimPrefix(filepath.Base(d), "lethe-kafka-"), "-")[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}
