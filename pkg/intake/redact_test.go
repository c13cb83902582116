package intake_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/dlq"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Redact replaces identifiers by placeholders and undecodable bytes by their digest, and
// says so; a request without identifiers is re-encoded, not redacted.
func TestRedact(t *testing.T) {
	e := setup(t)
	for _, tc := range []struct {
		name     string
		rec      *kgo.Record
		redacted bool
	}{
		{"subject", encodeIntake(t, event.IntakeRequest{TenantID: "acme", SubjectID: subj, SessionIDs: []string{"s-1"}, Regulation: "GDPR", Scope: event.ScopeSubject, SubmittedAt: start}), true},
		{"tenant", encodeIntake(t, event.IntakeRequest{TenantID: "acme", SessionIDs: []string{}, Regulation: "GDPR", Scope: event.ScopeTenant, SubmittedAt: start}), false},
		{"undecodable", &kgo.Record{Topic: event.TopicIntake, Value: []byte("not avro " + subj)}, true},
	} {
		v, redacted := e.svc.Redact(tc.rec)
		if redacted != tc.redacted || strings.Contains(string(v), subj) || strings.Contains(string(v), "s-1") {
			t.Errorf("%s: redacted %t, value %q; want %t and no identifier", tc.name, redacted, v, tc.redacted)
		}
		var in event.IntakeRequest
		if tc.name == "subject" && (event.Intake.Decode(v, &in) != nil || !dlq.IsPlaceholder(in.SubjectID) || !dlq.IsPlaceholder(in.SessionIDs[0])) {
			t.Errorf("subject: redacted to %+v, want placeholders", in)
		}
	}
}

// A record refused after its credential authenticated names the producer for its dead
// letter; one whose credential did not authenticate names nobody.
func TestIntakeRefusalNamesTheProducer(t *testing.T) {
	e := secured(t)
	rec := func(token string, in event.IntakeRequest) *kgo.Record {
		r := encodeIntake(t, in)
		r.Headers = []kgo.RecordHeader{{Key: auth.RecordHeader, Value: []byte("Bearer " + token)}}
		return r
	}
	valid := event.IntakeRequest{TenantID: "acme", SubjectID: subj, SessionIDs: []string{}, Regulation: "GDPR", Scope: event.ScopeSubject, SubmittedAt: start}
	invalid, forbidden := valid, valid
	invalid.Regulation = "NOPE"
	forbidden.TenantID = "globex"
	for _, tc := range []struct {
		name, token string
		in          event.IntakeRequest
		principal   string
	}{
		{"invalid", acmeToken, invalid, "shopbot"},
		{"forbidden", acmeToken, forbidden, "shopbot"},
		{"unauthenticated", "lt_forged-token-000000000000000000000000", valid, ""},
	} {
		err := e.svc.HandleIntake(context.Background(), rec(tc.token, tc.in))
		if !retry.IsPermanent(err) || consumer.PrincipalOf(err) != tc.principal || strings.Contains(err.Error(), tc.token) {
			t.Errorf("%s: %v naming %q, want a permanent error naming %q", tc.name, err, consumer.PrincipalOf(err), tc.principal)
		}
	}
}

// A replayed record whose subject or session is a placeholder of a redacted dead letter
// is refused by the intake: erasing it would erase nothing and spend the producer's
// idempotency key. The same identifier on a record that is not a replay is a request
// like any other.
func TestIntakeRefusesReplayedPlaceholder(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	placeholder := dlq.PlaceholderPrefix + e.key.Pseudonym("acme", subj)
	replayed := func(in event.IntakeRequest) *kgo.Record {
		r := encodeIntake(t, in)
		r.Headers = []kgo.RecordHeader{{Key: dlq.HeaderReplayedFrom, Value: []byte("erasure.intake.dlq/0/3")}}
		return r
	}
	base := event.IntakeRequest{TenantID: "acme", SessionIDs: []string{}, Regulation: "GDPR", Scope: event.ScopeSubject, IdempotencyKey: "order-7", SubmittedAt: start}
	subject, session := base, base
	subject.SubjectID = placeholder
	session.SubjectID, session.SessionIDs = subj, []string{"s-1", placeholder}
	for name, in := range map[string]event.IntakeRequest{"subject": subject, "session": session} {
		err := e.svc.HandleIntake(ctx, replayed(in))
		if !retry.IsPermanent(err) || !errors.Is(err, intake.ErrInvalid) || !strings.Contains(err.Error(), "placeholder") {
			t.Errorf("replayed placeholder %s: %v, want a permanent ErrInvalid naming the placeholder", name, err)
		}
	}
	if n := len(e.published(t)); n != 0 {
		t.Fatalf("%d requests published for placeholders", n)
	}
	// The producer's own resubmission is not a conflict: the key was not spent.
	fixed := base
	fixed.SubjectID = subj
	if err := e.svc.HandleIntake(ctx, encodeIntake(t, fixed)); err != nil {
		t.Fatalf("resubmission: %v", err)
	}
	if err := e.svc.HandleIntake(ctx, encodeIntake(t, event.IntakeRequest{TenantID: "acme", SubjectID: placeholder, SessionIDs: []string{},
		Regulation: "GDPR", Scope: event.ScopeSubject, SubmittedAt: start})); err != nil {
		t.Errorf("a record that is not a replay: %v", err)
	}
}
