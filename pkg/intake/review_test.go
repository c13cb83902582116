package intake

import (
	"testing"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// TestDecidedStandsUnlessItsErasureFailed: a dismissal and an erase in progress or done
// stand; an erase whose read-back failed lets the item be decided again.
func TestDecidedStandsUnlessItsErasureFailed(t *testing.T) {
	rv := func(pass, decision string) auditlog.Addendum {
		return auditlog.Addendum{Type: auditlog.AddendumReviewed, Purpose: event.PurposeReview, Pass: pass,
			Review: &event.ReviewDecision{Store: "qdrant", Item: "7", Decision: decision}}
	}
	failed := auditlog.Addendum{Type: auditlog.AddendumUnverified, Purpose: event.PurposeReview, Pass: "p1"}
	for name, tc := range map[string]struct {
		ads  []auditlog.Addendum
		want bool
	}{
		"none":                      {nil, false},
		"dismissed":                 {[]auditlog.Addendum{rv("p1", event.ReviewDismiss)}, true},
		"erase in progress":         {[]auditlog.Addendum{rv("p1", event.ReviewErase)}, true},
		"erase failed":              {[]auditlog.Addendum{rv("p1", event.ReviewErase), failed}, false},
		"erase failed, then again":  {[]auditlog.Addendum{rv("p1", event.ReviewErase), failed, rv("p2", event.ReviewErase)}, true},
		"another item's decision":   {[]auditlog.Addendum{{Type: auditlog.AddendumReviewed, Pass: "p3", Review: &event.ReviewDecision{Store: "qdrant", Item: "8"}}}, false},
		"a sweep's unverified pass": {[]auditlog.Addendum{rv("p1", event.ReviewErase), {Type: auditlog.AddendumUnverified, Purpose: event.PurposeSweep, Pass: "p1"}}, true},
	} {
		if _, got := decided(tc.ads, "qdrant", "7"); got != tc.want {
			t.Errorf("%s: decided = %v, want %v", name, got, tc.want)
		}
	}
}
