package broker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

func TestFromEnv(t *testing.T) {
	t.Setenv("LETHE_KAFKA_BROKERS", "k1:9092,k2:9092")
	t.Setenv("LETHE_KAFKA_PARTITIONS", "12")
	t.Setenv("LETHE_KAFKA_TLS", "true")
	t.Setenv("LETHE_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
	t.Setenv("LETHE_KAFKA_SASL_USERNAME", "lethe")
	t.Setenv("LETHE_KAFKA_SASL_PASSWORD", "s3cret-password")
	t.Setenv("LETHE_KAFKA_GROUP_PROTOCOL", "consumer")
	c, err := broker.FromEnv("x")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Brokers) != 2 || c.Partitions != 12 || c.TLS == nil || c.SASL == nil || c.SASL.Name() != "SCRAM-SHA-512" ||
		c.GroupProtocol != broker.GroupConsumer || len(c.GroupOptions()) != 1 {
		t.Errorf("config %+v", c)
	}
	if s := c.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, "tls") {
		t.Errorf("String() = %q", s)
	}
	for name, env := range map[string][2]string{
		"bad partitions": {"LETHE_KAFKA_PARTITIONS", "many"},
		"bad mechanism":  {"LETHE_KAFKA_SASL_MECHANISM", "GSSAPI"},
		"no password":    {"LETHE_KAFKA_SASL_PASSWORD", ""},
		"missing CA":     {"LETHE_KAFKA_TLS_CA_FILE", "/nonexistent/ca.pem"},
		"bad protocol":   {"LETHE_KAFKA_GROUP_PROTOCOL", "eager"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(env[0], env[1])
			if _, err := broker.FromEnv("x"); err == nil {
				t.Errorf("%s=%q accepted", env[0], env[1])
			}
		})
	}
}

