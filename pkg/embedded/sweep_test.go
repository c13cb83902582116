package embedded_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// tamperedAddenda is the audit store as a verifier reads it after someone changed one
// stored addendum: its counts say nothing reappeared.
type tamperedAddenda struct {
	*auditlog.DirStore
}

func (s tamperedAddenda) TenantAddenda(ctx context.Context, tenant string) ([]auditlog.Addendum, error) {
	as, err := s.DirStore.TenantAddenda(ctx, tenant)
	for i := range as {
		if as[i].Type == auditlog.AddendumReappeared {
			as[i].Type, as[i].Stores[0].Deleted = auditlog.AddendumReverified, 0
		}
	}
	return as, err
}

// After the receipt the subject's data comes back into Redis — an agent's late write, and
// keys restored from a snapshot (DUMP) taken before the erasure. The next sweep finds both,
// erases them, publishes erasure.reappeared and chains a REAPPEARED addendum after the
// receipt; the chain verifies, and fails once that addendum is altered. After the last
// sweep and the retention the data key is destroyed (SHREDDED): no record of any topic
// opens to the identifiers any more, and none holds them in the clear.
func TestSweepFindsLateWriteAndRestoredSnapshot(t *testing.T) {
	key, err := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	clk := testenv.NewClock(time.Now().UTC())
	cfg := embedded.DefaultConfig()
	cfg.Aggregator.Sweeps, cfg.Aggregator.Retain, cfg.Aggregator.SweepEvery = aggregator.Sweeps{time.Minute, time.Hour}, aggregator.Days(24*time.Hour), time.Hour
	sys, err := embedded.Start(context.Background(), embedded.Options{Key: key, DataDir: t.TempDir(), Config: &cfg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })
	if sys.Stack.RedisKind != "redis-server" {
		t.Fatalf("redis is %s: this test needs a real redis-server (Debian package redis-server)", sys.Stack.RedisKind)
	}
	ctx := context.Background()
	rdb := sys.Stack.Redis
	const tenant, subj, session = "acme", "cust-77", "sess-77"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(rdb.Set(ctx, "session:acme:cust-77:1", "I live at 1 Elm Street", 0).Err())
	must(rdb.Set(ctx, "cache:acme:cust-77:q1", "cached answer for cust-77", 0).Err())
	must(rdb.Set(ctx, "session:acme:cust-8:1", "another customer", 0).Err())
	snapshot, err := rdb.Dump(ctx, "cache:acme:cust-77:q1").Result() // the backup, taken before the erasure
	must(err)

	acc := submit(t, sys, `{"tenant_id":"acme","subject_id":"cust-77","session_ids":["sess-77"],"regulation":"GDPR"}`, "")
	rc := waitReceipt(t, sys, acc.RequestID)
	if rc.IdentifiersShredAt == nil {
		t.Fatal("the receipt does not say when the identifiers will be shredded")
	}
	if n, _ := rdb.Exists(ctx, "session:acme:cust-77:1", "cache:acme:cust-77:q1").Result(); n != 0 {
		t.Fatalf("%d of the subject's keys remain after the receipt", n)
	}

	// The late write and the restore.
	must(rdb.Set(ctx, "session:acme:cust-77:late", "written by a graph step that started before the erasure", 0).Err())
	must(rdb.Restore(ctx, "cache:acme:cust-77:q1", 0, snapshot).Err())

	audit := sys.Stack.Audit.(*auditlog.DirStore)
	// tick runs the schedule until want addenda of the request are stored. (The receipt can
	// be read a moment before its tasks are scheduled, so the first tick may find none due.)
	tick := func(want int) []auditlog.Addendum {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := sys.Aggregator.Tick(ctx); err != nil {
				t.Fatal(err)
			}
			ads, err := audit.AddendaOf(ctx, acc.RequestID)
			if err != nil {
				t.Fatal(err)
			}
			if len(ads) >= want {
				return ads
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d addenda, want %d", len(ads), want)
			}
		}
	}
	clk.Add(time.Minute)
	ads := tick(len(rc.Stores))
	if len(ads) != len(rc.Stores) {
		t.Fatalf("%d addenda after the first sweep, want one per store (%d)", len(ads), len(rc.Stores))
	}
	for _, a := range ads {
		want := auditlog.AddendumReverified
		if a.Stores[0].Store == "redis" {
			want = auditlog.AddendumReappeared
		}
		if a.Type != want || a.ReceiptID != rc.ReceiptID || a.Seq <= rc.Seq {
			t.Errorf("addendum of %s: %s (seq %d), want %s after the receipt (seq %d)", a.Stores[0].Store, a.Type, a.Seq, want, rc.Seq)
		}
		if a.Stores[0].Store == "redis" && a.Stores[0].Deleted != 2 {
			t.Errorf("REAPPEARED counts %d deleted, want the late write and the restored key", a.Stores[0].Deleted)
		}
	}
	if n, _ := rdb.Exists(ctx, "session:acme:cust-77:late", "cache:acme:cust-77:q1").Result(); n != 0 {
		t.Errorf("%d reappeared keys remain after the sweep", n)
	}
	if v, _ := rdb.Get(ctx, "session:acme:cust-8:1").Result(); v != "another customer" {
		t.Errorf("the other customer's key was touched: %q", v)
	}
	var reappeared []event.Reappeared
	for _, r := range readAll(t, sys, event.TopicReappeared) {
		var ev event.Reappeared
		must(sys.Stack.Registry.Decode(ctx, event.Reappear, r.Value, &ev))
		reappeared = append(reappeared, ev)
	}
	if len(reappeared) != 1 || reappeared[0].Store != "redis" || reappeared[0].Deleted != 2 || reappeared[0].RequestID != acc.RequestID {
		t.Fatalf("erasure.reappeared holds %+v, want one record for redis with 2 deleted", reappeared)
	}
	must(auditlog.VerifyChain(ctx, audit, tenant))
	if err := auditlog.VerifyChain(ctx, tamperedAddenda{audit}, tenant); !errors.Is(err, auditlog.ErrChainBroken) {
		t.Fatalf("VerifyChain with an altered addendum = %v, want ErrChainBroken", err)
	}

	// Past the last sweep (1h) and the retention (24h): the key is destroyed.
	clk.Add(time.Hour)
	tick(2 * len(rc.Stores)) // the second sweep: every store clean again
	clk.Add(25 * time.Hour)
	ads = tick(2*len(rc.Stores) + 1)
	if last := ads[len(ads)-1]; last.Type != auditlog.AddendumShredded {
		t.Fatalf("last addendum %s, want SHREDDED after the retention", last.Type)
	}
	must(auditlog.VerifyChain(ctx, audit, tenant))
	opened := 0
	for _, r := range readAll(t, sys, event.TopicRequested) {
		var req event.Requested
		must(sys.Stack.Registry.Decode(ctx, event.Request, r.Value, &req))
		if req.RequestID != acc.RequestID {
			continue
		}
		_, err := sys.Sealer.Identifiers(ctx, &req)
		if !errors.Is(err, envelope.ErrShredded) {
			t.Errorf("a %q record of erasure.requested opens after the retention: %v", req.Purpose, err)
		}
		opened++
	}
	if opened < 3 { // the request and its two sweeps
		t.Fatalf("%d records of the request on erasure.requested, want the request and its sweeps", opened)
	}
	for _, topic := range service.Topics {
		for _, r := range readAll(t, sys, topic) {
			for _, id := range []string{subj, session} {
				if bytes.Contains(r.Value, []byte(id)) || bytes.Contains(r.Key, []byte(id)) {
					t.Errorf("topic %s holds the identifier %q in the clear", topic, id)
				}
			}
		}
	}
}

// readAll reads every record of topic up to its end offsets.
func readAll(t *testing.T, sys *embedded.System, topic string) []*kgo.Record {
	t.Helper()
	return testenv.ReadTopic(t, sys.Stack.Broker.Brokers, topic)
}
