package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// Broker kill targets: the active KRaft controller, and the node leading the most
// partitions of Lethe's topics. With kfake both are its one broker.
const (
	TargetController = "kafka-controller"
	TargetLeader     = "kafka-leader"
)

// Brokers is the Kafka under a System: Apache Kafka nodes (with three, replication factor
// 3 and min.insync.replicas 2), or one kfake process persisting to disk, as testenv's
// LETHE_TEST_BROKER chooses.
type Brokers struct {
	Version string // "Apache Kafka 4.4.0, 3 nodes" or "kfake"
	Addrs   []string
	apache  *testenv.KafkaCluster
	kfake   *Proc
}

// startBrokers starts the Kafka of testenv.EnvBroker (Apache Kafka of nodes nodes) and
// creates Lethe's topics on it.
func startBrokers(ctx context.Context, bin, dir string, nodes int, partitions int32) (*Brokers, error) {
	if !testenv.ExternalKafka() {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p := &Proc{Name: "kafka", Path: filepath.Join(bin, "kafka"), Args: []string{"-port", strconv.Itoa(port), "-dir", filepath.Join(dir, "kafka-data"), "-partitions", strconv.Itoa(int(partitions))}, Port: port, Dir: dir}
		if err := p.Start(ctx); err != nil {
			return nil, err
		}
		return &Brokers{Version: "kfake", Addrs: []string{fmt.Sprintf("127.0.0.1:%d", port)}, kfake: p}, nil
	}
	if os.Getenv(testenv.EnvKafka) != "" {
		return nil, fmt.Errorf("chaos: kills brokers it started itself; unset %s", testenv.EnvKafka)
	}
	c, err := testenv.StartKafka(testenv.KafkaOptions{Nodes: nodes})
	if err != nil {
		return nil, err
	}
	b := &Brokers{Version: fmt.Sprintf("Apache Kafka %s, %d node(s)", c.Version, nodes), Addrs: c.Brokers(), apache: c}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs...))
	if err != nil {
		c.Stop()
		return nil, err
	}
	defer cl.Close()
	prov := broker.DefaultProvisioning(0)
	prov.Partitions, prov.ReplicationFactor, prov.MinInsyncReplicas = partitions, int16(min(nodes, 3)), min(nodes, 2)
	if _, err := broker.ApplyTopics(ctx, cl, broker.Plan(prov), false); err != nil {
		c.Stop()
		return nil, fmt.Errorf("chaos: topics: %w", err)
	}
	return b, nil
}

// Nodes returns the number of broker nodes.
func (b *Brokers) Nodes() int {
	if b.apache != nil {
		return len(b.Addrs)
	}
	return 1
}

// Kill sends SIGKILL to node i (0-based).
func (b *Brokers) Kill(i int) error {
	if b.apache != nil {
		b.apache.Kill(i)
		return nil
	}
	return b.kfake.Kill()
}

// Start starts node i again on its data and waits until it serves.
func (b *Brokers) Start(ctx context.Context, i int) error {
	if b.apache != nil {
		return b.apache.Restart(i)
	}
	return b.kfake.Start(ctx)
}

