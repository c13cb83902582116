// Package broker builds franz-go clients with Lethe's delivery settings and creates topics.
//
// Every producer waits for all in-sync replicas (acks=all), is idempotent, and does not
// linger: a consume-then-produce stage would otherwise add the default 10 ms per hop.
package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config says how to reach the Kafka cluster.
type Config struct {
	Brokers    []string // seed brokers, host:port
	ClientID   string
	Partitions int32 // partitions of topics created by EnsureTopics
}

// FromEnv reads $LETHE_KAFKA_BROKERS (comma separated, default 127.0.0.1:9092) and
// $LETHE_KAFKA_PARTITIONS (default 6).
func FromEnv(clientID string) Config {
	c := Config{Brokers: []string{"127.0.0.1:9092"}, ClientID: clientID, Partitions: 6}
	if b := os.Getenv("LETHE_KAFKA_BROKERS"); b != "" {
		c.Brokers = strings.Split(b, ",")
	}
	if p := os.Getenv("LETHE_KAFKA_PARTITIONS"); p != "" {
		fmt.Sscanf(p, "%d", &c.Partitions)
	}
	return c
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
