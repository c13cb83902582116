package aggregator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// A receipt puts the subject's and every session's pseudonym on the tenant's suppression
// list and publishes each entry once, keyed by tenant and pseudonym; a record of the
// request handled again publishes nothing more. Nothing is suppressed before the receipt.
func TestReceiptSuppressesPseudonyms(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	req := request("er_1", "acme", 1)
	req.SessionHashes = []string{"session-hash-1", "session-hash-2"}
	e.handle(t, reqRec(t, req))
	e.handle(t, doneRecs(t, success("er_1", "acme", 1)[:2]...)...)
	if _, err := e.store.GetSuppression(ctx, "acme", req.SubjectHash); !errors.Is(err, auditlog.ErrNotFound) {
		t.Fatalf("suppression before the receipt: %v, want none", err)
	}
	e.handle(t, doneRecs(t, success("er_1", "acme", 1)[2])...)
	rc := checkReceipts(t, e, "acme", []string{"er_1"})[0]

	want := map[string]string{req.SubjectHash: event.SuppressSubject, "session-hash-1": event.SuppressSession, "session-hash-2": event.SuppressSession}
	for p, kind := range want {
		s, err := e.store.GetSuppression(ctx, "acme", p)
		if err != nil || !s.Active() || s.Kind != kind || s.RequestID != "er_1" || s.ReceiptID != rc.ReceiptID || s.Version != 1 {
			t.Errorf("entry %s: %+v, %v; want %s suppressed by the receipt", p, s, err, kind)
		}
		if _, err := e.store.GetSuppression(ctx, "other", p); !errors.Is(err, auditlog.ErrNotFound) {
			t.Errorf("entry %s found in another tenant: %v", p, err)
		}
	}

	e.handle(t, reqRec(t, req)) // redelivered
	e.handle(t, doneRecs(t, success("er_1", "acme", 1)...)...)
	recs := testenv.ReadTopic(t, e.addrs, event.TopicSuppressions)
	if len(recs) != len(want) {
		t.Fatalf("%d records on %s, want %d", len(recs), event.TopicSuppressions, len(want))
	}
	for _, r := range recs {
		var s event.Suppression
		if err := event.Suppressions.Decode(r.Value, &s); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != "acme/"+s.Pseudonym || want[s.Pseudonym] != s.Kind || !s.Active() || s.ReceiptID != rc.ReceiptID {
			t.Errorf("record key %q: %+v", r.Key, s)
		}
		delete(want, s.Pseudonym)
	}
	if len(want) != 0 {
		t.Errorf("not published: %v", want)
	}
}
