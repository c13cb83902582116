package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
)

// Kafka starts an in-process kfake broker with topics of the given partitions and returns
// its configuration. It is stopped when t ends.
func Kafka(t testing.TB, partitions int32, topics ...string) broker.Config {
	t.Helper()
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