// saslCluster returns a cluster with the topics (of one partition), on which the
// SCRAM-SHA-256 user lethe (password right-password) may do the operations ops on the
// topics named allowed and nothing else, an admin's config (a super user) and the brokers
// the user authenticates to: Apache Kafka's SASL listener and its authorizer, or a kfake
// cluster with SASL and ACLs.
func saslCluster(t *testing.T, allowed []string, ops []kadm.ACLOperation, topics ...string) (admin broker.Config, user []string) {
	t.Helper()
	if testenv.ExternalKafka() {
		admin, user = testenv.KafkaSASL(t, append(slices.Clone(allowed), topics...)...)
		testenv.KafkaUser(t, admin, "lethe", "right-password", kadm.NewACLs().Topics(allowed...).Operations(ops...))
		if len(topics) > 0 {
			res, err := kadm.NewClient(testenv.Producer(t, admin)).CreateTopics(t.Context(), 1, -1, nil, topics...)
			if err == nil {
				err = res.Error()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return admin, user
	}
	var seeded []kfake.ACL
	for _, name := range allowed {
		for _, op := range ops {
			seeded = append(seeded, kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: name,
				Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperation(op), Allow: true})
		}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(), kfake.SeedTopics(1, topics...),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin-password"), kfake.User("SCRAM-SHA-256", "lethe", "right-password", seeded...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	mech, err := broker.Mechanism("SCRAM-SHA-256", "admin", "admin-password")
	if err != nil {
		t.Fatal(err)
	}
	return broker.Config{Brokers: c.ListenAddrs(), SASL: mech}, c.ListenAddrs()
}

// A SASL-protected cluster accepts Lethe's producer with the right credentials only.
func TestSASL(t *testing.T) {
	_, brokers := saslCluster(t, []string{"t"}, []kadm.ACLOperation{kadm.OpWrite, kadm.OpDescribe}, "t")
	produce := func(pass string) error {
		mech, err := broker.Mechanism("SCRAM-SHA-256", "lethe", pass)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := broker.Config{Brokers: brokers, SASL: mech}.NewProducer(kgo.RecordDeliveryTimeout(2 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr()
	}
	if err := produce("right-password"); err != nil {
		t.Fatalf("right credentials: %v", err)
	}
	if err := produce("wrong-password"); err == nil {
		t.Fatal("wrong credentials accepted")
	}
}

func TestFromEnvCreateTopics(t *testing.T) {
	for v, want := range map[string]bool{"": true, "true": true, "false": false} {
		t.Setenv("LETHE_CREATE_TOPICS", v)
		c, err := broker.FromEnv("x")
		if err != nil || c.CreateTopics != want {
			t.Errorf("LETHE_CREATE_TOPICS=%q: CreateTopics %v, %v; want %v", v, c.CreateTopics, err, want)
		}
	}
	t.Setenv("LETHE_CREATE_TOPICS", "no")
	if _, err := broker.FromEnv("x"); err == nil {
		t.Error(`LETHE_CREATE_TOPICS="no" accepted`)
	}
}

// With creation refused (a principal the cluster's ACLs let describe topics but not create
// them), EnsureTopics succeeds for topics that exist and fails naming a missing one.
func TestEnsureTopicsToleratesRefusedCreate(t *testing.T) {
	admin, brokers := saslCluster(t, []string{"exists", "absent"}, []kadm.ACLOperation{kadm.OpDescribe}, "exists")
	mech, err := broker.Mechanism("SCRAM-SHA-256", "lethe", "right-password")
	if err != nil {
		t.Fatal(err)
	}
	cl := testenv.Producer(t, broker.Config{Brokers: brokers, SASL: mech})
	if err := broker.EnsureTopics(t.Context(), cl, 3, "exists"); err != nil {
		t.Fatalf("EnsureTopics of an existing topic with creation refused: %v", err)
	}
	err = broker.EnsureTopics(t.Context(), cl, 3, "exists", "absent")
	if !errors.Is(err, kerr.TopicAuthorizationFailed) || !strings.Contains(err.Error(), "absent") || strings.Contains(err.Error(), "topic exists") {
		t.Fatalf("EnsureTopics with a missing topic and creation refused = %v, want the refusal naming absent", err)
	}
	if details, _ := kadm.NewClient(testenv.Producer(t, admin)).ListTopics(t.Context(), "absent"); details["absent"].Err == nil {
		t.Fatal("the refused create created absent")
	}
}

// With topic creation off a service waits for its topics and fails naming the missing
// ones.
func TestPrepareTopicsWithCreationOff(t *testing.T) {
	cfg := testenv.Kafka(t, 1, "a")
	testenv.KafkaEmpty(t, 1, "b")
	cfg.CreateTopics = false
	cl := testenv.Producer(t, cfg)
	err := cfg.PrepareTopics(t.Context(), cl, 10*time.Millisecond, "a", "b")
	if err == nil || !strings.Contains(err.Error(), "b do not exist") {
		t.Fatalf("PrepareTopics with b missing = %v, want an error naming b", err)
	}
	if details, _ := kadm.NewClient(cl).ListTopics(t.Context(), "b"); details["b"].Err == nil {
		t.Fatal("PrepareTopics with creation off created b")
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, -1, nil, "b"); err != nil {
			t.Errorf("provision b: %v", err)
		}
	}()
	if err := cfg.PrepareTopics(t.Context(), cl, 10*time.Second, "a", "b"); err != nil {
		t.Fatalf("PrepareTopics once b was provisioned: %v", err)
	}
}

// With topic creation on, a service started while no broker answers creates its topics
// once one does, rather than failing at once.
func TestPrepareTopicsRidesOutABrokerRestart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there until the cluster starts
	cfg := broker.Config{Brokers: []string{fmt.Sprintf("127.0.0.1:%d", port)}, CreateTopics: true, Partitions: 2}
	cl := testenv.Producer(t, cfg)
	started := make(chan func(), 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		started <- startBrokerOn(t, port)
	}()
	err = cfg.PrepareTopics(t.Context(), cl, 2*time.Minute, "a")
	if stop := <-started; stop != nil {
		defer stop()
	}
	if err != nil {
		t.Fatalf("PrepareTopics while the broker came up: %v", err)
	}
	if details, _ := kadm.NewClient(cl).ListTopics(t.Context(), "a"); details["a"].Err != nil || len(details["a"].Partitions) != 2 {
		t.Fatalf("topic a after PrepareTopics: %+v", details["a"])
	}
	if err := cfg.PrepareTopics(t.Context(), testenv.Producer(t, broker.Config{Brokers: []string{"127.0.0.1:1"}, CreateTopics: true}), 0, "a"); err == nil {
		t.Error("PrepareTopics with no broker and no time to wait succeeded")
	}
}

// startBrokerOn starts a broker of its own listening on port (Apache Kafka, whose listener
// opens before the broker serves, or kfake) and returns its stop, or nil after t.Error.
func startBrokerOn(t *testing.T, port int) func() {
	if testenv.ExternalKafka() {
		c, err := testenv.StartKafka(testenv.KafkaOptions{Ports: []int{port}})
		if err != nil {
			t.Error(err)
			return nil
		}
		return c.Stop
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	if err != nil {
		t.Error(err)
		return nil
	}
	return c.Close
}
