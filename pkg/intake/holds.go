package intake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/pii"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// HoldRequest is the body of POST /v1/holds: hold a subject (SubjectID) or every subject
// of the tenant (none), in one store (Store) or every store (none). The subject id is
// kept only as its keyed pseudonym.
type HoldRequest struct {
	TenantID   string `json:"tenant_id"`
	SubjectID  string `json:"subject_id"`
	Store      string `json:"store"`
	Reason     string `json:"reason"`
	LegalBasis string `json:"legal_basis"`
}

// ReleaseResponse answers POST /v1/holds/{id}/release: the hold, and the requests whose
// held stores were re-driven.
type ReleaseResponse struct {
	Hold      workflow.Hold `json:"hold"`
	Redriven  []string      `json:"redriven"`
	NotKept   []string      `json:"not_kept,omitempty"` // held requests whose identifiers were not kept: re-drive them with their identifiers
	Remaining []string      `json:"still_held,omitempty"`
}

// PlaceHold validates in and stores the hold. Requests published from now on exempt the
// stores it covers; a request already running is not stopped.
func (s *Service) PlaceHold(ctx context.Context, p auth.Principal, in HoldRequest) (workflow.Hold, error) {
	if s.Workflow == nil {
		return workflow.Hold{}, fmt.Errorf("%w: legal holds are not enabled", ErrInvalid)
	}
	if err := subject.ValidateTenant(in.TenantID); err != nil {
		return workflow.Hold{}, err
	}
	if strings.TrimSpace(in.LegalBasis) == "" {
		return workflow.Hold{}, fmt.Errorf("%w: legal_basis is required", ErrInvalid)
	}
	if len(in.Reason) > 500 || len(in.LegalBasis) > 200 {
		return workflow.Hold{}, fmt.Errorf("%w: reason is at most 500 bytes, legal_basis 200", ErrInvalid)
	}
	if in.Store != "" {
		if _, ok := s.Inventory.Entry(in.Store); !ok {
			return workflow.Hold{}, fmt.Errorf("%w: store %q is not in inventory %s", ErrInvalid, in.Store, s.Inventory.Version)
		}
	}
	if err := s.mayHold(p, in.TenantID); err != nil {
		return workflow.Hold{}, err
	}
	h := workflow.Hold{
		ID: "hold_" + strings.ReplaceAll(uuid.NewString(), "-", ""), TenantID: in.TenantID, Store: in.Store,
		Reason: pii.Mask(in.Reason), LegalBasis: pii.Mask(in.LegalBasis), CreatedBy: p.Name, CreatedAt: s.now(),
	}
	if in.SubjectID != "" {
		if err := subject.ValidateID("subject_id", in.SubjectID); err != nil {
			return workflow.Hold{}, err
		}
		h.SubjectHash = s.Key.Pseudonym(in.TenantID, in.SubjectID)
	}
	if err := s.Workflow.PutHold(ctx, h); err != nil {
		return workflow.Hold{}, s.unavailable(ErrStateStoreUnavailable, in.TenantID, err)
	}
	s.log().Info("legal hold placed", zap.String("hold_id", h.ID), zap.String("tenant", h.TenantID),
		zap.String("store", h.Store), zap.String("subject_hash", h.SubjectHash))
	return h, nil
}

// ReleaseHold releases the hold id and re-drives, for every request whose receipt lists a
// store EXEMPT under it, those stores (unless another hold still covers them).
func (s *Service) ReleaseHold(ctx context.Context, p auth.Principal, id string) (ReleaseResponse, error) {
	if s.Workflow == nil {
		return ReleaseResponse{}, fmt.Errorf("%w: legal holds are not enabled", ErrInvalid)
	}
	holds, err := s.Workflow.Holds(ctx)
	if err != nil {
		return ReleaseResponse{}, s.unavailable(ErrStateStoreUnavailable, "", err)
	}
	i := slices.IndexFunc(holds, func(h workflow.Hold) bool { return h.ID == id })
	if i < 0 || s.Auth != nil && !p.May(holds[i].TenantID) {
		return ReleaseResponse{}, fmt.Errorf("%w: no such hold", errNoHold)
	}
	h := holds[i]
	if err := s.mayHold(p, h.TenantID); err != nil {
		return ReleaseResponse{}, err
	}
	if !h.Active() {
		return ReleaseResponse{}, fmt.Errorf("%w: the hold is released", ErrState)
	}
	h.ReleasedBy, h.ReleasedAt = p.Name, s.now()
	if err := s.Workflow.PutHold(ctx, h); err != nil {
		return ReleaseResponse{}, s.unavailable(ErrStateStoreUnavailable, h.TenantID, err)
	}
	s.log().Info("legal hold released", zap.String("hold_id", h.ID), zap.String("tenant", h.TenantID))
	out := ReleaseResponse{Hold: h, Redriven: []string{}}
	recs, err := s.Workflow.List(ctx)
	if err != nil {
		return out, s.unavailable(ErrStateStoreUnavailable, h.TenantID, err)
	}
	for _, rec := range recs {
		if rec.TenantID != h.TenantID || rec.State != workflow.Released {
			continue
		}
		stores, err := s.heldBy(ctx, rec.RequestID, h.ID)
		if err != nil {
			return out, err
		}
		if len(stores) == 0 {
			continue
		}
		if rec.Event == nil {
			out.NotKept = append(out.NotKept, rec.RequestID)
			continue
		}
		req, err := s.redriveHeld(ctx, rec, stores)
		if err != nil {
			return out, err
		}
		if len(req.Exempt) == len(stores) {
			out.Remaining = append(out.Remaining, rec.RequestID)
			continue
		}
		out.Redriven = append(out.Redriven, rec.RequestID)
	}
	return out, nil
}

