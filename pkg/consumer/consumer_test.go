package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

func cluster(t *testing.T, topics ...string) broker.Config {
	t.Helper()
	b := testenv.Kafka(t, 2, append(topics, topics[0]+".dlq")...)
	b.Partitions = 2
	return b
}

func produce(t *testing.T, cfg broker.Config, recs ...*kgo.Record) {
	t.Helper()
	cl, err := cfg.NewProducer(kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func rec(p int32, v string) *kgo.Record { return &kgo.Record{Partition: p, Value: []byte(v)} }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func consume(t *testing.T, cfg consumer.Config, h consumer.Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx, cfg, h) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func readAll(t *testing.T, cfg broker.Config, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(out) < n {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records from %s", len(out), n, topic)
		}
		out = append(out, f.Records()...)
	}
	return out
}

// A record that failed transiently is retried in place, in order, while the other
// partition goes on; a permanent failure goes to the DLQ with its reason and the
// partition moves on.
func TestRetryDLQAndPartitionIsolation(t *testing.T) {
	cfg := cluster(t, "in")
	produce(t, cfg, rec(0, "stuck"), rec(0, "after-stuck"), rec(1, "poison"), rec(1, "p1-a"), rec(1, "p1-b"))

	var mu sync.Mutex
	var seen []string
	release := make(chan struct{})
	var stuckTries atomic.Int32
	h := func(ctx context.Context, r *kgo.Record) error {
		v := string(r.Value)
		switch v {
		case "stuck":
			select {
			case <-release:
			default:
				stuckTries.Add(1)
				return errors.New("store unavailable")
			}
		case "poison":
			return retry.Permanent(errors.New("cannot decode"))
		}
		mu.Lock()
		seen = append(seen, v)
		mu.Unlock()
		return nil
	}
	stop := consume(t, consumer.Config{Broker: cfg, Group: "g", Topics: []string{"in"}, Backoff: retry.Backoff{Base: time.Millisecond, Max: 4 * time.Millisecond}}, h)
	defer stop()

	// Partition 1 may finish before partition 0's first retry: wait for both.
	waitFor(t, "partition 1 to finish while partition 0 is retried", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 2 && stuckTries.Load() >= 2
	})
	mu.Lock()
	if fmt.Sprint(seen) != "[p1-a p1-b]" {
		t.Errorf("seen %v", seen)
	}
	mu.Unlock()
	close(release)
	waitFor(t, "partition 0 to drain in order", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 4
	})
	mu.Lock()
	if seen[2] != "stuck" || seen[3] != "after-stuck" {
		t.Errorf("partition 0 order: %v", seen)
	}
	mu.Unlock()

	dlq := readAll(t, cfg, "in.dlq", 1)
	if string(dlq[0].Value) != "poison" {
		t.Fatalf("dlq value %q", dlq[0].Value)
	}
	h2 := map[string]string{}
	for _, hd := range dlq[0].Headers {
		h2[hd.Key] = string(hd.Value)
	}
	if h2[consumer.HeaderReason] != "cannot decode" || h2[consumer.HeaderTopic] != "in" || h2[consumer.HeaderPartition] != "1" || h2[consumer.HeaderGroup] != "g" {
		t.Errorf("dlq headers %v", h2)
	}
}

// Offsets are committed only for records whose handler returned: a new member of the
// group resumes after the last handled record and receives the unhandled one again, with
// either group protocol.
func TestCommitsOnlyHandledRecords(t *testing.T) {
	protocols(t, func(t *testing.T, protocol string) {
		cfg := cluster(t, "in")
		cfg.GroupProtocol = protocol
		produce(t, cfg, rec(0, "a"), rec(0, "b"), rec(0, "c"))
		got := make(chan string, 10)
		ccfg := consumer.Config{Broker: cfg, Group: "g", Topics: []string{"in"}, Backoff: retry.Backoff{Base: time.Millisecond, Max: time.Millisecond}, Grace: 20 * time.Millisecond}
		stop := consume(t, ccfg, func(ctx context.Context, r *kgo.Record) error {
			if string(r.Value) == "c" {
				<-ctx.Done() // crash in the middle of "c"
				return ctx.Err()
			}
			got <- string(r.Value)
			return nil
		})
		for _, want := range []string{"a", "b"} {
			if v := <-got; v != want {
				t.Fatalf("got %q, want %q", v, want)
			}
		}
		stop()

		var again []string
		var mu sync.Mutex
		stop = consume(t, ccfg, func(ctx context.Context, r *kgo.Record) error {
			mu.Lock()
			again = append(again, string(r.Value))
			mu.Unlock()
			return nil
		})
		defer stop()
		waitFor(t, "redelivery of c", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(again) >= 1
		})
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(again) != "[c]" {
			t.Errorf("second member got %v, want [c]", again)
		}
	})
}

