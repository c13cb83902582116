package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
)

// Kafka starts an in-process kfake broker with topics of the given partitions and returns
// its configuration. It is stopped when t ends.
//
// With EnvKafka set it uses that cluster instead: it takes a machine-wide lock on it for
// the rest of t (topic and group names are fixed, so tests on one cluster take turns),
// deletes topics of these names a crashed run left, creates them with the partitions and
// the broker's default replication, and when t ends deletes them and every consumer group
// that appeared meanwhile.
func Kafka(t testing.TB, partitions int32, topics ...string) broker.Config {
	t.Helper()
	if b := os.Getenv(EnvKafka); b != "" {
		return externalKafka(t, strings.Split(b, ","), partitions, topics)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return broker.Config{Brokers: c.ListenAddrs()}
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
// (records acknowledged before it are all there), failing t after 5 s.
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
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	var out []*kgo.Record
	for int64(len(out)) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", len(out), n, topic)
		}
		out = append(out, fs.Records()...)
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
	if err := createTopics(ctx, adm, partitions, topics); err != nil {
		cl.Close()
		t.Fatalf("testenv: create topics on %s: %v", brokers, err)
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
			if len(fresh) > 0 {
				res, err := adm.DeleteGroups(ctx, fresh...)
				if err == nil {
					for g, r := range res {
						if r.Err != nil && !errors.Is(r.Err, kerr.GroupIDNotFound) {
							err = errors.Join(err, fmt.Errorf("group %s: %w", g, r.Err))
						}
					}
				}
				if err != nil {
					t.Errorf("testenv: delete consumer groups: %v", err)
				}
			}
		}
		if err := deleteTopics(ctx, adm, topics); err != nil {
			t.Errorf("testenv: delete topics: %v", err)
		}
	})
	return broker.Config{Brokers: brokers}
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
			return nil
		}
		if err := pause(ctx); err != nil {
			return fmt.Errorf("%d of %d topics ready: %w", ready, len(topics), err)
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
