package intake

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/console"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// Gate is the workflow part of a Status: where the request stands among the gates and
// who moved it. It holds no identifier.
type Gate struct {
	State         workflow.State        `json:"state"`
	SubmittedBy   string                `json:"submitted_by"`
	NeedsApproval bool                  `json:"needs_approval,omitempty"`
	ApprovedBy    string                `json:"approved_by,omitempty"`
	ExecuteAt     time.Time             `json:"execute_at,omitzero"`
	Window        string                `json:"window,omitempty"`
	History       []workflow.Transition `json:"history"`
}

func gateOf(r workflow.Record) *Gate {
	g := &Gate{State: r.State, SubmittedBy: r.SubmittedBy, NeedsApproval: r.NeedsApproval, ApprovedBy: r.ApprovedBy,
		ExecuteAt: r.ExecuteAt, History: r.History}
	if r.Window > 0 {
		g.Window = r.Window.String()
	}
	return g
}

// gatedStatus is the status of a request waiting at a gate (SCHEDULED, AWAITING_APPROVAL)
// or stopped at one (CANCELLED, REJECTED), which never reached the pipeline; waiting is
// false for every other request.
func (s *Service) gatedStatus(ctx context.Context, requestID string) (Status, bool, error) {
	if s.Workflow == nil {
		return Status{}, false, nil
	}
	rec, err := s.Workflow.Get(ctx, requestID)
	if errors.Is(err, workflow.ErrNotFound) {
		return Status{}, false, nil
	}
	if err != nil {
		return Status{}, false, err
	}
	if rec.State == workflow.Released || rec.State == workflow.Previewed {
		return Status{}, false, nil
	}
	if _, err := s.Store.GetRequest(ctx, requestID); err == nil && rec.State != workflow.Cancelled && rec.State != workflow.Rejected {
		return Status{}, false, nil // a confirmed dry run waiting again: show its counts
	}
	st := Status{
		RequestID: rec.RequestID, TenantID: rec.TenantID, SubjectHash: rec.SubjectHash, KeyID: s.Key.ID(),
		Scope: rec.Scope, Regulation: rec.Regulation, State: string(rec.State), RequestedAt: rec.SubmittedAt,
		DueAt: rec.DueAt, InventoryVersion: s.Inventory.Version, Workflow: gateOf(rec),
	}
	for _, name := range s.Inventory.Names() {
		st.Stores = append(st.Stores, StoreState{Store: name, Status: Pending})
	}
	st.Overdue = !workflow.Final(rec.State) && s.now().After(rec.DueAt)
	return st, true, nil
}

// decorate adds the workflow to the pipeline's status st: a dry run is PREVIEWED (its
// stores' counts say what would be deleted), a request whose receipt lists a store
// EXEMPT is PARTIAL.
func (s *Service) decorate(ctx context.Context, st Status, rc event.Receipt) (Status, error) {
	if rc.Status == event.ReceiptPartial {
		for _, ss := range st.Stores {
			if ss.Status == event.StatusExempt {
				st.State = StatePartial
			}
		}
	}
	if s.Workflow == nil {
		return st, nil
	}
	rec, err := s.Workflow.Get(ctx, st.RequestID)
	if errors.Is(err, workflow.ErrNotFound) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	st.Workflow = gateOf(rec)
	if rec.State != workflow.Released && st.State != StateComplete {
		st.State = string(rec.State)
		st.Overdue = false
	}
	return st, nil
}

// withGated adds to reqs the gated requests of tenant ("" every tenant) that never
// reached the pipeline, in submission order.
func (s *Service) withGated(ctx context.Context, reqs []auditlog.Request, tenant string) ([]auditlog.Request, error) {
	if s.Workflow == nil {
		return reqs, nil
	}
	recs, err := s.Workflow.List(ctx)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, r := range reqs {
		known[r.RequestID] = true
	}
	for _, r := range recs {
		if known[r.RequestID] || tenant != "" && r.TenantID != tenant {
			continue
		}
		reqs = append(reqs, auditlog.Request{RequestID: r.RequestID, TenantID: r.TenantID, RequestedAt: r.SubmittedAt})
	}
	auditlog.SortRequests(reqs)
	return reqs, nil
}