func TestOversizedRecordIsDeadLettered(t *testing.T) {
	cfg := cluster(t, "in")
	produce(t, cfg, &kgo.Record{Partition: 0, Value: make([]byte, 2048)}, rec(0, "ok"))
	got := make(chan string, 2)
	stop := consume(t, consumer.Config{Broker: cfg, Group: "g", Topics: []string{"in"}, MaxRecordBytes: 1024}, func(ctx context.Context, r *kgo.Record) error {
		got <- string(r.Value)
		return nil
	})
	defer stop()
	if v := <-got; v != "ok" {
		t.Fatalf("handler got %q", v)
	}
	dlq := readAll(t, cfg, "in.dlq", 1)
	if len(dlq[0].Value) != 2048 {
		t.Errorf("dlq record has %d bytes", len(dlq[0].Value))
	}
}

// Stopping lets the record in hand finish within the grace period: its effect is done
// and its offset committed, so the next member does not get it again, with either group
// protocol.
func TestStopFinishesTheRecordInHand(t *testing.T) {
	protocols(t, func(t *testing.T, protocol string) {
		cfg := cluster(t, "in")
		cfg.GroupProtocol = protocol
		produce(t, cfg, rec(0, "slow"), rec(0, "next"))
		started := make(chan struct{})
		var finished atomic.Bool
		ccfg := consumer.Config{Broker: cfg, Group: "g", Topics: []string{"in"}, Grace: 5 * time.Second}
		stop := consume(t, ccfg, func(ctx context.Context, r *kgo.Record) error {
			if string(r.Value) != "slow" {
				return nil
			}
			close(started)
			select {
			case <-time.After(200 * time.Millisecond):
				finished.Store(true)
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		<-started
		stop()
		if !finished.Load() {
			t.Fatal("the record in hand was cancelled instead of finished")
		}
		got := make(chan string, 2)
		stop = consume(t, ccfg, func(ctx context.Context, r *kgo.Record) error {
			got <- string(r.Value)
			return nil
		})
		defer stop()
		if v := <-got; v != "next" {
			t.Errorf("next member got %q first, want the record after the finished one", v)
		}
	})
}

// With InFlight above 1, records of one partition run concurrently, and an offset is
// committed only once every record before it is done: a member that stops while the
// first record is still in hand leaves every later, finished record to be delivered again.
func TestInFlightMarksOnlyTheDonePrefix(t *testing.T) {
	cfg := cluster(t, "in")
	produce(t, cfg, rec(0, "slow"), rec(0, "b"), rec(0, "c"), rec(0, "d"))
	ccfg := consumer.Config{Broker: cfg, Group: "g", Topics: []string{"in"}, InFlight: 4, Grace: 20 * time.Millisecond,
		Backoff: retry.Backoff{Base: time.Millisecond, Max: time.Millisecond}}
	var finished atomic.Int32
	stop := consume(t, ccfg, func(ctx context.Context, r *kgo.Record) error {
		if string(r.Value) == "slow" {
			<-ctx.Done() // still in hand when the member stops
			return ctx.Err()
		}
		finished.Add(1)
		return nil
	})
	// b, c and d finish while slow, before them, is still running: they ran concurrently.
	waitFor(t, "b, c and d while slow runs", func() bool { return finished.Load() == 3 })
	stop()

	var mu sync.Mutex
	var again []string
	stop = consume(t, ccfg, func(ctx context.Context, r *kgo.Record) error {
		mu.Lock()
		again = append(again, string(r.Value))
		mu.Unlock()
		return nil
	})
	defer stop()
	waitFor(t, "redelivery", func() bool { mu.Lock(); defer mu.Unlock(); return len(again) == 4 })
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(again) != 4 {
		t.Errorf("second member got %v, want all four records again (none after slow was committed)", again)
	}
}

// Once every record of a concurrent window is done, the whole window is committed.
func TestInFlightCommitsTheWindow(t *testing.T) {
	cfg := cluster(t, "in")
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, rec(int32(i%2), fmt.Sprint(i)))
	}
	produce(t, cfg, recs...)
	ccfg := consumer.Config{Broker: cfg, Group: "g", Topics: []string{"in"}, InFlight: 8}
	var n atomic.Int32
	stop := consume(t, ccfg, func(ctx context.Context, r *kgo.Record) error { n.Add(1); return nil })
	waitFor(t, "all 20 records", func() bool { return n.Load() == 20 })
	stop()

	var again atomic.Int32
	stop = consume(t, ccfg, func(ctx context.Context, r *kgo.Record) error { again.Add(1); return nil })
	defer stop()
	produce(t, cfg, rec(0, "new"))
	waitFor(t, "the new record", func() bool { return again.Load() >= 1 })
	time.Sleep(50 * time.Millisecond)
	if got := again.Load(); got != 1 {
		t.Errorf("second member handled %d records, want only the new one", got)
	}
}

// With InFlight above 1, a record waits for a running record with the same key, while
// records with other keys go on: one request's records stay in order.
func TestInFlightKeepsEachKeyInOrder(t *testing.T) {
	cfg := cluster(t, "in")
	keyed := func(k, v string) *kgo.Record { return &kgo.Record{Partition: 0, Key: []byte(k), Value: []byte(v)} }
	produce(t, cfg, keyed("a", "a1"), keyed("a", "a2"), keyed("b", "b1"))
	release := make(chan struct{})
	var mu sync.Mutex
	var seen []string
	ccfg := consumer.Config{Broker: cfg, Group: "g", Topics: []string{"in"}, InFlight: 4}
	stop := consume(t, ccfg, func(ctx context.Context, r *kgo.Record) error {
		mu.Lock()
		seen = append(seen, string(r.Value))
		mu.Unlock()
		if string(r.Value) == "a1" {
			<-release
		}
		return nil
	})
	defer stop()
	waitFor(t, "b1 while a1 runs", func() bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(seen, "b1") })
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	early := slices.Contains(seen, "a2")
	mu.Unlock()
	if early {
		t.Fatalf("a2 started while a1, with the same key, still ran: %v", seen)
	}
	close(release)
	waitFor(t, "a2 after a1", func() bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(seen, "a2") })
}

