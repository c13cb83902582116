package aggregator

import (
	"context"
	"fmt"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/event"
)

// shredUnlessHeld shreds the request's identifiers key unless a store of the request is
// still EXEMPT under a legal hold: releasing the hold re-drives that store, which needs the
// identifiers. Once every held store has reported again, the key is shredded (unless the
// receipt retains it for re-verification sweeps).
func (a *Aggregator) shredUnlessHeld(ctx context.Context, requestID string) error {
	if a.Sealer == nil {
		return nil
	}
	reports, err := a.Store.Reports(ctx, requestID)
	if err != nil {
		return fmt.Errorf("aggregator: load reports: %w", err)
	}
	for _, d := range reports {
		if d.Status == event.StatusExempt {
			return nil
		}
	}
	return a.shredUnlessRetained(ctx, requestID)
}

// keepHeld marks the stores of ev that reported EXEMPT under a legal hold exempt again,
// so that a pass after the receipt (a sweep, a re-apply) never erases what a hold keeps.
func (a *Aggregator) keepHeld(ctx context.Context, ev *event.Requested) error {
	reports, err := a.Store.Reports(ctx, ev.RequestID)
	if err != nil {
		return fmt.Errorf("aggregator: load reports: %w", err)
	}
	for _, d := range reports {
		if d.Status != event.StatusExempt {
			continue
		}
		basis, hold := d.Verification.Method, ""
		if i := strings.LastIndex(basis, " (hold "); i >= 0 {
			basis, hold = basis[:i], strings.TrimSuffix(basis[i+len(" (hold "):], ")")
		}
		basis = strings.TrimPrefix(basis, "legal hold: ")
		ev.Exempt = append(ev.Exempt, event.Exemption{Store: d.Store, HoldID: hold, LegalBasis: basis})
	}
	return nil
}
