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
)

// ReviewRequest is the body of POST /v1/erasures/{id}/review: a decision on one item of
// the receipt's review list. DISMISS needs a reason; ERASE may give one.
type ReviewRequest struct {
	Store    string `json:"store"`
	Item     string `json:"item"`
	Decision string `json:"decision"` // event.ReviewErase or event.ReviewDismiss
	Reason   string `json:"reason"`
}

// ReviewResponse answers it: the review's id, which its addenda carry as their pass, and
// the decision as it will be recorded.
type ReviewResponse struct {
	RequestID  string               `json:"request_id"`
	Review     string               `json:"review"`
	Decision   event.ReviewDecision `json:"decision"`
	AddendaURL string               `json:"addenda_url"`
}

// Review publishes a decision on an item of requestID's receipt's review list. The
// aggregator records it as a REVIEWED addendum; an ERASE decision has the item's store
// erase that item alone, recorded as ITEM_ERASED. It needs auth.RoleApprover. It fails with
// an error wrapping auditlog.ErrNotFound for an unknown request, ErrInvalid for an item the
// review list lacks or a decision without reason, ErrState for a request without receipt,
// an item decided already (unless its erasure failed) or an erase in a store under a legal
// hold, ErrForbidden without the role.
func (s *Service) Review(ctx context.Context, p auth.Principal, requestID string, in ReviewRequest) (ReviewResponse, error) {
	req, err := s.Store.GetRequest(ctx, requestID)
	switch {
	case errors.Is(err, auditlog.ErrNotFound):
		return ReviewResponse{}, err
	case err != nil:
		return ReviewResponse{}, s.unavailable(ErrStateStoreUnavailable, "", err)
	}
	if s.Auth != nil && !p.May(req.TenantID) {
		return ReviewResponse{}, fmt.Errorf("%w: no such request", auditlog.ErrNotFound)
	}
	if s.Auth != nil && !p.Has(auth.RoleApprover) {
		return ReviewResponse{}, fmt.Errorf("%w: deciding on a review item needs the %s role", ErrForbidden, auth.RoleApprover)
	}
	dec, err := validReview(in)
	if err != nil {
		return ReviewResponse{}, err
	}
	rc, err := s.Store.GetReceipt(ctx, requestID)
	switch {
	case errors.Is(err, auditlog.ErrNotFound):
		return ReviewResponse{}, fmt.Errorf("%w: the request has no receipt yet", ErrState)
	case err != nil:
		return ReviewResponse{}, s.unavailable(ErrStateStoreUnavailable, req.TenantID, err)
	}
	i := slices.IndexFunc(rc.Review, func(it event.ReviewItem) bool { return it.Store == dec.Store && it.Item == dec.Item })
	if i < 0 {
		return ReviewResponse{}, fmt.Errorf("%w: store %q lists no item %q for review in this receipt", ErrInvalid, dec.Store, dec.Item)
	}
	dec.Kind = rc.Review[i].Kind
	ads, err := s.Store.AddendaOf(ctx, requestID)
	if err != nil {
		return ReviewResponse{}, s.unavailable(ErrStateStoreUnavailable, req.TenantID, err)
	}
	if ad, ok := decided(ads, dec.Store, dec.Item); ok {
		return ReviewResponse{}, fmt.Errorf("%w: the item was decided on (%s, addendum %d)", ErrState, ad.Review.Decision, ad.Seq)
	}
	pass := "review-" + strings.ReplaceAll(uuid.NewString(), "-", "")
	ev := event.Requested{
		RequestID: rc.RequestID, TenantID: rc.TenantID, SubjectHash: rc.SubjectHash, KeyID: rc.KeyID,
		Identifiers: event.Identifiers{SessionIDs: []string{}}, Scope: rc.Scope, Regulation: rc.Regulation,
		RequestedAt: rc.RequestedAt, DueAt: rc.DueAt, InventoryVersion: rc.InventoryVersion,
		ExpectedStores: []string{dec.Store}, OnlyStores: []string{dec.Store}, Attempt: 1,
		Purpose: event.PurposeReview, Pass: pass, Review: &dec,
	}
	if dec.Decision == event.ReviewErase && s.Workflow != nil {
		if err := s.exempt(ctx, &ev); err != nil {
			return ReviewResponse{}, err
		}
		if len(ev.Exempt) > 0 {
			return ReviewResponse{}, fmt.Errorf("%w: store %q is under legal hold %s: erase the item after its release", ErrState, dec.Store, ev.Exempt[0].HoldID)
		}
	}
	if err := s.send(ctx, &ev); err != nil {
		return ReviewResponse{}, err
	}
	s.log().Info("review item decided", zap.String("request_id", rc.RequestID), zap.String("tenant", rc.TenantID),
		zap.String("store", dec.Store), zap.String("decision", dec.Decision), zap.String("review", pass), zap.String("by", p.Name))
	return ReviewResponse{RequestID: rc.RequestID, Review: pass, Decision: dec, AddendaURL: "/v1/erasures/" + rc.RequestID + "/addenda"}, nil
}

// decided returns the REVIEWED addendum of the item of store that stands: a dismissal, or
// an erase that succeeded or is in progress. An erase whose read-back failed (UNVERIFIED)
// does not stand, so the item may be decided again.
func decided(ads []auditlog.Addendum, store, item string) (auditlog.Addendum, bool) {
	failed := map[string]bool{}
	for _, ad := range ads {
		if ad.Type == auditlog.AddendumUnverified && ad.Purpose == event.PurposeReview {
			failed[ad.Pass] = true
		}
	}
	for _, ad := range ads {
		if ad.Type == auditlog.AddendumReviewed && ad.Review != nil && ad.Review.Store == store && ad.Review.Item == item && !failed[ad.Pass] {
			return ad, true
		}
	}
	return auditlog.Addendum{}, false
}

// validReview checks in and returns its decision, the reason masked of identity-like
// values.
func validReview(in ReviewRequest) (event.ReviewDecision, error) {
	d := event.ReviewDecision{Store: in.Store, Item: in.Item, Decision: strings.ToUpper(strings.TrimSpace(in.Decision)), Reason: strings.TrimSpace(in.Reason)}
	switch {
	case d.Store == "" || d.Item == "":
		return d, fmt.Errorf("%w: store and item are required", ErrInvalid)
	case d.Decision != event.ReviewErase && d.Decision != event.ReviewDismiss:
		return d, fmt.Errorf("%w: decision must be %s or %s", ErrInvalid, event.ReviewErase, event.ReviewDismiss)
	case d.Decision == event.ReviewDismiss && d.Reason == "":
		return d, fmt.Errorf("%w: dismissing an item needs a reason (why it is not the subject's)", ErrInvalid)
	case len(d.Reason) > 500:
		return d, fmt.Errorf("%w: reason is at most 500 bytes", ErrInvalid)
	}
	d.Reason = pii.Mask(d.Reason)
	return d, nil
}

func (s *Service) handleReview(w http.ResponseWriter, r *http.Request) {
	var in ReviewRequest
	if !s.decodeBody(w, r, &in) {
		return
	}
	out, err := s.Review(r.Context(), principal(r), r.PathValue("id"), in)
	if s.verbFailed(w, err) {
		return
	}
	writeJSON(w, http.StatusAccepted, out)
}
