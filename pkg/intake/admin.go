package intake

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
)

// ListFilter selects requests in List.
type ListFilter struct {
	Tenant  string // "" = every tenant
	State   string // "" = any; else one of the State constants
	Overdue bool   // only overdue requests
	Limit   int    // at most this many, newest first; default 100
}

// List returns the status of the requests that match f, newest first.
func (s *Service) List(ctx context.Context, f ListFilter) ([]Status, error) {
	reqs, err := s.Store.ListRequests(ctx, f.Tenant)
	if err != nil {
		return nil, err
	}
	if reqs, err = s.withGated(ctx, reqs, f.Tenant); err != nil {
		return nil, err
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	out := []Status{}
	for i := len(reqs) - 1; i >= 0 && len(out) < f.Limit; i-- {
		st, err := s.Status(ctx, reqs[i].RequestID)
		if errors.Is(err, auditlog.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if f.State != "" && st.State != f.State || f.Overdue && !st.Overdue {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := ListFilter{State: q.Get("state"), Overdue: q.Get("overdue") == "true"}
	var ok bool
	if f.Tenant, ok = s.listTenant(w, r, q.Get("tenant")); !ok {
		return
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 || n > 1000 {
			writeError(w, http.StatusBadRequest, "limit must be 1-1000")
			return
		}
		f.Limit = n
	}
	if key := q.Get("idempotency_key"); key != "" {
		s.listByIdempotencyKey(w, r, f.Tenant, key)
		return
	}
	switch f.State {
	case "", StatePending, StateInProgress, StateFailed, StateIncomplete, StateComplete,
		StatePreviewed, StateScheduled, StateCancelled, StateAwaitingApproval, StateRejected, StatePartial:
	default:
		writeError(w, http.StatusBadRequest, "state must be PENDING, IN_PROGRESS, FAILED, INCOMPLETE, COMPLETE, PARTIAL, PREVIEWED, SCHEDULED, CANCELLED, AWAITING_APPROVAL or REJECTED")
		return
	}
	list, err := s.List(r.Context(), f)
	if err != nil {
		s.log().Error("list failed", zap.Error(err))
		writeError(w, http.StatusServiceUnavailable, "state store unavailable")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"requests": list})
}

// RetryRequest is the body of POST /v1/erasures/{id}/retry. The subject's identifiers must
// be supplied again (Lethe keeps none); Stores selects stores to re-drive (empty: all).
type RetryRequest struct {
	SubjectID  string   `json:"subject_id"`
	SessionIDs []string `json:"session_ids"`
	Stores     []string `json:"stores"`
}

func (s *Service) handleRetry(w http.ResponseWriter, r *http.Request) {
	var body RetryRequest
	if !s.decodeBody(w, r, &body) {
		return
	}
	prev, err := s.Store.GetRequest(r.Context(), r.PathValue("id"))
	if s.lookupFailed(w, err) || !s.authorize(w, r, prev.TenantID) {
		return
	}
	req, err := s.Redrive(r.Context(), r.PathValue("id"), event.Identifiers{SubjectID: body.SubjectID, SessionIDs: body.SessionIDs}, body.Stores)
	switch {
	case errors.Is(err, auditlog.ErrNotFound):
		writeError(w, http.StatusNotFound, "no such request")
	case errors.Is(err, ErrInvalid):
		s.reject(w, http.StatusBadRequest, metrics.ReasonInvalid, err.Error())
	case errors.Is(err, ErrState):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, ErrUnavailable):
		s.reject(w, http.StatusServiceUnavailable, metrics.ReasonUnavailable, UnavailableReason(err))
	case err != nil:
		s.log().Error("retry failed", zap.Error(err))
		writeError(w, http.StatusInternalServerError, "internal error")
	default:
		writeJSON(w, http.StatusAccepted, map[string]any{"request_id": req.RequestID, "attempt": req.Attempt, "stores": req.OnlyStores,
			"status_url": "/v1/erasures/" + req.RequestID})
	}
}