// CPU returns the CPU time the running nodes used since they last started.
func (b *Brokers) CPU() (time.Duration, error) {
	if b.apache == nil {
		return b.kfake.CPU()
	}
	var sum time.Duration
	for i := range b.Nodes() {
		pid := b.apache.PID(i)
		if pid == 0 {
			return 0, fmt.Errorf("chaos: kafka node %d is not running", i+1)
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		d, err := statCPU(string(st))
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// Close kills every node.
func (b *Brokers) Close() {
	if b.apache != nil {
		b.apache.Stop()
	} else {
		b.kfake.Kill()
	}
}

// Roles is what the cluster's metadata says of its nodes at one moment.
type Roles struct {
	Controller       int32            // node id of the active controller; -1 unknown
	ControllerEpoch  int32            // the KRaft quorum's leader epoch
	Leading          map[int32]int    // node id -> partitions of Lethe's topics it leads
	LeaderEpochs     map[string]int32 // topic/partition -> leader epoch
	PartitionsOnline int
}

// roles asks the cluster who controls and who leads. A node id is index+1 (testenv's
// numbering); kfake reports its one broker.
func roles(ctx context.Context, cl *kgo.Client) (Roles, error) {
	r := Roles{Controller: -1, Leading: map[int32]int{}, LeaderEpochs: map[string]int32{}}
	meta := kmsg.NewPtrMetadataRequest()
	for _, t := range service.Topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(t)
		meta.Topics = append(meta.Topics, mt)
	}
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return r, err
	}
	for _, t := range mresp.Topics {
		for _, p := range t.Partitions {
			if p.Leader >= 0 && p.ErrorCode == 0 {
				r.Leading[p.Leader]++
				r.PartitionsOnline++
			}
			r.LeaderEpochs[fmt.Sprintf("%s/%d", *t.Topic, p.Partition)] = p.LeaderEpoch
		}
	}
	q := kmsg.NewPtrDescribeQuorumRequest()
	qt := kmsg.NewDescribeQuorumRequestTopic()
	qt.Topic = "__cluster_metadata"
	qt.Partitions = append(qt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	q.Topics = append(q.Topics, qt)
	if qresp, err := q.RequestWith(ctx, cl); err == nil && len(qresp.Topics) == 1 && len(qresp.Topics[0].Partitions) == 1 {
		p := qresp.Topics[0].Partitions[0]
		if p.ErrorCode == 0 {
			r.Controller, r.ControllerEpoch = p.LeaderID, p.LeaderEpoch
		}
	} else if len(mresp.Brokers) == 1 { // kfake: no KRaft quorum
		r.Controller = mresp.Brokers[0].NodeID
	}
	return r, nil
}

// pick returns the node (0-based) a broker target names now: the active controller, or the
// node leading the most partitions (the lowest id of a tie).
func (b *Brokers) pick(ctx context.Context, cl *kgo.Client, target string) (int, string, error) {
	if b.apache == nil {
		return 0, "the broker", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := roles(ctx, cl)
	if err != nil {
		return 0, "", err
	}
	ids := slices.Sorted(func(yield func(int32) bool) {
		for id := range r.Leading {
			if !yield(id) {
				return
			}
		}
	})
	leader := int32(-1)
	for _, id := range ids {
		if leader < 0 || r.Leading[id] > r.Leading[leader] {
			leader = id
		}
	}
	id := leader
	if target == TargetController {
		id = r.Controller
	}
	if id < 1 || int(id) > b.Nodes() {
		return 0, "", fmt.Errorf("chaos: no node is %s (controller %d, leaders %v)", target, r.Controller, r.Leading)
	}
	what := fmt.Sprintf("node %d, leader of %d partitions", id, r.Leading[id])
	if id == r.Controller {
		what += ", active controller"
	}
	return int(id) - 1, what, nil
}

// Elections counts the leader elections the cluster's metadata shows while it runs: the
// increases of every partition's leader epoch and of the KRaft quorum's, polled every
// 250 ms by a client of its own.
type Elections struct {
	cl   *kgo.Client
	stop context.CancelFunc
	done chan struct{}

	mu                  sync.Mutex
	last                Roles
	partitions, control int
}

// WatchElections starts counting on b.
func WatchElections(b *Brokers) (*Elections, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs...), kgo.RetryTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	e := &Elections{cl: cl, stop: stop, done: make(chan struct{})}
	go e.run(ctx)
	return e, nil
}

func (e *Elections) run(ctx context.Context) {
	defer close(e.done)
	seen := false
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		r, err := roles(rctx, e.cl)
		cancel()
		if err == nil {
			e.mu.Lock()
			if seen {
				for k, ep := range r.LeaderEpochs {
					if prev, ok := e.last.LeaderEpochs[k]; ok && ep > prev {
						e.partitions += int(ep - prev)
					}
				}
				if r.ControllerEpoch > e.last.ControllerEpoch && e.last.Controller >= 0 {
					e.control += int(r.ControllerEpoch - e.last.ControllerEpoch)
				}
			}
			if r.Controller < 0 { // no answer from the quorum: keep the last epoch seen
				r.Controller, r.ControllerEpoch = e.last.Controller, e.last.ControllerEpoch
			}
			for k, ep := range e.last.LeaderEpochs { // partitions without a leader now
				if _, ok := r.LeaderEpochs[k]; !ok {
					r.LeaderEpochs[k] = ep
				}
			}
			e.last, seen = r, true
			e.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Close stops counting and returns the partition leader elections and the controller
// elections seen.
func (e *Elections) Close() (partitions, controller int) {
	e.stop()
	<-e.done
	e.cl.Close()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.partitions, e.control
}
