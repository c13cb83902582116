package dlq_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/dlq"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// A registry-framed record that a handler behind schemareg's Reframe refuses is
// dead-lettered byte for byte as it was read, and List summarises it through the registry
// (without one it is listed with no event).
func TestRegistryFramedDeadLetter(t *testing.T) {
	ctx := context.Background()
	reg, _ := testenv.Registry(t, "registry")
	brokers := testenv.Kafka(t, 1, event.TopicRequested, dlqTopic)
	var req event.Requested
	if err := event.Request.Decode(requested("framed-1", "acme").Value, &req); err != nil {
		t.Fatal(err)
	}
	framed, err := reg.EncodeFor(event.TopicRequested, event.Request, &req)
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.Producer(t, brokers).ProduceSync(ctx, &kgo.Record{Topic: event.TopicRequested, Key: []byte("framed-1"), Value: framed}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- consumer.Run(runCtx, consumer.Config{Broker: brokers, Group: "qdrant-deleter", Topics: []string{event.TopicRequested}},
			reg.Reframe(schemareg.OwnTopics(), func(_ context.Context, r *kgo.Record) error {
				var got event.Requested
				if err := event.Request.Decode(r.Value, &got); err != nil {
					return err
				}
				return retry.Permanent(errors.New(rejected))
			}))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var es []dlq.Entry
	for deadline := time.Now().Add(15 * time.Second); len(es) == 0; time.Sleep(10 * time.Millisecond) {
		if es, err = dlq.List(ctx, brokers, reg, dlqTopic, 0); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing dead-lettered after 15 s")
		}
	}
	if e := es[0]; e.Event == nil || e.Event.RequestID != "framed-1" || e.Event.TenantID != "acme" || e.Reason != rejected {
		t.Fatalf("entry %+v (event %+v), want the request summarised with its reason", e, e.Event)
	}
	recs := testenv.ReadTopic(t, brokers.Brokers, dlqTopic)
	if len(recs) != 1 || !bytes.Equal(recs[0].Value, framed) {
		t.Fatalf("dead letter is not the record as read (%d records)", len(recs))
	}
	if plain, err := dlq.List(ctx, brokers, nil, dlqTopic, 0); err != nil || len(plain) != 1 || plain[0].Event != nil {
		t.Fatalf("List without a registry = %+v, %v; want the entry without an event", plain, err)
	}
}
