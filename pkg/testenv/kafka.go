package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
)

// Kafka returns a Kafka cluster on which topics exist, empty, with the given partitions
// and the cluster's default replication, for the rest of t.
//
// On Apache Kafka (EnvBroker unset or "kafka") the cluster is EnvKafka's, or else one
// started once per test process (StartKafka) and killed when the process exits. testenv
// takes a machine-wide lock on the cluster for the rest of t (topic and group names are
// fixed, so tests on one cluster take turns), deletes topics of these names a crashed run
// left, creates them, and when t ends deletes them and every consumer group that appeared
// meanwhile. With EnvBroker "kfake" it starts an in-process kfake cluster with the topics,
// stopped when t ends.
func Kafka(t testing.TB, partitions int32, topics ...string) broker.Config {
	t.Helper()
	if kfakeMode(t) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...), kfakeCleaner)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return broker.Config{Brokers: c.ListenAddrs()}
	}
	return externalKafka(t, kafkaBrokers(t, 1), partitions, topics)
}

// KafkaEmpty returns a Kafka cluster of at least nodes brokers on which none of the topics
// names exists, for t to create them (the code under test provisions its topics). On Apache
// Kafka it is Kafka's cluster (a cluster of nodes started once per test process when
// EnvKafka's has fewer brokers), locked and cleaned up as there, the topics deleted when t
// ends; with EnvBroker "kfake", a kfake cluster of nodes brokers.
func KafkaEmpty(t testing.TB, nodes int, names ...string) broker.Config {
	t.Helper()
	if kfakeMode(t) {
		c, err := kfake.NewCluster(kfake.NumBrokers(max(nodes, 1)), kfakeCleaner)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return broker.Config{Brokers: c.ListenAddrs()}
	}
	return externalKafka(t, kafkaBrokers(t, nodes), 0, names)
}

// KafkaSASL returns an Apache Kafka cluster, as KafkaEmpty does with the topics names
// (clients of plain are super users), and the addresses of its SASL_PLAINTEXT listeners,
// where SCRAM users (KafkaUser) authenticate and the cluster's authorizer grants them what
// their ACLs allow. The cluster is EnvKafka's when EnvKafkaSASL names its SASL listeners,
// else one started once per test process. On kfake it fails t: kfake's SASL is set up when
// its cluster is created.
func KafkaSASL(t testing.TB, names ...string) (plain broker.Config, sasl []string) {
	t.Helper()
	if kfakeMode(t) {
		t.Fatal("testenv: KafkaSASL needs Apache Kafka")
	}
	brokers, saslBrokers := os.Getenv(EnvKafka), os.Getenv(EnvKafkaSASL)
	if brokers == "" || saslBrokers == "" {
		c := processCluster(t, 1)
		brokers, saslBrokers = strings.Join(c.Brokers(), ","), strings.Join(c.SASLBrokers(), ",")
	}
	return externalKafka(t, strings.Split(brokers, ","), 0, names), strings.Split(saslBrokers, ",")
}

// kfakeCleaner has kfake compact topics (and apply retention) every half second, as
// StartKafka's brokers do.
var kfakeCleaner = kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": "500"})

// kfakeMode reports whether EnvBroker chooses kfake, failing t on a value it does not know.
func kfakeMode(t testing.TB) bool {
	t.Helper()
	switch v := os.Getenv(EnvBroker); v {
	case "", "kafka":
		return false
	case "kfake":
		return true
	default:
		t.Fatalf("testenv: %s=%q: want kafka or kfake", EnvBroker, v)
		return false
	}
}

// kafkaBrokers returns the seed brokers of an Apache Kafka cluster of at least nodes
// brokers: EnvKafka's, unless it has fewer, else one this process started.
func kafkaBrokers(t testing.TB, nodes int) []string {
	t.Helper()
	if b := os.Getenv(EnvKafka); b != "" {
		brokers := strings.Split(b, ",")
		for _, addr := range brokers {
			reachable(t, EnvKafka, addr)
		}
		if nodes <= 1 || clusterSize(t, brokers) >= nodes {
			return brokers
		}
	}
	return processCluster(t, nodes).Brokers()
}

// clusterSize returns the number of brokers the cluster's metadata lists.
func clusterSize(t testing.TB, brokers []string) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("testenv: %s: %v", EnvKafka, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("testenv: metadata of %s: %v", brokers, err)
	}
	return len(m.Brokers)
}

