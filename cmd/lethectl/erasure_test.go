package main

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
)

func TestSubmitWaitJSON(t *testing.T) {
	tn := tenant(t, "acme")
	const subj, sess = "alice@example.com", "sess-alice-1"
	seeded := seedRedis(t, tn, subj, sess)
	r := lethectl(t, "submit", "--tenant", tn, "--subject", subj, "--session", sess, "--wait", "-o", "json")
	wantCode(t, r, exitOK)
	var rc event.Receipt
	decode(t, r, &rc)
	if rc.Status != event.ReceiptComplete || rc.TenantID != tn || rc.SubjectHash != sys.Key.Pseudonym(tn, subj) || rc.Hash == "" {
		t.Fatalf("receipt %+v", rc)
	}
	if len(rc.Stores) != len(sys.Inventory.Stores) {
		t.Fatalf("receipt has %d stores, inventory %d", len(rc.Stores), len(sys.Inventory.Stores))
	}
	var deleted int64
	for _, s := range rc.Stores {
		if s.Verification.Remaining != 0 {
			t.Errorf("store %s: %d remaining", s.Store, s.Verification.Remaining)
		}
		if s.Kind == "redis" {
			deleted += s.Deleted
		}
	}
	if deleted != int64(seeded) {
		t.Errorf("redis stores deleted %d keys, seeded %d", deleted, seeded)
	}
	for _, want := range []string{"accepted " + rc.RequestID, "waiting for 6 stores", "due in ", "archive", "NOTHING_FOUND", "DELETED", "COMPLETE: receipt " + rc.ReceiptID} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, r.stderr)
		}
	}
	noRawIDs(t, r, subj, sess)
}

func TestSubmitWaitTable(t *testing.T) {
	tn := tenant(t, "globex")
	const subj = "bob@example.com"
	r := lethectl(t, "submit", "--wait", "--tenant", tn, "--subject", "-", "--regulation", "LGPD")
	if r.code != exitUsage { // stdin is empty
		t.Fatalf("--subject - with empty stdin: %s", r)
	}
	r = invocation{stdin: subj + "\n"}.run(t, "submit", "--tenant", tn, "--subject", "-", "--regulation", "LGPD", "--wait")
	wantCode(t, r, exitOK)
	for _, want := range []string{"Status         COMPLETE", "Regulation     LGPD, scope SUBJECT", "Chain          seq 1, hash ", "STORE", "VERIFIED BY", "qdrant exact count by filter", "Audit log PII  false"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, r.stdout)
		}
	}
	noRawIDs(t, r, subj)
}

