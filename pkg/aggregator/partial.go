package aggregator

import (
	"context"
	"fmt"

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