// clusters are the clusters this test process started, by number of nodes. They live as
// long as the process: the kernel kills their nodes when it exits (procAttr).
var clusters struct {
	sync.Mutex
	started map[int]*KafkaCluster
	failed  map[int]error
}

// processCluster returns this process's cluster of nodes nodes, starting it on first use;
// it fails t when the cluster cannot start (and every later caller with the same error).
func processCluster(t testing.TB, nodes int) *KafkaCluster {
	t.Helper()
	clusters.Lock()
	defer clusters.Unlock()
	for n, c := range clusters.started {
		if n >= nodes {
			return c
		}
	}
	if err := clusters.failed[nodes]; err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	c, err := StartKafka(KafkaOptions{Nodes: nodes})
	if err != nil {
		if clusters.failed == nil {
			clusters.failed = map[int]error{}
		}
		clusters.failed[nodes] = err
		t.Fatal(err)
	}
	if clusters.started == nil {
		clusters.started = map[int]*KafkaCluster{}
	}
	clusters.started[nodes] = c
	t.Logf("testenv: Apache Kafka %s (KRaft, %d node(s)) on %s, started in %.1fs", c.Version, nodes, strings.Join(c.Brokers(), ","), time.Since(began).Seconds())
	return c
}

// Producer returns a producing client of b with the extra options, closed when t ends.
func Producer(t testing.TB, b broker.Config, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := b.NewProducer(extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// ReadTopic returns every record of topic up to its end offsets at the time of the call
// (records acknowledged before it are all there), failing t after 5 s. A partition is read
// to its end offset, not to a count of records: a compacted topic has gaps.
func ReadTopic(t testing.TB, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := ends.Error(); err != nil {
		t.Fatal(err)
	}
	left := map[int32]int64{} // partition -> end offset, for partitions not read to the end
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var out []*kgo.Record
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records of %s; partitions not read to their end offsets: %v", len(out), topic, left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok && r.Offset < end {
				out = append(out, r)
				if r.Offset+1 >= end {
					delete(left, r.Partition)
				}
			}
		})
	}
	return out
}

// externalKafka prepares topics on the cluster of brokers for t (see Kafka).
func externalKafka(t testing.TB, brokers []string, partitions int32, topics []string) broker.Config {
	t.Helper()
	for _, b := range brokers {
		reachable(t, EnvKafka, b)
	}
	kafkaLock.acquire(t, strings.Join(brokers, ","))
	topics = slices.Compact(slices.Sorted(slices.Values(topics)))
	// kgo answers metadata from a cache for MetadataMinAge (5 s by default); the waits
	// below need fresh answers.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatalf("testenv: %s: %v", EnvKafka, err)
	}
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before, err := adm.ListGroups(ctx)
	if err != nil {
		cl.Close()
		t.Fatalf("testenv: list groups on %s: %v", brokers, err)
	}
	if err := deleteTopics(ctx, adm, topics); err != nil {
		cl.Close()
		t.Fatalf("testenv: delete leftover topics: %v", err)
	}
	if partitions > 0 {
		if err := createTopics(ctx, adm, partitions, topics); err != nil {
			cl.Close()
			t.Fatalf("testenv: create topics on %s: %v", brokers, err)
		}
	}
	t.Cleanup(func() {
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if after, err := adm.ListGroups(ctx); err != nil {
			t.Errorf("testenv: list groups: %v", err)
		} else {
			var fresh []string
			for g := range after {
				if _, ok := before[g]; !ok {
					fresh = append(fresh, g)
				}
			}
			if err := deleteGroups(ctx, adm, fresh); err != nil {
				t.Errorf("testenv: delete consumer groups: %v", err)
			}
		}
		if err := deleteTopics(ctx, adm, topics); err != nil {
			t.Errorf("testenv: delete topics: %v", err)
		}
	})
	return broker.Config{Brokers: brokers}
}