func TestStatusListReceipt(t *testing.T) {
	tn := tenant(t, "initech")
	const subj = "carol@example.com"
	r := lethectl(t, "submit", "--tenant", tn, "--subject", subj, "--idempotency-key", "k-carol", "-o", "json")
	wantCode(t, r, exitOK)
	var acc intake.Accepted
	decode(t, r, &acc)
	if !strings.HasPrefix(acc.RequestID, "er_") || acc.DueAt.IsZero() {
		t.Fatalf("accepted %+v", acc)
	}
	again := lethectl(t, "submit", "--tenant", tn, "--subject", subj, "--idempotency-key", "k-carol")
	wantCode(t, again, exitOK)
	if !strings.Contains(again.stdout, "accepted "+acc.RequestID) {
		t.Errorf("resubmission with the same key: %s", again)
	}

	var st intake.Status
	eventually(t, "the request to complete", func() bool {
		r := lethectl(t, "status", acc.RequestID, "-o", "json")
		decode(t, r, &st)
		return r.code == exitOK && st.State == intake.StateComplete
	})
	r = lethectl(t, "status", "--tenant", tn, "--key", "k-carol", "--wait", "-o", "json")
	wantCode(t, r, exitOK)
	var waited event.Receipt
	decode(t, r, &waited)
	if waited.RequestID != acc.RequestID || waited.Status != event.ReceiptComplete {
		t.Errorf("status --key --wait printed %+v", waited)
	}
	r = lethectl(t, "status", acc.RequestID)
	wantCode(t, r, exitOK)
	for _, want := range []string{"State       COMPLETE", "(met)", "Receipt     " + st.ReceiptID, "STORE", "archive"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}

	r = lethectl(t, "receipt", acc.RequestID)
	wantCode(t, r, exitOK)
	var rc event.Receipt
	decode(t, r, &rc)
	if rc.ReceiptID != st.ReceiptID || rc.RequestID != acc.RequestID {
		t.Errorf("receipt %+v for status %+v", rc, st)
	}
	r = lethectl(t, "receipt", "--summary", acc.RequestID)
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "Receipt        "+rc.ReceiptID) || !strings.Contains(r.stdout, "Previous       none") {
		t.Errorf("summary:\n%s", r.stdout)
	}

	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--tenant", tn}, 1},
		{[]string{"--tenant", tn, "--state", "complete"}, 1},
		{[]string{"--tenant", tn, "--state", "FAILED"}, 0},
		{[]string{"--tenant", tn, "--overdue"}, 0},
		{[]string{"--tenant", uniqueTenant("nobody")}, 0},
	} {
		r := lethectl(t, append([]string{"list", "-o", "json"}, tc.args...)...)
		wantCode(t, r, exitOK)
		var out struct{ Requests []intake.Status }
		decode(t, r, &out)
		if len(out.Requests) != tc.want || tc.want == 1 && out.Requests[0].RequestID != acc.RequestID {
			t.Errorf("list %v: %d requests, want %d: %s", tc.args, len(out.Requests), tc.want, r.stdout)
		}
	}
	r = lethectl(t, "list", "--tenant", tn)
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, acc.RequestID) || !strings.Contains(r.stdout, "COMPLETE") || !strings.Contains(r.stdout, "6/6") {
		t.Errorf("list table:\n%s", r.stdout)
	}
	noRawIDs(t, r, subj)
}

// TestFailedStoreRetry makes the archive store fail (its bucket does not exist), follows
// the request to the failure, fixes the cause and re-drives the store to a receipt.
func TestFailedStoreRetry(t *testing.T) {
	tn := uniqueTenant("lapsed") // no archive bucket yet
	const subj, sess = "dave@example.com", "sess-dave"
	r := lethectl(t, "submit", "--tenant", tn, "--subject", subj, "--session", sess, "--wait", "-o", "json")
	wantCode(t, r, exitProblem)
	var st intake.Status
	decode(t, r, &st)
	if st.State != intake.StateFailed || !strings.Contains(r.stderr, "archive") || !strings.Contains(r.stderr, "lethectl retry "+st.RequestID) {
		t.Fatalf("failed request: %s", r)
	}
	id := st.RequestID
	wantCode(t, lethectl(t, "status", id), exitProblem)
	r = lethectl(t, "receipt", id)
	wantCode(t, r, exitNotFound)
	if !strings.Contains(r.stderr, "no receipt yet: it is FAILED") {
		t.Errorf("receipt of a failed request: %s", r)
	}
	r = lethectl(t, "list", "--tenant", tn, "--state", "FAILED", "-o", "json")
	if !strings.Contains(r.stdout, id) {
		t.Errorf("list --state FAILED: %s", r)
	}

	r = lethectl(t, "retry", id, "--subject", "someone-else", "--store", "archive")
	wantCode(t, r, exitUsage)
	if !strings.Contains(r.stderr, "do not match") {
		t.Errorf("retry with other identifiers: %s", r)
	}
	createArchive(t, tn) // the cause is fixed: the bucket exists
	r = lethectl(t, "retry", id, "--subject", subj, "--session", sess, "--store", "archive", "--wait", "-o", "json")
	wantCode(t, r, exitOK)
	var rc event.Receipt
	decode(t, r, &rc)
	if rc.Status != event.ReceiptComplete || rc.RequestID != id {
		t.Fatalf("receipt after retry %+v", rc)
	}
	if !strings.Contains(r.stderr, "attempt 2") {
		t.Errorf("progress of the retry lacks the attempt:\n%s", r.stderr)
	}
	noRawIDs(t, r, subj, sess)

	r = lethectl(t, "retry", id, "--subject", subj)
	wantCode(t, r, exitUsage)
	if !strings.Contains(r.stderr, "the request is complete") {
		t.Errorf("retry of a complete request: %s", r)
	}
}

