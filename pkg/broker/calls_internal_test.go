package broker

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/calls"
)

func TestKafkaRequestsCountedByType(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.WithHooks(callCounter{}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := calls.Total.WithLabelValues(calls.Kafka, "", "Produce")
	p0 := testutil.ToFloat64(produce)
	for i := range 3 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "t", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if d := testutil.ToFloat64(produce) - p0; d != 3 {
		t.Errorf("Produce counted %v times, want 3 (one synchronous produce each)", d)
	}
}
