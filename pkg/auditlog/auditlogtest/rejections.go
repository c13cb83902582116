package auditlogtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
)

// testRejections checks a store's rejections: none until put, the latest put of a request
// replacing the earlier, each request's its own.
func testRejections(t *testing.T, s auditlog.Store) {
	rs, ok := s.(auditlog.Rejections)
	if !ok {
		t.Fatal("the store keeps no rejections: every Table does")
	}
	ctx := context.Background()
	if _, err := rs.GetRejection(ctx, "er_1"); !errors.Is(err, auditlog.ErrNotFound) {
		t.Fatalf("GetRejection before any: %v, want ErrNotFound", err)
	}
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	first := auditlog.Rejection{RequestID: "er_1", TenantID: "acme", Reason: "field scope: expected SUBJECT or TENANT", Producer: "shopbot", At: at}
	must(t, rs.PutRejection(ctx, first))
	second := first
	second.Reason, second.At = "field regulation: expected one of GDPR, LGPD, PDPA, CCPA", at.Add(time.Minute)
	must(t, rs.PutRejection(ctx, second))
	must(t, rs.PutRejection(ctx, auditlog.Rejection{RequestID: "er_2", TenantID: "globex", Reason: "other", At: at}))
	got, err := rs.GetRejection(ctx, "er_1")
	must(t, err)
	if !sameJSON(got, second) {
		t.Errorf("GetRejection = %s, want the latest %s", js(got), js(second))
	}
	if err := rs.PutRejection(ctx, auditlog.Rejection{TenantID: "acme"}); err == nil {
		t.Error("a rejection without request id was stored")
	}
}
