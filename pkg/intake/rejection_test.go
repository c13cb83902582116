package intake_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// TestRejectedRecordsAreFoundByTheirKey: an erasure.intake record that is refused is
// dead-lettered and answers, by its tenant and idempotency key, REJECTED with a reason
// that names the field at fault and what was expected, and no value. A record refused
// for a tenant its producer may not act for records nothing under that tenant.
func TestRejectedRecordsAreFoundByTheirKey(t *testing.T) {
	e := secured(t)
	hdr := func(tok string) []kgo.RecordHeader {
		return []kgo.RecordHeader{{Key: auth.RecordHeader, Value: []byte("Bearer " + tok)}}
	}
	jsonRec := func(body string, tok string) *kgo.Record {
		return &kgo.Record{Topic: event.TopicIntake, Value: []byte(body), Headers: append(hdr(tok), kgo.RecordHeader{Key: intake.ContentTypeHeader, Value: []byte("application/json")})}
	}
	for _, tc := range []struct {
		name, key string
		rec       *kgo.Record
		want      []string // in the reason
	}{
		{"unknown field", "k-unknown", jsonRec(`{"tenant_id":"acme","subject_id":"`+subj+`","session_id":"s-1","regulation":"GDPR","idempotency_key":"k-unknown"}`, acmeToken),
			[]string{`"session_id"`, "session_ids"}},
		{"bad regulation", "k-regulation", jsonRec(`{"tenant_id":"acme","subject_id":"`+subj+`","regulation":"HIPAA","idempotency_key":"k-regulation"}`, acmeToken),
			[]string{"regulation", "GDPR"}},
		{"bad scope", "k-scope", jsonRec(`{"tenant_id":"acme","subject_id":"`+subj+`","regulation":"GDPR","scope":"EVERYTHING","idempotency_key":"k-scope"}`, acmeToken),
			[]string{"scope", "SUBJECT"}},
		{"wrong type", "k-type", jsonRec(`{"tenant_id":"acme","subject_id":42,"regulation":"GDPR","idempotency_key":"k-type"}`, acmeToken),
			[]string{"subject_id", "string"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.svc.HandleIntake(context.Background(), tc.rec); !retry.IsPermanent(err) {
				t.Fatalf("HandleIntake: %v, want a permanent error (dead-lettered)", err)
			}
			st := lookup(t, e, "acme", tc.key, acmeToken)
			if st.State != intake.StateRejected || st.Rejection == nil {
				t.Fatalf("status by key %+v, want REJECTED with the rejection", st)
			}
			for _, w := range tc.want {
				if !strings.Contains(st.Rejection.Reason, w) {
					t.Errorf("reason %q does not name %s", st.Rejection.Reason, w)
				}
			}
			if strings.Contains(st.Rejection.Reason, subj) || st.Rejection.Producer != "shopbot" {
				t.Errorf("rejection %+v: want no identifier and the producer named", st.Rejection)
			}
		})
	}
	// globex's producer writes a record naming acme: refused, and nothing is recorded
	// under acme's key.
	if err := e.svc.HandleIntake(context.Background(), jsonRec(`{"tenant_id":"acme","subject_id":"x","regulation":"NONE","idempotency_key":"k-foreign"}`, globexToken)); !retry.IsPermanent(err) {
		t.Fatalf("foreign record: %v", err)
	}
	if st := lookup(t, e, "acme", "k-foreign", acmeToken); st.RequestID != "" {
		t.Errorf("another tenant's producer recorded a rejection under acme's key: %+v", st)
	}
}

// lookup is GET /v1/erasures?tenant=&idempotency_key= as tok: the request found, or a
// zero Status when the list is empty.
func lookup(t *testing.T, e *env, tenant, key, tok string) intake.Status {
	t.Helper()
	code, b := e.do(t, "GET", "/v1/erasures?tenant="+url.QueryEscape(tenant)+"&idempotency_key="+url.QueryEscape(key), "", bearer(tok)...)
	if code != http.StatusOK {
		t.Fatalf("lookup: %d %s", code, b)
	}
	var out struct {
		Requests []intake.Status `json:"requests"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Requests) > 1 {
		t.Fatalf("lookup answer %s: %v", b, err)
	}
	if len(out.Requests) == 0 {
		return intake.Status{}
	}
	return out.Requests[0]
}

// TestUndecodableRecordReason: a record that is neither JSON nor Avro is dead-lettered
// with a reason that says what the intake reads.
func TestUndecodableRecordReason(t *testing.T) {
	e := secured(t)
	err := e.svc.HandleIntake(context.Background(), &kgo.Record{Topic: event.TopicIntake, Value: []byte("not json, not avro")})
	if !retry.IsPermanent(err) || !strings.Contains(err.Error(), "neither JSON") || !strings.Contains(err.Error(), "0xC3 0x01") {
		t.Fatalf("err %v: want a permanent error naming the encodings read", err)
	}
}
