package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/dlq"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/replay"
)

type dlqListing []struct {
	Topic   string
	Entries []dlq.Entry
}

// TestDLQListReplay produces a record the intake consumer cannot decode, finds it on
// erasure.intake.dlq, replays it and finds it dead-lettered again, marked as replayed.
func TestDLQListReplay(t *testing.T) {
	// A system of its own: the counts below hold whatever other tests and runs dead-letter.
	own, err := embedded.Start(context.Background(), embedded.Options{Key: testKey(), DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Stop()
	in := func(stdin string, tty bool) invocation { return invocation{stdin: stdin, tty: tty, sys: own} }
	lethectl := func(t *testing.T, args ...string) result { return in("", false).run(t, args...) }
	prod, err := own.Stack.Broker.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	bad := &kgo.Record{Topic: event.TopicIntake, Key: []byte("dlq-test"), Value: []byte("not an avro record")}
	if err := prod.ProduceSync(context.Background(), bad).FirstErr(); err != nil {
		t.Fatal(err)
	}
	list := func() []dlq.Entry {
		r := lethectl(t, "dlq", "list", "erasure.intake", "-o", "json")
		wantCode(t, r, exitOK)
		var out dlqListing
		decode(t, r, &out)
		if len(out) != 1 || out[0].Topic != "erasure.intake.dlq" {
			t.Fatalf("dlq list: %s", r)
		}
		return out[0].Entries
	}
	eventually(t, "the record to be dead-lettered", func() bool { return len(list()) == 1 })
	e := list()[0]
	if e.SourceTopic != event.TopicIntake || e.Reason == "" || e.Key != "dlq-test" || e.At.IsZero() || e.Event != nil {
		t.Fatalf("entry %+v", e)
	}

	r := lethectl(t, "dlq", "list")
	wantCode(t, r, exitOK)
	for _, want := range []string{"erasure.intake.dlq: 1 records", "erasure.requested.dlq: 0 records", "erasure.store.done.dlq: 0 records", "erasure.intake/", e.Reason} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dlq list lacks %q:\n%s", want, r.stdout)
		}
	}
	wantCode(t, lethectl(t, "dlq", "list", "no.such.topic"), exitNotFound)

	wantCode(t, lethectl(t, "dlq", "replay", "erasure.intake.dlq"), exitUsage) // no terminal, no --yes
	r = in("n\n", true).run(t, "dlq", "replay", "erasure.intake.dlq")
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "1 records of erasure.intake.dlq match") || !strings.Contains(r.stderr, "nothing replayed") {
		t.Errorf("declined replay: %s", r)
	}
	r = lethectl(t, "dlq", "replay", "erasure.intake.dlq", "--reason", "no such reason", "--yes")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "replayed 0 records") {
		t.Errorf("replay of nothing: %s", r)
	}
	r = in("y\n", true).run(t, "dlq", "replay", "erasure.intake.dlq", "--reason", e.Reason)
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "replayed 1 records from erasure.intake.dlq") {
		t.Errorf("replay: %s", r)
	}
	eventually(t, "the replayed record to be dead-lettered again", func() bool { return len(list()) == 2 })
	again := list()[1]
	// The intake redacts what it dead-letters (raw identifiers may hide in the bytes), so
	// the replayed record is the redaction, refused again.
	if again.ReplayedFrom != fmt.Sprintf("erasure.intake.dlq/%d/%d", e.Partition, e.Offset) || again.Key != "dlq-test" || !strings.Contains(again.Reason, "malformed record") {
		t.Errorf("dead-lettered again: %+v", again)
	}
	r = lethectl(t, "dlq", "replay", "erasure.intake", "--reason", "malformed record", "--yes", "-o", "json")
	wantCode(t, r, exitOK)
	var n struct{ Replayed int }
	decode(t, r, &n)
	if n.Replayed != 1 { // only the new dead-letter record: the first was replayed already
		t.Errorf("second replay: %s", r)
	}
}

