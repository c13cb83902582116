package worker

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/pii"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// MethodDryRun is the verification method of a dry run's report: nothing was verified.
const MethodDryRun = "dry run: counted, nothing deleted"

// MethodLegalHold is the verification method of an exempt store's report.
const MethodLegalHold = "legal hold"

// count reports what an erasure of st would delete, through deletion.Counter; a store of
// pseudonyms only (deletion.PseudonymsOnly) reports NO_PII_BY_DESIGN; any other store
// reports FAILED with deletion.ErrDryRunUnsupported, and is never erased.
// Transient errors are retried as erase retries them.
func (w *Worker) count(ctx context.Context, req *event.Requested, st inventory.Entry, subj deletion.Subject) event.StoreDone {
	done := event.StoreDone{
		RequestID: req.RequestID, TenantID: req.TenantID, Store: st.Name, Kind: st.Kind,
		Attempt: req.Attempt, StartedAt: w.now(), Locations: []event.LocationCount{}, DryRun: true,
		Verification: event.Verification{Method: MethodDryRun, Remaining: -1},
	}
	impl := w.Stores[st.Kind]
	if _, ok := impl.(deletion.PseudonymsOnly); ok {
		done.FinishedAt, done.Status = w.now(), event.StatusNoPII
		done.Verification = event.Verification{Method: MethodDryRun}
		return done
	}
	c, ok := impl.(deletion.Counter)
	var err error
	var locs []event.LocationCount
	if !ok {
		err = deletion.ErrDryRunUnsupported
	} else {
		for try := 1; try <= max(w.Attempts, 1); try++ {
			if locs, err = c.Count(ctx, st, subj); err == nil || retry.IsPermanent(err) || ctx.Err() != nil {
				break
			}
		}
	}
	done.FinishedAt = w.now()
	if err != nil {
		done.Status, done.Error = event.StatusFailed, pii.Mask(err.Error())
		if !errors.Is(err, deletion.ErrDryRunUnsupported) {
			w.log().Warn("store count failed", zap.String("request_id", req.RequestID), zap.String("store", st.Name), zap.Error(err))
		}
		return done
	}
	if locs != nil {
		done.Locations = locs
	}
	done.Status = event.StatusNothingFound
	if deletion.Total(locs) > 0 {
		done.Status = event.StatusDeleted // would delete
	}
	return done
}

// exempt reports st EXEMPT under the hold ex: nothing of it is read or erased.
func (w *Worker) exempt(req *event.Requested, st inventory.Entry, ex event.Exemption) event.StoreDone {
	now := w.now()
	w.log().Info("store exempt under a legal hold", zap.String("request_id", req.RequestID),
		zap.String("store", st.Name), zap.String("hold_id", ex.HoldID))
	return event.StoreDone{
		RequestID: req.RequestID, TenantID: req.TenantID, Store: st.Name, Kind: st.Kind,
		Status: event.StatusExempt, Attempt: req.Attempt, StartedAt: now, FinishedAt: now,
		Locations:    []event.LocationCount{},
		Verification: event.Verification{Method: MethodLegalHold + ": " + ex.LegalBasis + " (hold " + ex.HoldID + ")"},
		Physical:     st.Physical,
	}
}
