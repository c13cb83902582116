package worker

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/pii"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// ErrNoItemErasure is the report of a store asked to erase a reviewed item whose kind
// cannot erase items by id (deletion.ItemEraser).
var ErrNoItemErasure = errors.New("the store cannot erase items by id")

// review acts on a review decision: for ReviewErase, the decision's store erases the named
// item (deletion.ItemEraser) and reports it, deleted and read back; for any other decision
// no store acts. It needs no identifier: the item is named by its id in the store.
func (w *Worker) review(ctx context.Context, req *event.Requested, stores []inventory.Entry) error {
	rv := req.Review
	if rv == nil || rv.Decision != event.ReviewErase {
		return nil
	}
	var reports []event.StoreDone
	for _, st := range stores {
		if st.Name == rv.Store {
			reports = append(reports, w.eraseItem(ctx, req, st, rv.Item))
		}
	}
	if len(reports) == 0 {
		return nil
	}
	return w.publish(ctx, reports)
}

// eraseItem erases item of st for req's tenant, retrying transient errors, and returns
// the store's report: DELETED (or NOTHING_FOUND) with the read-back's remaining count, or
// FAILED with the reason.
func (w *Worker) eraseItem(ctx context.Context, req *event.Requested, st inventory.Entry, item string) event.StoreDone {
	start := w.now()
	done := event.StoreDone{
		RequestID: req.RequestID, TenantID: req.TenantID, Store: st.Name, Kind: st.Kind, Attempt: req.Attempt,
		StartedAt: start, Physical: st.Physical, Locations: []event.LocationCount{}, Purpose: req.Purpose, Pass: req.Pass,
	}
	var deleted, remaining int64
	err := error(ErrNoItemErasure)
	if ie, ok := w.Stores[st.Kind].(deletion.ItemEraser); ok {
		attempts := w.Attempts
		if attempts <= 0 {
			attempts = 5
		}
		for try := 1; try <= attempts; try++ {
			deleted, remaining, err = ie.EraseItems(ctx, st, req.TenantID, []string{item})
			if err == nil || retry.IsPermanent(err) || ctx.Err() != nil || try == attempts {
				break
			}
			select {
			case <-time.After(w.backoff().Delay(try)):
			case <-ctx.Done():
			}
		}
	}
	done.FinishedAt = w.now()
	log := w.log().With(zap.String("request_id", req.RequestID), zap.String("tenant", req.TenantID),
		zap.String("store", st.Name), zap.String("pass", req.Pass))
	switch {
	case err != nil:
		done.Status, done.Error = event.StatusFailed, pii.Mask(err.Error())
		done.Verification = event.Verification{Method: "not verified", Remaining: -1}
		log.Error("reviewed item not erased", zap.Error(err))
	default:
		done.Verification = event.Verification{Method: "item read back by id", Remaining: remaining}
		done.Locations = []event.LocationCount{{Location: "reviewed item", Deleted: deleted}}
		done.Status = deletion.StatusOf(deletion.Result{Locations: done.Locations}, done.Verification)
		if done.Status == event.StatusFailed {
			done.Error = verificationError(done.Verification)
		}
		log.Info("reviewed item erased", zap.String("status", string(done.Status)), zap.Int64("deleted", deleted), zap.Int64("remaining", remaining))
	}
	metrics.Or(w.Metrics).StoreOutcomes.WithLabelValues(st.Name, st.Kind, string(done.Status)).Inc()
	return done
}
