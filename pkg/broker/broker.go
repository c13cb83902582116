// Package broker builds franz-go clients with Lethe's delivery settings and provisions
// topics.
//
// Every producer waits for all in-sync replicas (acks=all), is idempotent, and does not
// linger: a consume-then-produce stage would otherwise add the default 10 ms per hop.
//
// Topics are provisioned on purpose by ApplyTopics (lethectl topics apply): replication
// factor, min.insync.replicas, partitions and retention per topic (Plan). A service creates
// the topics it finds missing at start (EnsureTopics, with the broker's defaults) only when
// CreateTopics is set; otherwise it waits for them (WaitTopics).
package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/lethe-erasure/lethe/pkg/tlsenv"
)

// Config says how to reach the Kafka cluster.
type Config struct {
	Brokers    []string // seed brokers, host:port
	ClientID   string
	Partitions int32       // partitions of topics created by EnsureTopics
	TLS        *tls.Config // nil: plaintext
	SASL       sasl.Mechanism
	// CreateTopics makes PrepareTopics create missing topics; false: wait for them to be
	// provisioned (lethectl topics apply).
	CreateTopics bool
	// GroupProtocol is the consumer groups' rebalance protocol: GroupClassic (the default:
	// the members assign partitions, cooperative-sticky) or GroupConsumer (KIP-848: the
	// broker's group coordinator assigns them; Kafka 4.0 or later, 4.3 or later advised).
	GroupProtocol string
}

// Consumer group protocols of Config.GroupProtocol.
const (
	GroupClassic  = "classic"
	GroupConsumer = "consumer"
)

// FromEnv reads the cluster settings from the environment:
//
//	LETHE_KAFKA_BROKERS         seed brokers, comma separated (default 127.0.0.1:9092)
//	LETHE_KAFKA_PARTITIONS      partitions of topics a service creates (default 6)
//	LETHE_KAFKA_TLS             "true" to connect with TLS (system roots)
//	LETHE_KAFKA_TLS_CA_FILE     a PEM bundle to trust instead (implies TLS)
//	LETHE_KAFKA_SASL_MECHANISM  PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
//	LETHE_KAFKA_SASL_USERNAME, LETHE_KAFKA_SASL_PASSWORD[_FILE]
//	LETHE_CREATE_TOPICS         "false": never create topics, wait for them (default true)
//	LETHE_KAFKA_GROUP_PROTOCOL  classic (default) or consumer (KIP-848: the broker assigns
//	                            partitions; its group.consumer.session.timeout.ms then
//	                            applies in place of the consumers' own 10 s)
func FromEnv(clientID string) (Config, error) {
	c := Config{Brokers: []string{"127.0.0.1:9092"}, ClientID: clientID, Partitions: 6, CreateTopics: true}
	switch v := os.Getenv("LETHE_CREATE_TOPICS"); v {
	case "", "true":
	case "false":
		c.CreateTopics = false
	default:
		return c, fmt.Errorf("broker: LETHE_CREATE_TOPICS must be true or false, not %q", v)
	}
	switch v := os.Getenv("LETHE_KAFKA_GROUP_PROTOCOL"); v {
	case "", GroupClassic, GroupConsumer:
		c.GroupProtocol = v
	default:
		return c, fmt.Errorf("broker: LETHE_KAFKA_GROUP_PROTOCOL must be classic or consumer, not %q", v)
	}
	if b := os.Getenv("LETHE_KAFKA_BROKERS"); b != "" {
		c.Brokers = strings.Split(b, ",")
	}
	if p := os.Getenv("LETHE_KAFKA_PARTITIONS"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("broker: LETHE_KAFKA_PARTITIONS must be a positive number")
		}
		c.Partitions = int32(n)
	}
	tc, err := tlsenv.FromEnv("LETHE_KAFKA_TLS", "LETHE_KAFKA_TLS_CA_FILE")
	if err != nil {
		return c, fmt.Errorf("broker: %w", err)
	}
	c.TLS = tc
	if m := os.Getenv("LETHE_KAFKA_SASL_MECHANISM"); m != "" {
		user := os.Getenv("LETHE_KAFKA_SASL_USERNAME")
		pass := os.Getenv("LETHE_KAFKA_SASL_PASSWORD")
		if f := os.Getenv("LETHE_KAFKA_SASL_PASSWORD_FILE"); pass == "" && f != "" {
			b, err := os.ReadFile(f)
			if err != nil {
				return c, fmt.Errorf("broker: LETHE_KAFKA_SASL_PASSWORD_FILE: %w", err)
			}
			pass = strings.TrimRight(string(b), "\r\n")
		}
		var err error
		if c.SASL, err = Mechanism(m, user, pass); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Mechanism returns the SASL mechanism named m (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
func Mechanism(m, user, pass string) (sasl.Mechanism, error) {
	if user == "" || pass == "" {
		return nil, errors.New("broker: SASL needs a username and a password")
	}
	switch strings.ToUpper(m) {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("broker: SASL mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", m)
}

// String describes c without secrets.
func (c Config) String() string {
	s := strings.Join(c.Brokers, ",")
	if c.TLS != nil {
		s += " tls"
	}
	if c.SASL != nil {
		s += " sasl=" + c.SASL.Name()
	}
	return s
}

// Options are the client options common to producers and consumers.
func (c Config) Options() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		// A produce that cannot complete fails after this and is retried by the caller with
		// backoff (and logged) instead of blocking silently.
		kgo.RecordDeliveryTimeout(15 * time.Second),
	}
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	if c.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.TLS.Clone()))
	}
	if c.SASL != nil {
		opts = append(opts, kgo.SASL(c.SASL))
	}
	return opts
}

