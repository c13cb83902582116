package dlq_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/dlq"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

var intakeDLQ = event.DLQ(event.TopicIntake)

// placeholder is a redacted identifier as the intake writes it.
const placeholder = dlq.PlaceholderPrefix + "5f1d0b9e6c2a4f3e8d7c6b5a49382716f5e4d3c2b1a09f8e7d6c5b4a39281706"

func intakeValue(t *testing.T, in event.IntakeRequest) []byte {
	t.Helper()
	if in.SessionIDs == nil {
		in.SessionIDs = []string{}
	}
	in.Regulation, in.SubmittedAt = "GDPR", time.Now().UTC()
	if in.Scope == "" {
		in.Scope = event.ScopeSubject
	}
	b, err := event.Intake.Encode(&in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deadLetter is a dead letter of source as an earlier Lethe wrote it, keeping every
// header of its record, plus hs.
func deadLetter(source, key string, value []byte, hs ...kgo.RecordHeader) *kgo.Record {
	return &kgo.Record{Topic: event.DLQ(source), Key: []byte(key), Value: value, Headers: append(hs,
		kgo.RecordHeader{Key: consumer.HeaderTopic, Value: []byte(source)},
		kgo.RecordHeader{Key: consumer.HeaderReason, Value: []byte("refused")})}
}

func hdr(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }

// noToken fails t when any part of r holds a byte sequence of tokens.
func noToken(t *testing.T, what string, r *kgo.Record, tokens ...string) {
	t.Helper()
	for _, tok := range tokens {
		found := bytes.Contains(r.Key, []byte(tok)) || bytes.Contains(r.Value, []byte(tok))
		for _, h := range r.Headers {
			found = found || strings.Contains(h.Key, tok) || bytes.Contains(h.Value, []byte(tok))
		}
		if found {
			t.Errorf("%s holds the token %q", what, tok)
		}
	}
}

// A replayed record carries none of the headers a dead letter must not keep, whether
// the dead letter was written by today's consumer (which keeps an allow-list) or by an
// earlier one that kept the record's authorization header: only content-type and the
// replay's own marks.
func TestReplayCarriesNoStrippedHeader(t *testing.T) {
	ctx := context.Background()
	brokers := testenv.Kafka(t, 1, event.TopicRequested, dlqTopic, event.TopicIntake, intakeDLQ)
	prod := testenv.Producer(t, brokers)
	fresh := requested("bad-1", "bad")
	fresh.Headers = append(fresh.Headers, hdr("Authorization", "Bearer tok-fresh"), hdr("x-api-key", "tok-key"))
	if err := prod.ProduceSync(ctx, fresh).FirstErr(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(stop)
		_ = consumer.Run(runCtx, consumer.Config{Broker: brokers, Group: "qdrant-deleter", Topics: []string{event.TopicRequested}},
			func(context.Context, *kgo.Record) error { return retry.Permanent(errors.New(rejected)) })
	}()
	for deadline := time.Now().Add(15 * time.Second); len(testenv.ReadTopic(t, brokers.Brokers, dlqTopic)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("nothing dead-lettered after 15 s")
		}
	}
	cancel()
	<-stop

	old := deadLetter(event.TopicRequested, "bad-2", requested("bad-2", "bad").Value,
		hdr("authorization", "Bearer tok-old"), hdr("traceparent", "00-abc-def-01"), hdr(dlq.HeaderReplayedBy, "mallory"))
	oldIntake := deadLetter(event.TopicIntake, "acme", intakeValue(t, event.IntakeRequest{TenantID: "acme", Scope: event.ScopeTenant}),
		hdr("AUTHORIZATION", "Bearer tok-intake"), hdr("content-type", "application/vnd.apache.avro+binary"))
	if err := prod.ProduceSync(ctx, old, oldIntake).FirstErr(); err != nil {
		t.Fatal(err)
	}

	res, err := dlq.Replay(ctx, brokers, nil, dlqTopic, dlq.Options{By: "ops"})
	if err != nil || res.Replayed != 2 || len(res.Refused) != 0 {
		t.Fatalf("Replay = %+v, %v; want both records replayed", res, err)
	}
	var submitted []*kgo.Record
	res, err = dlq.Replay(ctx, brokers, nil, intakeDLQ, dlq.Options{By: "ops", Intake: func(_ context.Context, r *kgo.Record) error {
		submitted = append(submitted, r)
		return nil
	}})
	if err != nil || res.Replayed != 1 || len(submitted) != 1 {
		t.Fatalf("Replay of %s = %+v, %v; want the record handed to the intake", intakeDLQ, res, err)
	}

	var replayed []*kgo.Record
	for _, r := range testenv.ReadTopic(t, brokers.Brokers, event.TopicRequested) {
		for _, h := range r.Headers {
			if h.Key == dlq.HeaderReplayedFrom {
				replayed = append(replayed, r)
			}
		}
	}
	if len(replayed) != 2 {
		t.Fatalf("%d records replayed to %s, want 2", len(replayed), event.TopicRequested)
	}
	allowed := map[string]bool{"content-type": true, dlq.HeaderReplayedFrom: true, dlq.HeaderReplayedBy: true}
	for _, r := range append(replayed, submitted...) {
		what := "replayed record " + string(r.Key)
		for _, h := range r.Headers {
			if !allowed[h.Key] {
				t.Errorf("%s carries header %s", what, h.Key)
			}
			if h.Key == dlq.HeaderReplayedBy && string(h.Value) != "ops" {
				t.Errorf("%s: replayed by %q, want ops", what, h.Value)
			}
		}
		noToken(t, what, r, "tok-", "mallory", "traceparent")
	}
	if ct := submitted[0].Headers[0]; ct.Key != "content-type" || string(ct.Value) != "application/vnd.apache.avro+binary" {
		t.Errorf("replayed intake record headers %v, want its content type first", submitted[0].Headers)
	}
}

// A redacted dead letter of erasure.intake (marked by the consumer, or recognised by its
// placeholders or its digest of undecodable bytes) is refused with the reason, and stays;
// the other records are replayed. Without an intake to hand them to, intake records are
// refused too.
func TestReplayRefusesRedacted(t *testing.T) {
	ctx := context.Background()
	brokers := testenv.Kafka(t, 1, event.TopicIntake, intakeDLQ)
	prod := testenv.Producer(t, brokers)
	recs := []*kgo.Record{
		deadLetter(event.TopicIntake, "marked", intakeValue(t, event.IntakeRequest{TenantID: "acme", SubjectID: placeholder}),
			hdr(consumer.HeaderRedacted, "true")),
		deadLetter(event.TopicIntake, "session", intakeValue(t, event.IntakeRequest{TenantID: "acme", SubjectID: "bob", SessionIDs: []string{placeholder}})),
		deadLetter(event.TopicIntake, "digest", []byte("redacted: 18 undecodable bytes, sha256 0011")),
		deadLetter(event.TopicIntake, "tenant", intakeValue(t, event.IntakeRequest{TenantID: "acme", Scope: event.ScopeTenant})),
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	es, err := dlq.List(ctx, brokers, nil, intakeDLQ, 0)
	if err != nil || len(es) != 4 {
		t.Fatalf("List = %d entries, %v", len(es), err)
	}
	for _, e := range es {
		if e.Redacted != (e.Key != "tenant") {
			t.Errorf("entry %s: redacted %t", e.Key, e.Redacted)
		}
	}

	var submitted []string
	intake := func(_ context.Context, r *kgo.Record) error {
		submitted = append(submitted, string(r.Key))
		return nil
	}
	for run, wantReplayed := range []int{1, 0} {
		res, err := dlq.Replay(ctx, brokers, nil, intakeDLQ, dlq.Options{By: "ops", Intake: intake})
		if err != nil || res.Replayed != wantReplayed || len(res.Refused) != 3 {
			t.Fatalf("run %d: Replay = %+v, %v; want %d replayed and the three redacted ones refused", run+1, res, err, wantReplayed)
		}
		for _, ref := range res.Refused {
			if !errors.Is(ref.Err, dlq.ErrRedacted) || !errors.Is(ref.Err, dlq.ErrRefused) || !strings.Contains(ref.Reason, "redacted") {
				t.Errorf("refusal %+v, want ErrRedacted with its reason", ref)
			}
		}
	}
	if len(submitted) != 1 || submitted[0] != "tenant" {
		t.Errorf("submitted %v, want only the record that was not redacted", submitted)
	}

	if err := prod.ProduceSync(ctx, deadLetter(event.TopicIntake, "another", intakeValue(t, event.IntakeRequest{TenantID: "acme", Scope: event.ScopeTenant}))).FirstErr(); err != nil {
		t.Fatal(err)
	}
	res, err := dlq.Replay(ctx, brokers, nil, intakeDLQ, dlq.Options{By: "ops", Filter: func(e dlq.Entry) bool { return e.Key == "another" }})
	if err != nil || res.Replayed != 0 || len(res.Refused) != 1 || !errors.Is(res.Refused[0].Err, dlq.ErrNeedsIntake) {
		t.Fatalf("Replay without an intake = %+v, %v; want the intake record refused", res, err)
	}
	if n := len(testenv.ReadTopic(t, brokers.Brokers, event.TopicIntake)); n != 0 {
		t.Errorf("%d records written to %s, want none", n, event.TopicIntake)
	}
}