var errNoHold = errors.New("not found")

// mayHold checks that p may place and release holds in tenant: it acts for the tenant and
// holds auth.RoleHolds (when authentication is on).
func (s *Service) mayHold(p auth.Principal, tenant string) error {
	switch {
	case s.Auth == nil || s.Auth.Disabled():
		return nil
	case !p.May(tenant):
		return fmt.Errorf("%w: the token may not act for this tenant", ErrForbidden)
	case !p.Has(auth.RoleHolds):
		return fmt.Errorf("%w: legal holds need the %s role", ErrForbidden, auth.RoleHolds)
	}
	return nil
}

// heldBy returns the stores of requestID that reported EXEMPT under hold id.
func (s *Service) heldBy(ctx context.Context, requestID, id string) ([]string, error) {
	reports, err := s.Store.Reports(ctx, requestID)
	if err != nil {
		return nil, s.unavailable(ErrStateStoreUnavailable, "", err)
	}
	var out []string
	for _, d := range reports {
		if d.Status == event.StatusExempt && strings.Contains(d.Verification.Method, "(hold "+id+")") {
			out = append(out, d.Store)
		}
	}
	return out, nil
}

// redriveHeld publishes the kept request again for only stores, at a higher attempt.
func (s *Service) redriveHeld(ctx context.Context, rec workflow.Record, stores []string) (event.Requested, error) {
	var req event.Requested
	if err := event.Request.Decode(rec.Event, &req); err != nil {
		return req, fmt.Errorf("intake: decode kept request: %w", err)
	}
	prev, err := s.Store.GetRequest(ctx, rec.RequestID)
	if err != nil {
		return req, s.unavailable(ErrStateStoreUnavailable, rec.TenantID, err)
	}
	req.OnlyStores, req.Attempt, req.DryRun = stores, prev.Attempt+1, false
	if err := s.admit(ctx, &req, &rec); errors.Is(err, ErrState) && len(req.Exempt) == len(stores) {
		return req, nil // still held by another hold
	} else if err != nil {
		return req, err
	}
	if err := s.publish(ctx, &req); err != nil {
		return req, err
	}
	if err := s.Store.PutRequest(ctx, auditlog.RequestOf(&req)); err != nil {
		s.log().Warn("request state not recorded", zap.String("request_id", req.RequestID), zap.Error(err))
	}
	return req, nil
}

func (s *Service) handleHold(w http.ResponseWriter, r *http.Request) {
	var body HoldRequest
	if !s.decodeBody(w, r, &body) {
		return
	}
	h, err := s.PlaceHold(r.Context(), principal(r), body)
	if s.verbFailed(w, err) {
		return
	}
	writeJSON(w, http.StatusCreated, h)
}

func (s *Service) handleHolds(w http.ResponseWriter, r *http.Request) {
	tenant, ok := s.listTenant(w, r, r.URL.Query().Get("tenant"))
	if !ok {
		return
	}
	out := []workflow.Hold{}
	if s.Workflow != nil {
		holds, err := s.Workflow.Holds(r.Context())
		if s.verbFailed(w, unavailableIf(err)) {
			return
		}
		p := principal(r)
		for _, h := range holds {
			if (tenant == "" || h.TenantID == tenant) && s.visible(p, h.TenantID) {
				out = append(out, h)
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"holds": out})
}

func (s *Service) handleRelease(w http.ResponseWriter, r *http.Request) {
	out, err := s.ReleaseHold(r.Context(), principal(r), r.PathValue("id"))
	if errors.Is(err, errNoHold) {
		writeError(w, http.StatusNotFound, "no such hold")
		return
	}
	if s.verbFailed(w, err) {
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func unavailableIf(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrStateStoreUnavailable, err)
}