func TestNotFoundAndUsage(t *testing.T) {
	for _, args := range [][]string{{"status", "er_missing"}, {"receipt", "er_missing"}, {"retry", "er_missing", "--subject", "x"}} {
		r := lethectl(t, args...)
		wantCode(t, r, exitNotFound)
	}
	for _, args := range [][]string{
		{}, {"bogus"}, {"dlq"}, {"dlq", "bogus"}, {"status"}, {"status", "a", "b"}, {"submit", "--subject", "x"},
		{"submit", "--tenant", "t"}, {"submit", "--tenant", "t", "--subject", "x", "--scope", "WORLD"}, {"submit", "--nope"},
		{"list", "--state", "DONE"}, {"list", "--limit", "0"}, {"-o", "xml", "list"}, {"list", "--server", "ftp://x"},
		{"inventory", "validate"}, {"dlq", "replay"}, {"audit", "replay", "extra"},
		{"submit", "--tenant", "bad tenant!", "--subject", "x"}, // refused by the server (400)
	} {
		r := lethectl(t, args...)
		if r.code != exitUsage {
			t.Errorf("%q: want exit 2, got %s", args, r)
		}
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"help", "dlq", "replay"}, {"submit", "-h"}, {"dlq", "--help"}} {
		r := lethectl(t, args...)
		wantCode(t, r, exitOK)
		if !strings.Contains(r.stdout, "Exit codes") && !strings.Contains(r.stdout, "Commands:") {
			t.Errorf("%q: help:\n%s", args, r.stdout)
		}
	}
	for _, cmd := range commands {
		r := lethectl(t, append(strings.Fields(cmd.name), "--help")...)
		wantCode(t, r, exitOK)
		for _, want := range []string{"Usage:", "Examples:", "Exit codes:"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s --help lacks %q", cmd.name, want)
			}
		}
	}
}

func TestAuthentication(t *testing.T) {
	secured, opsToken, acmeToken := securedSystem(t)
	at := func(token string, args ...string) result {
		return invocation{env: map[string]string{"LETHE_SERVER": secured.BaseURL, "LETHE_TOKEN": token}}.run(t, args...)
	}
	r := at("", "list")
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "requires a bearer token (401 unauthenticated): pass --token or set LETHE_TOKEN") {
		t.Errorf("no token: %s", r)
	}
	r = at("lt_not-a-token", "list")
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "refused the bearer token") || strings.Contains(r.stderr, "lt_not-a-token") {
		t.Errorf("unknown token: %s", r)
	}
	r = at(acmeToken, "submit", "--tenant", "globex", "--subject", "x")
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "forbidden (403)") {
		t.Errorf("other tenant: %s", r)
	}
	wantCode(t, at("", "--token", opsToken, "list"), exitOK)
	r = at(opsToken, "status", "er_missing")
	wantCode(t, r, exitNotFound)
}

// TestStatusByKeyShowsARejectedRecord: a malformed record on erasure.intake is found by
// its tenant and idempotency key, REJECTED with the reason that names the field.
func TestStatusByKeyShowsARejectedRecord(t *testing.T) {
	tn := tenant(t, "umbrella")
	cl, err := kgo.NewClient(kgo.SeedBrokers(sys.Stack.Broker.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	bad := `{"tenant_id":"` + tn + `","subject_id":"dave@example.com","session_id":"s-1","regulation":"GDPR","idempotency_key":"k-dave"}`
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: event.TopicIntake, Value: []byte(bad)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var r result
	eventually(t, "the record's rejection", func() bool {
		r = lethectl(t, "status", "--tenant", tn, "--key", "k-dave")
		return r.code == exitProblem
	})
	for _, want := range []string{"REJECTED", `unknown field "session_id"`, "session_ids"} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("status by key lacks %q:\n%s", want, r)
		}
	}
	noRawIDs(t, r, "dave@example.com")
	wantCode(t, lethectl(t, "status", "--tenant", tn, "--key", "k-nobody"), exitNotFound)
	wantCode(t, lethectl(t, "status", "--key", "k-dave"), exitUsage)
}