// MaxInFlight bounds the records running at once over every partition, each of which
// could run InFlight; every record still runs, and the bound is reached.
func TestMaxInFlightBoundsEveryPartitionTogether(t *testing.T) {
	cfg := cluster(t, "in")
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, rec(int32(i%2), fmt.Sprint(i)))
	}
	produce(t, cfg, recs...)
	ccfg := consumer.Config{Broker: cfg, Group: "g", Topics: []string{"in"}, InFlight: 8, MaxInFlight: 3}
	var running, peak, done atomic.Int32
	stop := consume(t, ccfg, func(ctx context.Context, r *kgo.Record) error {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		running.Add(-1)
		done.Add(1)
		return nil
	})
	defer stop()
	waitFor(t, "all 40 records", func() bool { return done.Load() == 40 })
	if p := peak.Load(); p != 3 {
		t.Errorf("at most %d records ran at once; want 3 (MaxInFlight) out of 16 (InFlight over 2 partitions)", p)
	}
}

// protocols runs f once per consumer group protocol: the classic one (cooperative-sticky,
// the members assign) and KIP-848's (the broker assigns).
func protocols(t *testing.T, f func(t *testing.T, protocol string)) {
	for _, p := range []string{broker.GroupClassic, broker.GroupConsumer} {
		t.Run(p, func(t *testing.T) { f(t, p) })
	}
}

