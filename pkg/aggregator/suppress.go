package aggregator

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// suppress adds the pseudonyms of an issued receipt (the subject's, or for a TENANT scope
// the tenant's, and every session's) to the tenant's suppression list, and publishes each entry as it is stored afterwards on
// erasure.suppressions, keyed by tenant and pseudonym. It runs after the receipt was
// stored and before the receipt is published and marked, so a crash in between runs it
// again: storing is idempotent (auditlog.Suppress) and the topic is compacted, so a second
// publication of the same entry changes nothing. An entry lifted meanwhile is published
// as lifted. A check that races it, between the receipt's write and the entries', answers
// not suppressed for those moments.
func (a *Aggregator) suppress(ctx context.Context, req auditlog.Request, r event.Receipt) error {
	// the entries are independent items: written at once, they share the store's fsyncs
	es := auditlog.SuppressionsOf(req, r)
	stored, changed := make([]event.Suppression, len(es)), make([]bool, len(es))
	g, gctx := errgroup.WithContext(ctx)
	for i, e := range es {
		g.Go(func() (err error) {
			if stored[i], changed[i], err = auditlog.Suppress(gctx, a.Store, e, req.RequestedAt); err != nil {
				return fmt.Errorf("aggregator: suppress: %w", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var recs []*kgo.Record
	added := 0
	for i, stored := range stored {
		if changed[i] {
			added++
		}
		topic := or(a.SuppressionsTopic, event.TopicSuppressions)
		rec, err := a.Registry.Record(topic, event.Suppressions, event.SuppressionKey(stored.TenantID, stored.Pseudonym), &stored)
		if err != nil {
			return fmt.Errorf("aggregator: encode suppression: %w", err)
		}
		recs = append(recs, rec)
	}
	if err := a.Producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("aggregator: publish suppressions: %w", err)
	}
	a.log().Info("suppressions published", zap.String("request_id", r.RequestID), zap.String("tenant", r.TenantID),
		zap.Int("entries", len(recs)), zap.Int("added", added))
	return nil
}