// GroupOptions are the consumer group options of c.GroupProtocol.
func (c Config) GroupOptions() []kgo.Opt {
	if c.GroupProtocol == GroupConsumer {
		return []kgo.Opt{kgo.ServerSideBalancer()}
	}
	return nil
}

// NewProducer returns a producing client.
func (c Config) NewProducer(extra ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(c.Options(), extra...)...)
}

// PrepareTopics makes sure topics exist before a service uses them: it creates the missing
// ones when c.CreateTopics is set (EnsureTopics), trying again for up to wait while no
// broker can be reached (a service started during a broker restart rides it out), else
// waits up to wait for them to be provisioned (WaitTopics).
func (c Config) PrepareTopics(ctx context.Context, cl *kgo.Client, wait time.Duration, topics ...string) error {
	if !c.CreateTopics {
		return WaitTopics(ctx, cl, wait, topics...)
	}
	deadline := time.Now().Add(wait)
	for {
		err := EnsureTopics(ctx, cl, c.Partitions, topics...)
		var unreachable *net.OpError
		if err == nil || !errors.As(err, &unreachable) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// EnsureTopics creates the topics that do not exist yet, with partitions partitions and
// the broker's default replication factor and configs. A create the cluster refuses (no
// CREATE permission under ACLs, a create policy) is fine for a topic that exists: only a
// topic that is missing and cannot be created is an error.
func EnsureTopics(ctx context.Context, cl *kgo.Client, partitions int32, topics ...string) error {
	if partitions <= 0 {
		partitions = 1
	}
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopics(ctx, partitions, -1, nil, topics...)
	refused := map[string]error{}
	switch {
	case err != nil:
		for _, t := range topics {
			refused[t] = err
		}
	default:
		for _, r := range resp.Sorted() {
			if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
				refused[r.Topic] = r.Err
			}
		}
	}
	if len(refused) == 0 {
		return nil
	}
	missing, err := missingTopics(ctx, adm, topics)
	if err != nil {
		return fmt.Errorf("broker: create topics refused (%w) and listing them failed: %w", firstOf(refused, topics), err)
	}
	var errs []error
	for _, t := range missing {
		if e := refused[t]; e != nil {
			errs = append(errs, fmt.Errorf("broker: create topic %s: %w", t, e))
		}
	}
	return errors.Join(errs...)
}

// WaitTopics waits until every topic exists, polling every second, for at most wait. It
// fails naming the missing topics.
func WaitTopics(ctx context.Context, cl *kgo.Client, wait time.Duration, topics ...string) error {
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(wait)
	for {
		missing, err := missingTopics(ctx, adm, topics)
		if err == nil && len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("broker: list topics: %w", err)
			}
			return fmt.Errorf("broker: topics %s do not exist after %s and topic creation is off: provision them (lethectl topics apply)", strings.Join(missing, ", "), wait)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// missingTopics returns the topics of names the cluster does not have.
func missingTopics(ctx context.Context, adm *kadm.Client, names []string) ([]string, error) {
	details, err := listFresh(ctx, adm, names)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, n := range names {
		d, ok := details[n]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			missing = append(missing, n)
		case d.Err != nil:
			return nil, fmt.Errorf("topic %s: %w", n, d.Err)
		}
	}
	return missing, nil
}

func firstOf(m map[string]error, order []string) error {
	for _, k := range order {
		if m[k] != nil {
			return m[k]
		}
	}
	return nil
}