// deleteGroups deletes the consumer groups, waiting while one still has members (a member
// that was killed stays until its session times out).
func deleteGroups(ctx context.Context, adm *kadm.Client, groups []string) error {
	for len(groups) > 0 {
		res, err := adm.DeleteGroups(ctx, groups...)
		if err != nil {
			return err
		}
		groups = nil
		var errs []error
		for g, r := range res {
			switch {
			case r.Err == nil || errors.Is(r.Err, kerr.GroupIDNotFound):
			case errors.Is(r.Err, kerr.NonEmptyGroup):
				groups = append(groups, g)
			default:
				errs = append(errs, fmt.Errorf("group %s: %w", g, r.Err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if len(groups) > 0 {
			if err := pause(ctx); err != nil {
				return fmt.Errorf("groups %v still have members: %w", groups, err)
			}
		}
	}
	return nil
}

// deleteTopics deletes topics (those that do not exist are fine) and waits until the
// cluster's metadata no longer lists them.
func deleteTopics(ctx context.Context, adm *kadm.Client, topics []string) error {
	res, err := adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("topic %s: %w", r.Topic, r.Err)
		}
	}
	for {
		td, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return err
		}
		left := 0
		for _, d := range td {
			if d.Err == nil {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if err := pause(ctx); err != nil {
			return fmt.Errorf("%d topics still listed: %w", left, err)
		}
	}
}

// createTopics creates topics, retrying while a deletion of the same names is still
// under way, and waits until each has a leader for every partition.
func createTopics(ctx context.Context, adm *kadm.Client, partitions int32, topics []string) error {
	pending := topics
	for len(pending) > 0 {
		res, err := adm.CreateTopics(ctx, partitions, -1, nil, pending...)
		if err != nil {
			return err
		}
		pending = nil
		for _, r := range res {
			switch {
			case r.Err == nil:
			case errors.Is(r.Err, kerr.TopicAlreadyExists):
				pending = append(pending, r.Topic)
			default:
				return fmt.Errorf("topic %s: %w", r.Topic, r.Err)
			}
		}
		if len(pending) > 0 {
			if err := pause(ctx); err != nil {
				return fmt.Errorf("topics %v still being deleted: %w", pending, err)
			}
		}
	}
	for {
		td, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return err
		}
		ready := 0
		for _, d := range td {
			if d.Err != nil || int32(len(d.Partitions)) != partitions {
				continue
			}
			led := true
			for _, p := range d.Partitions {
				led = led && p.Err == nil && p.Leader >= 0
			}
			if led {
				ready++
			}
		}
		if ready == len(topics) {
			return awaitOffsets(ctx, adm, topics)
		}
		if err := pause(ctx); err != nil {
			return fmt.Errorf("%d of %d topics ready: %w", ready, len(topics), err)
		}
	}
}

// awaitOffsets waits until every partition of topics answers a ListOffsets request: a
// topic deleted and created again is in the metadata, with its leaders, a moment before
// its leader hosts the new partitions (UNKNOWN_TOPIC_OR_PARTITION meanwhile), and a
// consumer that meets that error retries a second later, while its fetch of the other
// partitions waits out FetchMaxWait (5 s) before the retried ones join it.
func awaitOffsets(ctx context.Context, adm *kadm.Client, topics []string) error {
	for {
		offsets, err := adm.ListStartOffsets(ctx, topics...)
		if err == nil {
			err = offsets.Error()
		}
		if err == nil {
			return nil
		}
		if err := pause(ctx); err != nil {
			return fmt.Errorf("list offsets of %v: %w", topics, err)
		}
	}
}

// pause waits 100 ms between two polls of the cluster, or returns ctx's error.
func pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(100 * time.Millisecond):
		return nil
	}
}

// KafkaUser creates the SCRAM user (SCRAM-SHA-256) with pass on the cluster of admin (a
// KafkaSASL cluster) and the ACLs of acls with the user as their principal (acls may be
// nil: no ACL), and removes both when t ends.
func KafkaUser(t testing.TB, admin broker.Config, user, pass string, acls *kadm.ACLBuilder) {
	t.Helper()
	cl := Producer(t, admin)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: pass}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("testenv: SCRAM user %s: %v", user, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: kadm.ScramSha256}}, nil)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Errorf("testenv: delete SCRAM user %s: %v", user, err)
		}
	})
	if acls == nil {
		return
	}
	acls = acls.Allow("User:" + user).AllowHosts("*").ResourcePatternType(kadm.ACLPatternLiteral)
	created, err := adm.CreateACLs(ctx, acls)
	if err == nil {
		for _, c := range created {
			err = errors.Join(err, c.Err)
		}
	}
	if err != nil {
		t.Fatalf("testenv: ACLs of %s: %v", user, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adm.DeleteACLs(ctx, acls); err != nil {
			t.Errorf("testenv: delete ACLs of %s: %v", user, err)
		}
	})
}