// routeWorkflow adds the workflow's verbs to mux:
//
//	POST /v1/erasures/{id}/confirm   run a dry run for real (200 Status; 404, 409)
//	POST /v1/erasures/{id}/cancel    cancel within the window (200 Status; 404, 409)
//	POST /v1/erasures/{id}/approve   approve as a second principal with the approver role (200; 403, 404, 409)
//	POST /v1/erasures/{id}/reject    reject likewise (200; 403, 404, 409)
//	POST /v1/holds                   place a legal hold: HoldRequest (201 workflow.Hold; 400, 403)
//	GET  /v1/holds                   the holds of the caller's tenants: ?tenant= (200 {"holds": [...]})
//	POST /v1/holds/{id}/release      release a hold and re-drive what it exempted (200 ReleaseResponse)
//	GET  /v1/inventory               stores and kinds (200 InventoryView)
//	GET  /v1/dead-letters            dead letters of the caller's tenants (200 {"dead_letters": [...]})
//	POST /v1/dead-letters/replay     replay chosen dead letters: ReplayRequest (200 {"replayed": n})
//	GET  /v1/whoami                  the caller (200 Whoami)
//	GET  /v1/tenants/{tenant}/chain  whether the tenant's receipt chain verifies (200 ChainState)
//	GET  /console/                   the web console (static; it calls the API above with the caller's token)
func (s *Service) routeWorkflow(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/erasures/{id}/confirm", s.authenticate(s.verb(s.Confirm)))
	mux.HandleFunc("POST /v1/erasures/{id}/cancel", s.authenticate(s.verb(s.Cancel)))
	mux.HandleFunc("POST /v1/erasures/{id}/approve", s.authenticate(s.verb(func(ctx context.Context, p auth.Principal, id string) (workflow.Record, error) {
		return s.Decide(ctx, p, id, true)
	})))
	mux.HandleFunc("POST /v1/erasures/{id}/reject", s.authenticate(s.verb(func(ctx context.Context, p auth.Principal, id string) (workflow.Record, error) {
		return s.Decide(ctx, p, id, false)
	})))
	mux.HandleFunc("POST /v1/erasures/{id}/review", s.authenticate(s.handleReview))
	mux.HandleFunc("POST /v1/holds", s.authenticate(s.handleHold))
	mux.HandleFunc("GET /v1/holds", s.authenticate(s.handleHolds))
	mux.HandleFunc("POST /v1/holds/{id}/release", s.authenticate(s.handleRelease))
	mux.HandleFunc("GET /v1/inventory", s.authenticate(s.handleInventory))
	mux.Handle("GET /v1/discovery/uncovered", s.Operator(http.HandlerFunc(s.handleUncovered)))
	mux.HandleFunc("GET /v1/dead-letters", s.authenticate(s.handleDeadLetters))
	mux.HandleFunc("POST /v1/dead-letters/replay", s.authenticate(s.handleReplay))
	mux.HandleFunc("GET /v1/whoami", s.authenticate(s.handleWhoami))
	mux.HandleFunc("GET /v1/tenants/{tenant}/chain", s.authenticate(s.handleChain))
	mux.Handle("GET /console/", console.Handler())
	mux.Handle("GET /console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
}

// principal returns the caller (Anonymous when authentication is off).
func principal(r *http.Request) auth.Principal {
	if p, ok := auth.PrincipalFrom(r.Context()); ok {
		return p
	}
	return auth.Anonymous
}

// verb serves one workflow verb on the request named in the path and answers its status.
func (s *Service) verb(do func(context.Context, auth.Principal, string) (workflow.Record, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec, err := do(r.Context(), principal(r), r.PathValue("id"))
		if s.verbFailed(w, err) {
			return
		}
		st, err := s.Status(r.Context(), rec.RequestID)
		if s.lookupFailed(w, err) {
			return
		}
		writeJSON(w, http.StatusOK, st)
	}
}

// verbFailed answers err of a workflow verb, if any.
func (s *Service) verbFailed(w http.ResponseWriter, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, auditlog.ErrNotFound):
		writeError(w, http.StatusNotFound, "no such request")
	case errors.Is(err, ErrForbidden):
		writeError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, ErrState):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, UnavailableReason(err))
	default:
		s.log().Error("workflow verb failed", zap.Error(err))
		writeError(w, http.StatusInternalServerError, "internal error")
	}
	return true
}

// visible reports whether p may see tenant's data.
func (s *Service) visible(p auth.Principal, tenant string) bool {
	return s.Auth == nil || p.May(tenant)
}

// gateState is the workflow state of a request that waits at a gate or is a dry run, ""
// for any other.
func (s *Service) gateState(ctx context.Context, requestID string) string {
	if s.Workflow == nil {
		return ""
	}
	rec, err := s.Workflow.Get(ctx, requestID)
	if err != nil || rec.State == workflow.Released {
		return ""
	}
	return string(rec.State)
}
