package dlq_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/dlq"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

const (
	rawSubject = "alice@example.com"
	rawSession = "sess-alice-42"
	rejected   = "store rejected the request"
)

var dlqTopic = event.DLQ(event.TopicRequested)

func requested(id, tenant string) *kgo.Record {
	r := event.Requested{
		RequestID: id, TenantID: tenant, SubjectHash: "hash-of-" + id, KeyID: "k1",
		Identifiers: event.Identifiers{SubjectID: rawSubject, SessionIDs: []string{rawSession}},
		Scope:       event.ScopeSubject, Regulation: "GDPR", RequestedAt: time.Now().UTC(), DueAt: time.Now().UTC().Add(time.Hour),
		InventoryVersion: "v1", ExpectedStores: []string{"qdrant"}, Attempt: 1,
	}
	b, err := event.Request.Encode(&r)
	if err != nil {
		panic(err)
	}
	return &kgo.Record{Topic: event.TopicRequested, Key: []byte(id), Value: b,
		Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-abc-def-01")}}}
}

// deadLettered produces requests, some of tenant "bad" and one undecodable record, runs a
// real consumer whose handler fails permanently on the bad ones, and waits until the four
// dead letters are written. It returns the produced records by key.
func deadLettered(t *testing.T) (broker.Config, map[string]*kgo.Record) {
	t.Helper()
	brokers := testenv.Kafka(t, 2, event.TopicRequested, dlqTopic)
	prod := testenv.Producer(t, brokers)
	recs := []*kgo.Record{requested("ok-1", "acme"), requested("bad-1", "bad"), requested("ok-2", "acme"),
		requested("bad-2", "bad"), requested("bad-3", "bad"),
		{Topic: event.TopicRequested, Key: []byte("junk"), Value: []byte("not avro at all")}}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	byKey := map[string]*kgo.Record{}
	for _, r := range recs {
		byKey[string(r.Key)] = r
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- consumer.Run(ctx, consumer.Config{Broker: brokers, Group: "qdrant-deleter", Topics: []string{event.TopicRequested}},
			func(ctx context.Context, r *kgo.Record) error {
				var req event.Requested
				if err := event.Request.Decode(r.Value, &req); err != nil {
					return err
				}
				if req.TenantID == "bad" {
					return retry.Permanent(errors.New(rejected))
				}
				return nil
			})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		es, err := dlq.List(context.Background(), brokers, nil, dlqTopic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 4 {
			return brokers, byKey
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dead letters after 15 s, want 4", len(es))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestList(t *testing.T) {
	brokers, produced := deadLettered(t)
	ctx := context.Background()
	es, err := dlq.List(ctx, brokers, nil, dlqTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i, e := range es {
		keys = append(keys, e.Key)
		src := produced[e.Key]
		if e.SourceTopic != event.TopicRequested || e.Group != "qdrant-deleter" || e.At.IsZero() || time.Since(e.At) > time.Minute {
			t.Errorf("entry %s: source %s group %s at %s, want %s, qdrant-deleter, just now", e.Key, e.SourceTopic, e.Group, e.At, event.TopicRequested)
		}
		if e.Size != len(src.Value) || e.SourceOffset < 0 || e.SourcePartition < 0 {
			t.Errorf("entry %s: size %d at %d/%d, want %d", e.Key, e.Size, e.SourcePartition, e.SourceOffset, len(src.Value))
		}
		if i > 0 && (e.Partition < es[i-1].Partition || e.Partition == es[i-1].Partition && e.Offset <= es[i-1].Offset) {
			t.Errorf("entries not ordered by partition and offset: %+v", es)
		}
		switch e.Key {
		case "junk":
			if e.Event != nil || !strings.Contains(e.Reason, "malformed") {
				t.Errorf("undecodable entry: event %+v reason %q, want no event and a decoding reason", e.Event, e.Reason)
			}
		default:
			if e.Reason != rejected || e.Event == nil || *e.Event != (dlq.Summary{Type: "requested", RequestID: e.Key, TenantID: "bad"}) {
				t.Errorf("entry %s: reason %q event %+v, want %q and the request's summary", e.Key, e.Reason, e.Event, rejected)
			}
		}
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"bad-1", "bad-2", "bad-3", "junk"}) {
		t.Fatalf("dead letters %v, want bad-1..3 and junk", keys)
	}
	b, _ := json.Marshal(es)
	if strings.Contains(string(b), rawSubject) || strings.Contains(string(b), rawSession) {
		t.Errorf("entries show a raw identifier: %s", b)
	}

	first, err := dlq.List(ctx, brokers, nil, dlqTopic, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || first[0].Key != es[0].Key || first[1].Key != es[1].Key {
		t.Errorf("List(limit 2) = %+v, want the first two of %+v", first, es)
	}
	if _, err := dlq.List(ctx, brokers, nil, "no.such.dlq", 0); err == nil {
		t.Error("List of a missing topic succeeded")
	}
}

func TestReplayRepublishesOnce(t *testing.T) {
	brokers, produced := deadLettered(t)
	ctx := context.Background()
	onlyRejected := func(e dlq.Entry) bool { return e.Reason == rejected }
	steps := []struct {
		filter func(dlq.Entry) bool
		want   int
	}{
		{onlyRejected, 3}, // junk is passed over, and stays available
		{onlyRejected, 0}, // nothing replayed twice
		{nil, 1},          // the record passed over earlier
		{nil, 0},
	}
	for i, st := range steps {
		res, err := dlq.Replay(ctx, brokers, nil, dlqTopic, dlq.Options{Filter: st.filter, By: "ops"})
		if err != nil || res.Replayed != st.want || len(res.Refused) != 0 {
			t.Fatalf("run %d: Replay = %+v, %v; want %d replayed", i+1, res, err, st.want)
		}
	}

	replayed := map[string][]string{} // key -> replayed-from marks
	for _, r := range testenv.ReadTopic(t, brokers.Brokers, event.TopicRequested) {
		var from, by string
		for _, h := range r.Headers {
			if strings.HasPrefix(h.Key, "lethe.dlq.") {
				t.Errorf("republished %s keeps header %s", r.Key, h.Key)
			}
			switch h.Key {
			case dlq.HeaderReplayedFrom:
				from = string(h.Value)
			case dlq.HeaderReplayedBy:
				by = string(h.Value)
			}
		}
		if from == "" {
			continue
		}
		replayed[string(r.Key)] = append(replayed[string(r.Key)], from)
		src := produced[string(r.Key)]
		var names []string
		for _, h := range r.Headers {
			names = append(names, h.Key)
		}
		// The source record's traceparent is none of the headers a dead letter keeps.
		wantNames := []string{dlq.HeaderReplayedFrom, dlq.HeaderReplayedBy}
		if string(r.Value) != string(src.Value) || !slices.Equal(names, wantNames) || by != "ops" {
			t.Errorf("republished %s: value changed or headers %v (by %q), want %v by ops", r.Key, names, by, wantNames)
		}
		if !strings.HasPrefix(from, dlqTopic+"/") {
			t.Errorf("replayed-from %q, want %s/<partition>/<offset>", from, dlqTopic)
		}
	}
	for _, k := range []string{"bad-1", "bad-2", "bad-3", "junk"} {
		if len(replayed[k]) != 1 {
			t.Errorf("%s republished %d times (%v), want once", k, len(replayed[k]), replayed[k])
		}
	}
	if len(replayed) != 4 {
		t.Errorf("republished %v, want exactly the four dead letters", replayed)
	}
	resp, err := kadm.NewClient(mustClient(t, brokers)).FetchOffsets(ctx, dlq.Group)
	if err != nil || len(resp[dlqTopic]) == 0 {
		t.Fatalf("no progress committed in group %s: %v %v", dlq.Group, resp, err)
	}
}

func mustClient(t *testing.T, brokers broker.Config) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(brokers.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