func TestAuditReplayAndChain(t *testing.T) {
	tn := tenant(t, "umbrella")
	for _, subj := range []string{"erin@example.com", "frank@example.com"} {
		wantCode(t, lethectl(t, "submit", "--tenant", tn, "--subject", subj, "--wait"), exitOK)
	}
	// Wait until nothing is in flight: a receipt being published shows as a finding.
	eventually(t, "no request in flight", func() bool {
		for _, state := range []string{intake.StatePending, intake.StateInProgress} {
			if r := lethectl(t, "list", "--state", state, "-o", "json"); r.code != exitOK || strings.Contains(r.stdout, "er_") {
				return false
			}
		}
		return true
	})
	var rep struct {
		Records map[string]int
		replay.Report
	}
	eventually(t, "audit replay without findings", func() bool {
		r := lethectl(t, "audit", "replay", "-o", "json")
		decode(t, r, &rep)
		return r.code == exitOK
	})
	if rep.Requests < 2 || rep.Stored < 2 || rep.Complete < rep.Stored || rep.Records[event.TopicCompleted] < 2 || len(rep.Findings) != 0 {
		t.Errorf("report %+v", rep)
	}
	r := lethectl(t, "audit", "replay")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "no findings") {
		t.Errorf("audit replay:\n%s", r.stdout)
	}

	r = lethectl(t, "audit", "verify-chain", "--tenant", tn)
	wantCode(t, r, exitOK)
	if fields := strings.Fields(strings.Split(r.stdout, "\n")[1]); len(fields) != 4 || fields[0] != tn || fields[1] != "2" || fields[2] != "0" || fields[3] != "ok" {
		t.Errorf("verify-chain:\n%s", r.stdout)
	}
	r = lethectl(t, "audit", "verify-chain", "-o", "json")
	wantCode(t, r, exitOK)
	var chains struct{ Tenants []chainResult }
	decode(t, r, &chains)
	found := false
	for _, c := range chains.Tenants {
		found = found || c.Tenant == tn && c.Receipts == 2 && c.Result == "ok"
		if c.Result == "broken" {
			t.Errorf("chain %+v", c)
		}
	}
	if !found {
		t.Errorf("verify-chain of every tenant misses %s: %s", tn, r.stdout)
	}
}

// TestAuditBrokenChain runs the audit commands on an audit store holding a forged receipt.
func TestAuditBrokenChain(t *testing.T) {
	forged, err := auditlog.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := forged.PutRequest(ctx, auditlog.Request{RequestID: "er_forged", TenantID: "mallory", Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := forged.PutReceipt(ctx, event.Receipt{ReceiptID: "rc_forged", RequestID: "er_forged", TenantID: "mallory", Status: "COMPLETE", Seq: 1, Hash: "00"}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) result {
		brokers := sys.Stack.Broker
		var out, errOut strings.Builder
		c := &cli{getenv: func(string) string { return "" }, stdout: &out, stderr: &errOut, audit: forged, brokers: &brokers}
		code := c.run(ctx, args)
		return result{code: code, stdout: out.String(), stderr: errOut.String()}
	}
	r := run("audit", "verify-chain")
	wantCode(t, r, exitProblem)
	if !strings.Contains(r.stdout, "mallory") || !strings.Contains(r.stdout, "broken") || !strings.Contains(r.stderr, "1 of 1 receipt chains broken") {
		t.Errorf("verify-chain: %s", r)
	}
	r = run("audit", "replay")
	wantCode(t, r, exitProblem)
	for _, want := range []string{string(replay.KindNoEvents), string(replay.KindChainBroken), "er_forged"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("audit replay lacks %q: %s", want, r)
		}
	}

	// Without an injected store the directory must hold one.
	c := &cli{getenv: func(string) string { return "" }, stdout: &strings.Builder{}, stderr: &strings.Builder{}}
	wantCode(t, result{code: c.run(ctx, []string{"audit", "verify-chain"})}, exitUsage)
	wantCode(t, result{code: c.run(ctx, []string{"audit", "verify-chain", "--audit-dir", t.TempDir()})}, exitNotFound)
}

func TestInventoryValidate(t *testing.T) {
	ref := filepath.Join("..", "..", "deploy", "inventory.yaml")
	r := lethectl(t, "inventory", "validate", ref)
	wantCode(t, r, exitOK)
	for _, want := range []string{"valid, version 2026-11-30.1, 5 stores", "qdrant     qdrant", "langgraph  redis", "audit_log  audit_log", "locators are checked by each kind's deleter at start"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("validate lacks %q:\n%s", want, r.stdout)
		}
	}

	broken := filepath.Join(t.TempDir(), "broken.yaml")
	doc := `version: "x1"
stores:
  - name: qdrant
    kind: qdrant
    locators: {collections: ["c_{tenant}"], subject_fields: [customer_id]}
  - name: qdrant
    kind: mongodb
  - name: Cache
    kind: redis
  - name: tickets
`
	if err := os.WriteFile(broken, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	r = lethectl(t, "inventory", "validate", broken, "-o", "json")
	wantCode(t, r, exitProblem)
	var res inventoryResult
	decode(t, r, &res)
	all := strings.Join(res.Errors, "\n")
	if res.Valid || len(res.Errors) != 3 || !strings.Contains(all, "duplicate name") || !strings.Contains(all, `"Cache": name must match`) || !strings.Contains(all, `"tickets": kind is empty`) {
		t.Errorf("broken inventory: %s", r)
	}
	r = lethectl(t, "inventory", "validate", broken)
	wantCode(t, r, exitProblem)
	if !strings.Contains(r.stdout, "invalid, ") || !strings.Contains(r.stdout, "  - ") {
		t.Errorf("broken inventory table: %s", r)
	}
	wantCode(t, lethectl(t, "inventory", "validate", filepath.Join(t.TempDir(), "missing.yaml")), exitNotFound)
}
