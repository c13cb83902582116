package intake_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/dlq"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// deadLettering runs the intake's consumer on erasure.intake, as the service does (the
// handler and the redaction of dead letters), until the test ends, and serves the
// dead-letter endpoints.
func (e *env) deadLettering(t *testing.T) broker.Config {
	t.Helper()
	brokers := broker.Config{Brokers: e.addrs}
	adm := kadm.NewClient(testenv.Producer(t, brokers))
	if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, event.TopicIntake, event.DLQ(event.TopicIntake)); err != nil {
		t.Fatal(err)
	}
	e.svc.DeadLetters = &intake.DeadLetters{Brokers: brokers, Topics: []string{event.DLQ(event.TopicIntake)}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- consumer.Run(ctx, consumer.Config{Broker: brokers, Group: "lethe-intake", Topics: []string{event.TopicIntake}, Redact: e.svc.Redact},
			e.svc.HandleIntake)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return brokers
}

// An intake record refused for its body is dead-lettered redacted, without the
// producer's token, naming the producer; a replay of it from the console is refused
// with the reason (it would erase the placeholder under the producer's idempotency key),
// and the producer's corrected resubmission is accepted. A dead letter without
// identifiers is replayed as the replaying operator's request, through the intake's
// checks, not written back to erasure.intake.
func TestReplayOfIntakeDeadLetters(t *testing.T) {
	e := secured(t)
	e.svc.Limiter = nil
	ctx := context.Background()
	brokers := e.deadLettering(t)
	const forged = "lt_forged-token-000000000000000000000000"
	record := func(token, body string) *kgo.Record {
		return &kgo.Record{Topic: event.TopicIntake, Key: []byte("acme"), Value: []byte(body), Headers: []kgo.RecordHeader{
			{Key: "authorization", Value: []byte("Bearer " + token)}, {Key: "content-type", Value: []byte("application/json")}}}
	}
	wrong := record(acmeToken, `{"tenant_id":"acme","subject_id":"`+subj+`","regulation":"NOPE","idempotency_key":"order-7"}`)
	offboard := record(forged, `{"tenant_id":"acme","scope":"TENANT","regulation":"GDPR","idempotency_key":"offboard-1"}`)
	if err := testenv.Producer(t, brokers).ProduceSync(ctx, wrong, offboard).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var letters []*kgo.Record
	for deadline := time.Now().Add(15 * time.Second); len(letters) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d dead letters after 15 s, want 2", len(letters))
		}
		letters = testenv.ReadTopic(t, brokers.Brokers, event.DLQ(event.TopicIntake))
	}
	for i, d := range letters {
		var principal, redacted string
		for _, part := range append([][]byte{d.Key, d.Value}, headerParts(d)...) {
			for _, secret := range []string{acmeToken, forged, "Bearer", subj} {
				if bytes.Contains(part, []byte(secret)) {
					t.Errorf("dead letter %d holds %q", i, secret)
				}
			}
		}
		for _, h := range d.Headers {
			switch h.Key {
			case "authorization":
				t.Errorf("dead letter %d keeps the authorization header", i)
			case consumer.HeaderPrincipal:
				principal = string(h.Value)
			case consumer.HeaderRedacted:
				redacted = string(h.Value)
			}
		}
		if want := map[int][2]string{0: {"shopbot", "true"}, 1: {"", ""}}[i]; principal != want[0] || redacted != want[1] {
			t.Errorf("dead letter %d: principal %q, redacted %q; want %q, %q", i, principal, redacted, want[0], want[1])
		}
	}

	replay := func(d *kgo.Record, token string) (int, []byte) {
		return e.do(t, "POST", "/v1/dead-letters/replay", fmt.Sprintf(`{"topic":%q,"partition":%d,"offset":%d}`, d.Topic, d.Partition, d.Offset), bearer(token)...)
	}
	code, resp := replay(letters[0], opsToken)
	if msg := decode[map[string]string](t, resp)["error"]; code != http.StatusUnprocessableEntity || !strings.Contains(msg, "redacted") || !strings.Contains(msg, "producer must submit") {
		t.Errorf("replay of the redacted dead letter: %d %s, want 422 with the reason", code, resp)
	}
	if n := len(e.published(t)); n != 0 {
		t.Fatalf("%d requests published by the refused replay", n)
	}
	fixed := record(acmeToken, `{"tenant_id":"acme","subject_id":"`+subj+`","regulation":"GDPR","idempotency_key":"order-7"}`)
	if err := e.svc.HandleIntake(ctx, fixed); err != nil {
		t.Fatalf("the producer's resubmission: %v", err)
	}

	if code, resp := replay(letters[1], globexToken); code != http.StatusOK || decode[map[string]int](t, resp)["replayed"] != 0 {
		t.Errorf("replay by a principal of another tenant: %d %s, want nothing replayed", code, resp)
	}
	if code, resp := replay(letters[1], opsToken); code != http.StatusOK || decode[map[string]int](t, resp)["replayed"] != 1 {
		t.Fatalf("replay of the offboarding: %d %s, want 1 replayed", code, resp)
	}
	if code, resp := replay(letters[1], opsToken); code != http.StatusOK || decode[map[string]int](t, resp)["replayed"] != 0 {
		t.Errorf("second replay: %d %s, want nothing replayed again", code, resp)
	}
	// The replayed offboarding passes the gates as any submission: it awaits approval.
	pub := e.published(t)
	if len(pub) != 1 || pub[0].Scope != event.ScopeSubject {
		t.Fatalf("published %d requests, want the resubmission only", len(pub))
	}
	if recs, err := e.svc.Workflow.List(ctx); err != nil || len(recs) != 1 || recs[0].Scope != event.ScopeTenant || recs[0].State != workflow.AwaitingApproval {
		t.Errorf("workflow after the replayed offboarding: %+v %v", recs, err)
	}
	if n := len(testenv.ReadTopic(t, brokers.Brokers, event.TopicIntake)); n != 2 {
		t.Errorf("%d records on %s, want only the producer's two: a replay is submitted, not written back", n, event.TopicIntake)
	}
	es, err := dlq.List(ctx, brokers, nil, event.DLQ(event.TopicIntake), 0)
	if err != nil || len(es) != 2 || !es[0].Redacted || es[0].Principal != "shopbot" || es[1].Redacted {
		t.Errorf("List = %+v, %v", es, err)
	}
}