// assignments returns the number of partitions each member of group g holds, as the
// group's coordinator describes it.
func assignments(t *testing.T, adm *kadm.Client, protocol string) []int {
	var out []int
	if protocol == broker.GroupConsumer {
		gs, err := adm.DescribeConsumerGroups(t.Context(), "g")
		if err != nil {
			return nil
		}
		for _, m := range gs["g"].Members {
			n := 0
			for _, ps := range m.Assignment {
				n += len(ps)
			}
			out = append(out, n)
		}
		return out
	}
	gs, err := adm.DescribeGroups(t.Context(), "g")
	if err != nil {
		return nil
	}
	for _, m := range gs["g"].Members {
		n := 0
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range c.Topics {
				n += len(tp.Partitions)
			}
		}
		out = append(out, n)
	}
	return out
}

// A second member joins a group at work: each partition moves between the members only
// after the record in hand finished and the offsets handled were committed, so every
// record is handled once, in order within its partition, none lost and none twice; when
// the first member leaves, the second takes its partitions from the committed offsets.
func TestRebalanceHandsOverCommittedWork(t *testing.T) {
	protocols(t, func(t *testing.T, protocol string) {
		cfg := cluster(t, "in")
		cfg.GroupProtocol = protocol
		const perPartition = 20
		var (
			mu      sync.Mutex
			handled = map[string][]string{} // member -> values, in the order handled
			seen    = map[string]int{}      // value -> times handled
		)
		joined := make(chan struct{}) // closed once the group has its second member
		member := func(name string) consumer.Handler {
			return func(ctx context.Context, r *kgo.Record) error {
				if name == "a" && strings.HasSuffix(string(r.Value), "-005") {
					select { // in hand when the rebalance begins
					case <-joined:
						time.Sleep(100 * time.Millisecond)
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				mu.Lock()
				defer mu.Unlock()
				handled[name] = append(handled[name], string(r.Value))
				seen[string(r.Value)]++
				return nil
			}
		}
		count := func() (all, byB int) {
			mu.Lock()
			defer mu.Unlock()
			return len(seen), len(handled["b"])
		}
		batch := func(from, to int) {
			var recs []*kgo.Record
			for i := from; i < to; i++ {
				recs = append(recs, rec(0, fmt.Sprintf("0-%03d", i)), rec(1, fmt.Sprintf("1-%03d", i)))
			}
			produce(t, cfg, recs...)
		}
		ccfg := consumer.Config{Broker: cfg, Group: "g", Topics: []string{"in"}, Grace: 5 * time.Second}
		batch(0, perPartition)
		stopA := sync.OnceFunc(consume(t, ccfg, member("a")))
		t.Cleanup(stopA)
		waitFor(t, "the first member at work", func() bool { n, _ := count(); return n >= 10 })
		stopB := sync.OnceFunc(consume(t, ccfg, member("b")))
		t.Cleanup(stopB)
		adm := kadm.NewClient(testenv.Producer(t, cfg))
		waitFor(t, "the second member in the group", func() bool { return len(assignments(t, adm, protocol)) == 2 })
		close(joined)
		waitFor(t, "a partition for each member", func() bool {
			a := assignments(t, adm, protocol)
			return len(a) == 2 && a[0] == 1 && a[1] == 1
		})
		batch(perPartition, 2*perPartition)
		waitFor(t, "both members at work", func() bool { n, b := count(); return n == 4*perPartition && b > 0 })
		stopA()
		batch(2*perPartition, 2*perPartition+5)
		waitFor(t, "the records after the first member left", func() bool { n, _ := count(); return n == 2*(2*perPartition+5) })
		stopB()

		mu.Lock()
		defer mu.Unlock()
		for v, n := range seen {
			if n != 1 {
				t.Errorf("%s handled %d times", v, n)
			}
		}
		for name, vs := range handled {
			last := map[byte]string{}
			for _, v := range vs {
				if p := v[0]; v < last[p] {
					t.Errorf("member %s handled %s after %s", name, v, last[p])
				}
				last[v[0]] = v
			}
		}
	})
}

// A dead letter keeps none of its record's headers but the allow-list: an intake record's
// authorization header, and its token, appear nowhere in it (headers, key or value);
// the principal the handler authenticated is named instead, when the handler says.
func TestDeadLetterKeepsNoCredential(t *testing.T) {
	const token = "lt_secret-token-0123456789abcdef"
	cfg := cluster(t, "erasure.intake")
	sent := func(key string) *kgo.Record {
		return &kgo.Record{Topic: "erasure.intake", Partition: 0, Key: []byte(key), Value: []byte(`{"tenant_id":"acme"}`), Headers: []kgo.RecordHeader{
			{Key: "authorization", Value: []byte("Bearer " + token)},
			{Key: "Content-Type", Value: []byte("application/json; charset=utf-8")},
			{Key: "traceparent", Value: []byte("00-" + token + "-01")},
			{Key: consumer.HeaderReason, Value: []byte("forged by the producer")},
			{Key: consumer.HeaderReplayedFrom, Value: []byte("erasure.intake.dlq/0/7")},
			{Key: consumer.HeaderReplayedBy, Value: []byte("ops")},
		}}
	}
	produce(t, cfg, sent("authenticated"), sent("anonymous"), sent("redacted"))
	ccfg := consumer.Config{Broker: cfg, Group: "lethe-intake", Topics: []string{"erasure.intake"},
		Redact: func(r *kgo.Record) ([]byte, bool) {
			if string(r.Key) == "redacted" {
				return []byte("redacted: 20 undecodable bytes"), true
			}
			return r.Value, false
		}}
	stop := consume(t, ccfg, func(_ context.Context, r *kgo.Record) error {
		err := retry.Permanent(errors.New("invalid request"))
		if string(r.Key) == "anonymous" {
			return err
		}
		return consumer.WithPrincipal(err, "shopbot")
	})
	defer stop()

	for _, d := range readAll(t, cfg, "erasure.intake.dlq", 3) {
		key := string(d.Key)
		for _, part := range append([][]byte{d.Key, d.Value}, headerBytes(d)...) {
			if bytes.Contains(part, []byte(token)) || bytes.Contains(bytes.ToLower(part), []byte("bearer")) {
				t.Errorf("dead letter %s holds the credential: %q", key, part)
			}
		}
		got := map[string][]string{}
		for _, h := range d.Headers {
			got[strings.ToLower(h.Key)] = append(got[strings.ToLower(h.Key)], string(h.Value))
		}
		want := map[string][]string{
			consumer.HeaderReason:       {"invalid request"},
			consumer.HeaderTopic:        {"erasure.intake"},
			consumer.HeaderPartition:    {"0"},
			consumer.HeaderOffset:       got[consumer.HeaderOffset],
			consumer.HeaderGroup:        {"lethe-intake"},
			consumer.HeaderAt:           got[consumer.HeaderAt],
			consumer.HeaderContentType:  {"application/json"},
			consumer.HeaderReplayedFrom: {"erasure.intake.dlq/0/7"},
			consumer.HeaderReplayedBy:   {"ops"},
			consumer.HeaderPrincipal:    {"shopbot"},
		}
		switch key {
		case "anonymous":
			delete(want, consumer.HeaderPrincipal)
		case "redacted":
			want[consumer.HeaderRedacted] = []string{"true"}
			delete(want, consumer.HeaderContentType) // it described the value replaced
		}
		if len(got[consumer.HeaderOffset]) != 1 || len(got[consumer.HeaderAt]) != 1 || !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("dead letter %s headers\n got %v\nwant %v", key, got, want)
		}
	}
}

func headerBytes(r *kgo.Record) [][]byte {
	var out [][]byte
	for _, h := range r.Headers {
		out = append(out, []byte(h.Key), h.Value)
	}
	return out
}

func TestWithPrincipal(t *testing.T) {
	base := retry.Permanent(errors.New("invalid"))
	err := fmt.Errorf("intake: %w", consumer.WithPrincipal(base, "shopbot"))
	if consumer.PrincipalOf(err) != "shopbot" || !retry.IsPermanent(err) || !errors.Is(err, base) || err.Error() != "intake: invalid" {
		t.Errorf("WithPrincipal: %v (principal %q)", err, consumer.PrincipalOf(err))
	}
	if consumer.WithPrincipal(nil, "shopbot") != nil || consumer.WithPrincipal(base, "") != base || consumer.PrincipalOf(base) != "" {
		t.Error("WithPrincipal of nil or without a name changed the error")
	}
}
