// Package broker builds franz-go clients with Lethe's delivery settings and creates topics.
//
// Every producer waits for all in-sync replicas (acks=all), is idempotent, and does not
// linger: a consume-then-produce stage would otherwise add the default 10 ms per hop.
package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
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
)

// Config says how to reach the Kafka cluster.
type Config struct {
	Brokers    []string // seed brokers, host:port
	ClientID   string
	Partitions int32       // partitions of topics created by EnsureTopics
	TLS        *tls.Config // nil: plaintext
	SASL       sasl.Mechanism
}

// FromEnv reads the cluster settings from the environment:
//
//	LETHE_KAFKA_BROKERS         seed brokers, comma separated (default 127.0.0.1:9092)
//	LETHE_KAFKA_PARTITIONS      partitions of topics a service creates (default 6)
//	LETHE_KAFKA_TLS             "true" to connect with TLS (system roots)
//	LETHE_KAFKA_TLS_CA_FILE     a PEM bundle to trust instead (implies TLS)
//	LETHE_KAFKA_SASL_MECHANISM  PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
//	LETHE_KAFKA_SASL_USERNAME, LETHE_KAFKA_SASL_PASSWORD[_FILE]
func FromEnv(clientID string) (Config, error) {
	c := Config{Brokers: []string{"127.0.0.1:9092"}, ClientID: clientID, Partitions: 6}
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
	ca := os.Getenv("LETHE_KAFKA_TLS_CA_FILE")
	if os.Getenv("LETHE_KAFKA_TLS") == "true" || ca != "" {
		c.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		if ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return c, fmt.Errorf("broker: LETHE_KAFKA_TLS_CA_FILE: %w", err)
			}
			c.TLS.RootCAs = x509.NewCertPool()
			if !c.TLS.RootCAs.AppendCertsFromPEM(pem) {
				return c, errors.New("broker: LETHE_KAFKA_TLS_CA_FILE holds no PEM certificate")
			}
		}
	}
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

// NewProducer returns a producing client.
func (c Config) NewProducer(extra ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(c.Options(), extra...)...)
}

// EnsureTopics creates the topics that do not exist yet, with c.Partitions partitions.
func EnsureTopics(ctx context.Context, cl *kgo.Client, partitions int32, topics ...string) error {
	if partitions <= 0 {
		partitions = 1
	}
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, -1, nil, topics...)
	if err != nil {
		return fmt.Errorf("broker: create topics: %w", err)
	}
	var errs []error
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			errs = append(errs, fmt.Errorf("broker: create topic %s: %w", r.Topic, r.Err))
		}
	}
	return errors.Join(errs...)
}