func headerParts(r *kgo.Record) [][]byte {
	var out [][]byte
	for _, h := range r.Headers {
		out = append(out, []byte(h.Key), h.Value)
	}
	return out
}

// A dead letter of erasure.requested replayed from the console passes the gate with the
// holds in force now: a store held since it was dead-lettered is exempt, and a request
// whose receipt exists is refused.
func TestReplayOfRequestedDeadLetterPassesTheGate(t *testing.T) {
	e, _ := gated(t, nil)
	ctx := context.Background()
	brokers := broker.Config{Brokers: e.addrs}
	dlqTopic := event.DLQ(event.TopicRequested)
	if _, err := kadm.NewClient(testenv.Producer(t, brokers)).CreateTopics(ctx, 1, 1, nil, dlqTopic); err != nil {
		t.Fatal(err)
	}
	e.svc.DeadLetters = &intake.DeadLetters{Brokers: brokers, Topics: []string{dlqTopic}}
	acc := e.submit(t, body(t, nil), bearer(acmeToken)...)
	var orig *kgo.Record
	for _, r := range testenv.ReadTopic(t, e.addrs, event.TopicRequested) {
		if string(r.Key) == acc.RequestID {
			orig = r
		}
	}
	letter := &kgo.Record{Topic: dlqTopic, Key: orig.Key, Value: orig.Value, Headers: []kgo.RecordHeader{
		{Key: consumer.HeaderTopic, Value: []byte(event.TopicRequested)}, {Key: consumer.HeaderReason, Value: []byte("store failed")}}}
	if err := testenv.Producer(t, brokers).ProduceSync(ctx, letter).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.expect(t, "POST", "/v1/holds", `{"tenant_id": "acme", "store": "dataset", "legal_basis": "GDPR Art. 17(3)(e)"}`, dpo1Token, http.StatusCreated)
	e.expect(t, "POST", "/v1/dead-letters/replay", `{"topic":"`+dlqTopic+`","partition":0,"offset":0}`, acmeToken, http.StatusOK)
	pub := e.of(t, acc.RequestID)
	if len(pub) != 2 {
		t.Fatalf("published %d records, want the request and its replay", len(pub))
	}
	if _, held := pub[1].ExemptionOf("dataset"); !held {
		t.Errorf("the replay erases a store held since: exempt %+v", pub[1].Exempt)
	}
}
