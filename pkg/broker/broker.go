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
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/lethe-erasure/lethe/pkg/calls"
	"github.com/lethe-erasure/lethe/pkg/envconf"
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

// Settings are the declared cluster settings of a service.
type Settings struct {
	Brokers          []string `env:"LETHE_KAFKA_BROKERS" default:"127.0.0.1:9092" doc:"Seed brokers, host:port, comma separated."`
	Partitions       int32    `env:"LETHE_KAFKA_PARTITIONS" default:"6" min:"1" doc:"Partitions of the topics a service creates."`
	TLS              bool     `env:"LETHE_KAFKA_TLS" doc:"true: connect to the brokers with TLS, trusting the system roots."`
	TLSCAFile        string   `env:"LETHE_KAFKA_TLS_CA_FILE" doc:"A PEM bundle to trust instead of the system roots; implies TLS."`
	SASLMechanism    string   `env:"LETHE_KAFKA_SASL_MECHANISM" doc:"SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: no SASL."`
	SASLUsername     string   `env:"LETHE_KAFKA_SASL_USERNAME" doc:"SASL user name."`
	SASLPassword     string   `env:"LETHE_KAFKA_SASL_PASSWORD" secret:"true" doc:"SASL password."`
	SASLPasswordFile string   `env:"LETHE_KAFKA_SASL_PASSWORD_FILE" doc:"A file holding the SASL password, read when LETHE_KAFKA_SASL_PASSWORD is empty."`
	CreateTopics     bool     `env:"LETHE_CREATE_TOPICS" default:"true" doc:"false: never create topics; wait up to 2 minutes for them to be provisioned (lethectl topics apply)."`
	GroupProtocol    string   `env:"LETHE_KAFKA_GROUP_PROTOCOL" default:"classic" doc:"Consumer group protocol: classic (the members assign partitions, cooperative-sticky, 10 s session timeout) or consumer (KIP-848: the broker assigns them and its group.consumer.session.timeout.ms applies; Kafka 4.3 or later advised)."`
}

// Validate checks the group protocol and the SASL mechanism.
func (s Settings) Validate() error {
	var errs []error
	switch s.GroupProtocol {
	case GroupClassic, GroupConsumer:
	default:
		errs = append(errs, fmt.Errorf("broker: LETHE_KAFKA_GROUP_PROTOCOL must be classic or consumer, not %q", s.GroupProtocol))
	}
	switch strings.ToUpper(s.SASLMechanism) {
	case "", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		errs = append(errs, fmt.Errorf("broker: LETHE_KAFKA_SASL_MECHANISM %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.SASLMechanism))
	}
	return errors.Join(errs...)
}

// Config returns the cluster configuration s describes for a client named clientID. It
// reads the CA bundle and the password file.
func (s Settings) Config(clientID string) (Config, error) {
	c := Config{Brokers: s.Brokers, ClientID: clientID, Partitions: s.Partitions, CreateTopics: s.CreateTopics, GroupProtocol: s.GroupProtocol}
	tc, err := tlsenv.Config(s.TLS, s.TLSCAFile, "LETHE_KAFKA_TLS_CA_FILE")
	if err != nil {
		return c, fmt.Errorf("broker: %w", err)
	}
	c.TLS = tc
	if s.SASLMechanism != "" {
		pass := s.SASLPassword
		if pass == "" && s.SASLPasswordFile != "" {
			b, err := os.ReadFile(s.SASLPasswordFile)
			if err != nil {
				return c, fmt.Errorf("broker: LETHE_KAFKA_SASL_PASSWORD_FILE: %w", err)
			}
			pass = strings.TrimRight(string(b), "\r\n")
		}
		if c.SASL, err = Mechanism(s.SASLMechanism, s.SASLUsername, pass); err != nil {
			return c, err
		}
	}
	return c, nil
}

// FromEnv loads the Settings from the environment and returns their Config.
func FromEnv(clientID string) (Config, error) {
	var s Settings
	if err := envconf.FromEnv(&s); err != nil {
		return Config{}, err
	}
	return s.Config(clientID)
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
		kgo.WithHooks(callCounter{}),
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

// callCounter counts each request a Kafka client writes to a broker, by request type
// (Produce, Fetch, OffsetCommit, Heartbeat, ...).
type callCounter struct{}

var _ kgo.HookBrokerWrite = callCounter{}

// OnBrokerWrite counts a request written to a broker by its type.
func (callCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	calls.Count(calls.Kafka, "", kmsg.NameForKey(key))
}
