package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/replay"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// TestReapplyAfterRestore completes two erasures of one tenant; the first one's retention
// passes (fake clock), so its data key is destroyed. Then Redis is "restored": both
// subjects' keys are back. reapply re-runs the second erasure on redis, which erases the
// restored keys (REAPPEARED, recorded as an addendum), and lists the first as shredded.
// receipt shows the addenda; verify-chain checks them.
func TestReapplyAfterRestore(t *testing.T) {
	clk := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
	cfg := embedded.DefaultConfig()
	cfg.Aggregator.Sweeps, cfg.Aggregator.Retain, cfg.Aggregator.SweepEvery = aggregator.Sweeps{time.Minute}, aggregator.Days(time.Hour), time.Hour
	own, err := embedded.Start(context.Background(), embedded.Options{Key: testKey(), DataDir: t.TempDir(), Config: &cfg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Stop()
	run := func(t *testing.T, args ...string) result { return invocation{sys: own}.run(t, args...) }
	ctx := context.Background()
	const tn = "umbrella"
	seed := func(subj string) {
		t.Helper()
		for _, k := range []string{"session:" + tn + ":" + subj + ":1", "cache:" + tn + ":" + subj + ":q"} {
			if err := own.Stack.Redis.Set(ctx, k, "turn", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	since := clk.Now().Add(-time.Second).Format(time.RFC3339)
	erase := func(subj string) event.Receipt {
		t.Helper()
		seed(subj)
		r := run(t, "submit", "--tenant", tn, "--subject", subj, "--wait", "-o", "json")
		wantCode(t, r, exitOK)
		var rc event.Receipt
		decode(t, r, &rc)
		if rc.IdentifiersShredAt == nil {
			t.Fatalf("receipt without identifiers_shred_at: %s", r)
		}
		return rc
	}
	old := erase("old-customer")
	clk.Add(2 * time.Hour) // past its sweep and retention
	audit := own.Stack.Audit.(auditlog.Addenda)
	eventually(t, "the old request's key to be shredded", func() bool {
		// The receipt can be read a moment before its tasks are scheduled: tick until done.
		if _, err := own.Aggregator.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		_, err := audit.GetAddendum(ctx, old.RequestID+"/shredded")
		return err == nil
	})
	fresh := erase("new-customer")

	seed("old-customer") // the restore brings both back
	seed("new-customer")
	r := run(t, "reapply", "--tenant", tn, "--store", "redis", "--since", since, "-o", "json")
	wantCode(t, r, exitOK)
	var out struct {
		Requests []reapplied `json:"requests"`
	}
	decode(t, r, &out)
	got := map[string]reapplied{}
	for _, l := range out.Requests {
		got[l.RequestID] = l
	}
	if len(got) != 2 || got[old.RequestID].Outcome != "shredded" || got[old.RequestID].ShreddedAt.IsZero() {
		t.Fatalf("reapply listed %+v, want the old request as shredded", out.Requests)
	}
	if l := got[fresh.RequestID]; l.Outcome != auditlog.AddendumReappeared || l.Deleted != 2 {
		t.Fatalf("reapply of the new request: %+v, want REAPPEARED with the 2 restored keys", l)
	}
	for _, want := range []string{"re-applying 1/1 " + fresh.RequestID, "shredded  " + old.RequestID, "reported  1/1"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, r.stderr)
		}
	}
	if n, _ := own.Stack.Redis.Exists(ctx, "session:"+tn+":new-customer:1", "cache:"+tn+":new-customer:q").Result(); n != 0 {
		t.Errorf("%d restored keys of the re-applied request remain", n)
	}
	noRawIDs(t, r, "old-customer", "new-customer")

	var ads []auditlog.Addendum
	eventually(t, "the re-apply's addendum", func() bool {
		ads, _ = audit.AddendaOf(ctx, fresh.RequestID)
		for _, a := range ads {
			if a.Purpose == event.PurposeReapply && a.Type == auditlog.AddendumReappeared && a.Stores[0].Store == "redis" {
				return true
			}
		}
		return false
	})
	r = run(t, "receipt", fresh.RequestID, "--summary")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "REAPPEARED") || !strings.Contains(r.stdout, "reapply-") || !strings.Contains(r.stdout, "sealed until") {
		t.Errorf("receipt summary lacks the addenda:\n%s", r.stdout)
	}
	r = run(t, "receipt", fresh.RequestID)
	wantCode(t, r, exitOK)
	var withAddenda receiptWithAddenda
	decode(t, r, &withAddenda)
	if withAddenda.Hash != fresh.Hash || len(withAddenda.Addenda) == 0 {
		t.Errorf("receipt JSON: hash %s, %d addenda; want the receipt with its addenda", withAddenda.Hash, len(withAddenda.Addenda))
	}
	r = run(t, "audit", "verify-chain", "--tenant", tn)
	wantCode(t, r, exitOK)
	if fields := strings.Fields(strings.Split(r.stdout, "\n")[1]); len(fields) != 4 || fields[1] != "2" || fields[2] == "0" || fields[3] != "ok" {
		t.Errorf("verify-chain:\n%s", r.stdout)
	}
}

// With every topic framed for the registry, reapply publishes its re-drive in the
// registry framing (LETHE_FRAMING, LETHE_SCHEMA_REGISTRY_URL as the services read them)
// and follows the registry-framed reports to their outcome; audit replay decodes every
// record of the trail.
func TestReapplyRegistryFramed(t *testing.T) {
	framings, err := schemareg.ParseFramings("registry")
	if err != nil {
		t.Fatal(err)
	}
	clk := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
	cfg := embedded.DefaultConfig()
	cfg.Framing.Framings = framings
	cfg.Aggregator.Sweeps, cfg.Aggregator.Retain, cfg.Aggregator.SweepEvery = aggregator.Sweeps{time.Hour}, aggregator.Days(time.Hour), time.Hour
	own, err := embedded.Start(context.Background(), embedded.Options{Key: testKey(), DataDir: t.TempDir(), Config: &cfg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Stop()
	env := map[string]string{"LETHE_FRAMING": "registry", "LETHE_SCHEMA_REGISTRY_URL": "http://" + own.Stack.Addrs.Registry}
	run := func(t *testing.T, args ...string) result { return invocation{sys: own, env: env}.run(t, args...) }
	ctx := context.Background()
	const tn, subj = "framed", "framed-customer"
	keys := []string{"session:" + tn + ":" + subj + ":1", "cache:" + tn + ":" + subj + ":q"}
	seed := func() {
		t.Helper()
		for _, k := range keys {
			if err := own.Stack.Redis.Set(ctx, k, "turn", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	since := clk.Now().Add(-time.Second).Format(time.RFC3339)
	seed()
	r := run(t, "submit", "--tenant", tn, "--subject", subj, "--wait", "-o", "json")
	wantCode(t, r, exitOK)
	var rc event.Receipt
	decode(t, r, &rc)

	seed() // the restore
	r = run(t, "reapply", "--tenant", tn, "--store", "redis", "--since", since, "-o", "json")
	wantCode(t, r, exitOK)
	var out struct {
		Requests []reapplied `json:"requests"`
	}
	decode(t, r, &out)
	if len(out.Requests) != 1 || out.Requests[0].Outcome != auditlog.AddendumReappeared || out.Requests[0].Deleted != 2 {
		t.Fatalf("reapply: %+v, want REAPPEARED with the 2 restored keys", out.Requests)
	}
	reapplies := 0
	for _, rec := range testenv.ReadTopic(t, own.Stack.Broker.Brokers, event.TopicRequested) {
		if rec.Value[0] != 0 {
			t.Errorf("a record on %s starts %#x, want the registry framing", event.TopicRequested, rec.Value[0])
		}
		var req event.Requested
		if err := own.Stack.Registry.Decode(ctx, event.Request, rec.Value, &req); err != nil {
			t.Fatal(err)
		}
		if req.Purpose == event.PurposeReapply && req.RequestID == rc.RequestID {
			reapplies++
		}
	}
	if reapplies != 1 {
		t.Errorf("%d re-apply records on %s, want 1", reapplies, event.TopicRequested)
	}

	var rep struct {
		Records map[string]int
		replay.Report
	}
	eventually(t, "audit replay without findings", func() bool {
		r := run(t, "audit", "replay", "-o", "json")
		decode(t, r, &rep)
		return r.code == exitOK
	})
	if rep.Undecodable != 0 || rep.Records[event.TopicCompleted] < 1 || rep.Records[event.TopicStoreDone] < 1 {
		t.Errorf("audit replay report %+v, want every record decoded", rep)
	}
}
