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
	"github.com/lethe-erasure/lethe/pkg/auth"
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

// TestDLQListReplay dead-letters intake records (one undecodable, one refused for its
// body, one with a forged token) and a store report that does not decode, lists them and
// replays them. The report is republished over the brokers and dead-lettered again,
// marked as replayed and by whom. The intake records go through the intake API with the
// operator's token: the redacted ones are refused with the reason, the other is submitted
// as the operator's request.
func TestDLQListReplay(t *testing.T) {
	const shopToken = "lt_shopbot-token-0123456789abcdefghijklmnopqr"
	const opsToken = "lt_operator-token-0123456789abcdefghijklmnopq"
	authn, err := auth.New(auth.Config{Tokens: []auth.Token{
		{Name: "shopbot", SHA256: auth.HashToken(shopToken), Tenants: []string{"acme"}},
		{Name: "ops", SHA256: auth.HashToken(opsToken), Tenants: []string{auth.Wildcard}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// A system of its own: the counts below hold whatever other tests and runs dead-letter.
	own, err := embedded.Start(context.Background(), embedded.Options{Key: testKey(), DataDir: t.TempDir(), Auth: authn})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Stop()
	env := map[string]string{"LETHE_TOKEN": opsToken, "USER": "tester"}
	in := func(stdin string, tty bool) invocation { return invocation{stdin: stdin, tty: tty, sys: own, env: env} }
	lethectl := func(t *testing.T, args ...string) result { return in("", false).run(t, args...) }
	prod, err := own.Stack.Broker.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	intakeRecord := func(token, body string) *kgo.Record {
		return &kgo.Record{Topic: event.TopicIntake, Key: []byte("acme"), Value: []byte(body), Headers: []kgo.RecordHeader{
			{Key: "authorization", Value: []byte("Bearer " + token)}, {Key: "content-type", Value: []byte("application/json")}}}
	}
	recs := []*kgo.Record{
		{Topic: event.TopicIntake, Key: []byte("dlq-test"), Value: []byte("not an avro record")},
		intakeRecord(shopToken, `{"tenant_id":"acme","subject_id":"zoe@example.com","regulation":"NOPE","idempotency_key":"order-1"}`),
		intakeRecord("lt_forged-token-000000000000000000000000", `{"tenant_id":"acme","scope":"TENANT","regulation":"GDPR","idempotency_key":"offboard-1"}`),
		{Topic: event.TopicStoreDone, Key: []byte("er_junk"), Value: []byte("not a store report")},
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	list := func(topic string) []dlq.Entry {
		r := lethectl(t, "dlq", "list", topic, "-o", "json")
		wantCode(t, r, exitOK)
		var out dlqListing
		decode(t, r, &out)
		if len(out) != 1 || out[0].Topic != topic+".dlq" {
			t.Fatalf("dlq list: %s", r)
		}
		return out[0].Entries
	}
	eventually(t, "the records to be dead-lettered", func() bool {
		return len(list(event.TopicIntake)) == 3 && len(list(event.TopicStoreDone)) == 1
	})
	for _, e := range list(event.TopicIntake) {
		switch {
		case e.SourceTopic != event.TopicIntake || e.Reason == "" || e.At.IsZero():
			t.Errorf("entry %+v", e)
		case e.Key == "dlq-test" && (!e.Redacted || e.Principal != "" || e.Event != nil):
			t.Errorf("undecodable record: %+v, want redacted to its digest, no principal", e)
		case e.Key == "acme" && e.Principal == "shopbot" && !e.Redacted:
			t.Errorf("invalid record of shopbot: %+v, want redacted", e)
		case e.Key == "acme" && e.Principal == "" && (e.Redacted || !strings.Contains(e.Reason, "unauthenticated")):
			t.Errorf("record with a forged token: %+v, want not redacted, unauthenticated", e)
		}
	}

	r := lethectl(t, "dlq", "list")
	wantCode(t, r, exitOK)
	for _, want := range []string{"erasure.intake.dlq: 3 records", "erasure.requested.dlq: 0 records", "erasure.store.done.dlq: 1 records",
		"erasure.intake/", "[producer shopbot]", "[redacted: not replayable]"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dlq list lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, shopToken) || strings.Contains(r.stdout, "zoe@") {
		t.Errorf("dlq list shows a token or an identifier:\n%s", r.stdout)
	}
	wantCode(t, lethectl(t, "dlq", "list", "no.such.topic"), exitNotFound)

	wantCode(t, lethectl(t, "dlq", "replay", "erasure.intake.dlq"), exitUsage) // no terminal, no --yes
	r = in("n\n", true).run(t, "dlq", "replay", "erasure.intake.dlq")
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "3 records of erasure.intake.dlq match") || !strings.Contains(r.stderr, "nothing replayed") {
		t.Errorf("declined replay: %s", r)
	}
	r = lethectl(t, "dlq", "replay", "erasure.intake.dlq", "--reason", "no such reason", "--yes")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "replayed 0 records") {
		t.Errorf("replay of nothing: %s", r)
	}
	// The intake API needs the operator's token.
	r = invocation{sys: own, env: map[string]string{"USER": "tester"}}.run(t, "dlq", "replay", "erasure.intake", "--yes")
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "bearer token") {
		t.Errorf("replay without a token: %s", r)
	}

	r = lethectl(t, "dlq", "replay", "erasure.intake", "--yes", "-o", "json")
	wantCode(t, r, exitOK)
	var res dlq.Result
	decode(t, r, &res)
	if res.Replayed != 1 || len(res.Refused) != 2 {
		t.Fatalf("replay of the intake dead letters: %s", r)
	}
	for _, ref := range res.Refused {
		if !strings.Contains(ref.Reason, "redacted") || !strings.Contains(ref.Reason, "producer must submit") {
			t.Errorf("refusal %+v, want the reason", ref)
		}
	}
	r = in("y\n", true).run(t, "dlq", "replay", "erasure.intake")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "replayed 0 records from erasure.intake.dlq") || !strings.Contains(r.stdout, "refused 2 records:") ||
		strings.Count(r.stdout, "the dead letter was redacted") != 2 {
		t.Errorf("second replay of the intake dead letters: %s", r)
	}
	eventually(t, "the offboarding to be submitted as the operator's", func() bool {
		r := lethectl(t, "list", "--tenant", "acme", "-o", "json")
		return r.code == exitOK && strings.Count(r.stdout, `"request_id"`) == 1
	})
	if n := len(list(event.TopicIntake)); n != 3 {
		t.Errorf("%d intake dead letters after the replays, want the 3 (nothing failed again)", n)
	}

	e := list(event.TopicStoreDone)[0]
	r = lethectl(t, "dlq", "replay", "erasure.store.done", "--yes")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "replayed 1 records from erasure.store.done.dlq") {
		t.Errorf("replay: %s", r)
	}
	eventually(t, "the replayed record to be dead-lettered again", func() bool { return len(list(event.TopicStoreDone)) == 2 })
	again := list(event.TopicStoreDone)[1]
	if again.ReplayedFrom != fmt.Sprintf("erasure.store.done.dlq/%d/%d", e.Partition, e.Offset) || again.ReplayedBy != "lethectl:tester" || again.Key != "er_junk" {
		t.Errorf("dead-lettered again: %+v", again)
	}
	r = lethectl(t, "dlq", "replay", "erasure.store.done", "--yes", "-o", "json")
	wantCode(t, r, exitOK)
	decode(t, r, &res)
	if res.Replayed != 1 { // only the new dead-letter record: the first was replayed already
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
