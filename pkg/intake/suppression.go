package intake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/pii"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// MaxCheckIdentifiers bounds the identifiers (subject and session ids together) of one
// suppression check or lift.
const MaxCheckIdentifiers = 1000

// MaxLiftReasonBytes bounds the reason of a lift.
const MaxLiftReasonBytes = 500

// BasisConsent is the one basis on which a suppression is lifted: a new consent of the
// data subject, which the controller records and refers to in the reason.
const BasisConsent = "consent"

// CheckRequest is the body of POST /v1/suppressions/check: identifiers in the body, never
// in the URL.
type CheckRequest struct {
	TenantID   string   `json:"tenant_id"`
	SubjectIDs []string `json:"subject_ids"`
	SessionIDs []string `json:"session_ids"`
}

// CheckResult is the answer for one identifier. It names the identifier by its position
// and its pseudonym only.
type CheckResult struct {
	Pseudonym  string `json:"pseudonym"`
	Suppressed bool   `json:"suppressed"`
	// By is what suppresses it: SUBJECT or SESSION (its own entry) or TENANT (the whole
	// tenant was erased); empty when not suppressed.
	By           string     `json:"by,omitempty"`
	RequestID    string     `json:"request_id,omitempty"`
	ReceiptID    string     `json:"receipt_id,omitempty"`
	SuppressedAt *time.Time `json:"suppressed_at,omitempty"`
	// Lifted is set when the identifier was erased and its suppression lifted by consent.
	Lifted bool `json:"lifted,omitempty"`
}

// CheckResponse is the answer of a check: one result per identifier, in the order given.
type CheckResponse struct {
	TenantID string        `json:"tenant_id"`
	KeyID    string        `json:"key_id"`
	Subjects []CheckResult `json:"subjects"`
	Sessions []CheckResult `json:"sessions"`
}

// LiftRequest is the body of POST /v1/suppressions/lift.
type LiftRequest struct {
	TenantID   string   `json:"tenant_id"`
	SubjectIDs []string `json:"subject_ids"`
	SessionIDs []string `json:"session_ids"`
	Basis      string   `json:"basis"`  // BasisConsent
	Reason     string   `json:"reason"` // e.g. the controller's reference of the consent record
}

// Lift outcomes in LiftResult.
const (
	LiftLifted        = "LIFTED"         // lifted by this call
	LiftAlreadyLifted = "ALREADY_LIFTED" // lifted before
	LiftNotSuppressed = "NOT_SUPPRESSED" // never suppressed: nothing to lift
)

const (
	liftEventIDPrefix  = "lift-"
	suppressionTimeout = 10 * time.Second // bounds the store reads and the publication of one call
)

// LiftResult is the outcome for one identifier of a lift, in the order given.
type LiftResult struct {
	Pseudonym   string `json:"pseudonym"`
	Outcome     string `json:"outcome"`
	LiftEventID string `json:"lift_event_id,omitempty"`
}

// LiftResponse is the answer of a lift.
type LiftResponse struct {
	TenantID string       `json:"tenant_id"`
	Subjects []LiftResult `json:"subjects"`
	Sessions []LiftResult `json:"sessions"`
}

// validIdentifiers checks the tenant and identifiers of a check or a lift.
func validIdentifiers(tenant string, subjects, sessions []string) error {
	if err := subject.ValidateTenant(tenant); err != nil {
		return err
	}
	n := len(subjects) + len(sessions)
	switch {
	case n == 0:
		return fmt.Errorf("%w: name at least one of subject_ids and session_ids", ErrInvalid)
	case n > MaxCheckIdentifiers:
		return fmt.Errorf("%w: more than %d identifiers", ErrInvalid, MaxCheckIdentifiers)
	}
	for _, id := range subjects {
		if err := subject.ValidateID("subject_ids[]", id); err != nil {
			return err
		}
	}
	for _, id := range sessions {
		if err := subject.ValidateID("session_ids[]", id); err != nil {
			return err
		}
	}
	return nil
}

// Check answers which of the identifiers of tenant are suppressed: their keyed pseudonyms
// (subject.Key.Pseudonym, SessionPseudonym) are looked up in the tenant's list, one read
// per identifier plus one for the tenant itself (a whole-tenant erasure suppresses every
// identifier of the tenant), whatever the number of erasures. Another tenant's entries are
// never read: pseudonyms and entries are both tenant-scoped. Errors wrap ErrInvalid or
// ErrUnavailable.
func (s *Service) Check(ctx context.Context, in CheckRequest) (CheckResponse, error) {
	if err := validIdentifiers(in.TenantID, in.SubjectIDs, in.SessionIDs); err != nil {
		return CheckResponse{}, err
	}
	ss := s.Store
	whole, err := s.entry(ctx, ss, in.TenantID, s.Key.Pseudonym(in.TenantID, ""))
	if err != nil {
		return CheckResponse{}, err
	}
	answer := func(pseudonym string) (CheckResult, error) {
		e := whole
		if !e.Active() {
			var err error
			if e, err = s.entry(ctx, ss, in.TenantID, pseudonym); err != nil {
				return CheckResult{}, err
			}
		}
		r := CheckResult{Pseudonym: pseudonym, Lifted: e.State == event.Lifted}
		if e.Active() {
			at := e.SuppressedAt
			r.Suppressed, r.By, r.RequestID, r.ReceiptID, r.SuppressedAt = true, e.Kind, e.RequestID, e.ReceiptID, &at
		}
		return r, nil
	}
	out := CheckResponse{TenantID: in.TenantID, KeyID: s.Key.ID()}
	if out.Subjects, out.Sessions, err = perIdentifier(s.Key, in.TenantID, in.SubjectIDs, in.SessionIDs, answer); err != nil {
		return CheckResponse{}, err
	}
	return out, nil
}

// perIdentifier calls fn with the pseudonym of each subject id, then of each session id,
// of tenant, and returns the results in the same order; it stops at the first error.
func perIdentifier[R any](k subject.Key, tenant string, subjects, sessions []string, fn func(pseudonym string) (R, error)) (subjectResults, sessionResults []R, err error) {
	subjectResults, sessionResults = []R{}, []R{}
	for _, id := range subjects {
		r, err := fn(k.Pseudonym(tenant, id))
		if err != nil {
			return nil, nil, err
		}
		subjectResults = append(subjectResults, r)
	}
	for _, id := range sessions {
		r, err := fn(k.SessionPseudonym(tenant, id))
		if err != nil {
			return nil, nil, err
		}
		sessionResults = append(sessionResults, r)
	}
	return subjectResults, sessionResults, nil
}

// entry returns the entry of pseudonym, the zero Suppression when there is none.
func (s *Service) entry(ctx context.Context, ss auditlog.SuppressionStore, tenant, pseudonym string) (event.Suppression, error) {
	e, err := ss.GetSuppression(ctx, tenant, pseudonym)
	switch {
	case errors.Is(err, auditlog.ErrNotFound):
		return event.Suppression{}, nil
	case err != nil:
		return event.Suppression{}, s.unavailable(ErrStateStoreUnavailable, tenant, err)
	}
	return e, nil
}

// Lift lifts the suppression of each identifier on the authority of principal p, which
// must be scoped to the tenant by name (see authorizeLift). For each suppressed identifier
// it appends an audit event (TypeSuppressionLifted: the pseudonym, p's name, the reason
// with PII patterns masked; no raw identifier) and then marks the entry LIFTED, so no lift
// exists without its event; every entry found, lifted now or before, is then published on
// erasure.suppressions (idempotent: the topic is compacted), so a call repeated after a
// failed publication publishes it. Errors wrap ErrInvalid or ErrUnavailable.
func (s *Service) Lift(ctx context.Context, p auth.Principal, in LiftRequest) (LiftResponse, error) {
	if err := validIdentifiers(in.TenantID, in.SubjectIDs, in.SessionIDs); err != nil {
		return LiftResponse{}, err
	}
	if in.Basis != BasisConsent {
		return LiftResponse{}, fmt.Errorf("%w: basis must be %q: a suppression is lifted only by a new consent of the data subject", ErrInvalid, BasisConsent)
	}
	reason := strings.TrimSpace(in.Reason)
	switch {
	case reason == "":
		return LiftResponse{}, fmt.Errorf("%w: reason is required (for example the reference of the consent record)", ErrInvalid)
	case len(reason) > MaxLiftReasonBytes:
		return LiftResponse{}, fmt.Errorf("%w: reason is longer than %d bytes", ErrInvalid, MaxLiftReasonBytes)
	}
	for _, id := range append(slices.Clone(in.SubjectIDs), in.SessionIDs...) {
		if strings.Contains(reason, id) {
			return LiftResponse{}, fmt.Errorf("%w: reason must not hold the identifiers (the audit trail keeps pseudonyms only)", ErrInvalid)
		}
	}
	ss := s.Store
	out := LiftResponse{TenantID: in.TenantID}
	var recs []*kgo.Record
	lift := func(pseudonym string) (LiftResult, error) {
		r := LiftResult{Pseudonym: pseudonym, Outcome: LiftNotSuppressed}
		cur, err := s.entry(ctx, ss, in.TenantID, pseudonym)
		if err != nil || cur.Version == 0 {
			return r, err
		}
		if !cur.Active() {
			r.Outcome, r.LiftEventID = LiftAlreadyLifted, cur.LiftEventID
		} else {
			if cur, err = s.liftOne(ctx, ss, p, in.TenantID, pseudonym, pii.Mask(reason)); err != nil {
				return r, err
			}
			r.Outcome, r.LiftEventID = LiftLifted, cur.LiftEventID
		}
		rec, err := s.Registry.Record(s.suppressionsTopic(), event.Suppressions, event.SuppressionKey(cur.TenantID, cur.Pseudonym), &cur)
		if err != nil {
			return r, fmt.Errorf("intake: encode suppression: %w", err)
		}
		recs = append(recs, rec)
		return r, nil
	}
	var err error
	if out.Subjects, out.Sessions, err = perIdentifier(s.Key, in.TenantID, in.SubjectIDs, in.SessionIDs, lift); err != nil {
		return LiftResponse{}, err
	}
	if len(recs) > 0 {
		if err := s.Producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return LiftResponse{}, s.unavailable(ErrBrokerUnavailable, in.TenantID, err)
		}
	}
	return out, nil
}

// liftOne records the lift of one suppressed pseudonym: its audit event, then the entry.
func (s *Service) liftOne(ctx context.Context, ss auditlog.SuppressionStore, p auth.Principal, tenant, pseudonym, reason string) (event.Suppression, error) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	ev := auditlog.Event{
		EventID: liftEventIDPrefix + hex.EncodeToString(b[:]), TenantID: tenant, SubjectHash: pseudonym, KeyID: s.Key.ID(),
		Type: auditlog.TypeSuppressionLifted, Actor: p.Name, Reason: reason, At: s.now().UTC(),
	}
	if err := s.Store.AppendEvent(ctx, ev); err != nil {
		return event.Suppression{}, s.unavailable(ErrStateStoreUnavailable, tenant, fmt.Errorf("record lift: %w", err))
	}
	cur, _, err := auditlog.Lift(ctx, ss, tenant, pseudonym, p.Name, ev.EventID, ev.At)
	if err != nil {
		return event.Suppression{}, s.unavailable(ErrStateStoreUnavailable, tenant, err)
	}
	s.log().Info("suppression lifted", zap.String("tenant", tenant), zap.String("subject_hash", pseudonym),
		zap.String("principal", p.Name), zap.String("event_id", ev.EventID), zap.String("request_id", cur.RequestID))
	return cur, nil
}

func (s *Service) suppressionsTopic() string {
	if s.SuppressionsTopic == "" {
		return event.TopicSuppressions
	}
	return s.SuppressionsTopic
}

// handleCheck answers POST /v1/suppressions/check: validated, then authorised for the
// tenant and rate-limited like a submission. The log line counts, it never names.
func (s *Service) handleCheck(w http.ResponseWriter, r *http.Request) {
	var body CheckRequest
	if !s.decodeBody(w, r, &body) {
		return
	}
	if err := validIdentifiers(body.TenantID, body.SubjectIDs, body.SessionIDs); err != nil {
		s.reject(w, http.StatusBadRequest, metrics.ReasonInvalid, err.Error())
		return
	}
	if !s.authorize(w, r, body.TenantID) || !s.limit(w, body.TenantID) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), suppressionTimeout)
	defer cancel()
	res, err := s.Check(ctx, body)
	if s.suppressionFailed(w, err) {
		return
	}
	n := 0
	for _, c := range append(slices.Clone(res.Subjects), res.Sessions...) {
		if c.Suppressed {
			n++
		}
	}
	s.log().Info("suppression check", zap.String("tenant", body.TenantID),
		zap.Int("identifiers", len(res.Subjects)+len(res.Sessions)), zap.Int("suppressed", n))
	writeJSON(w, http.StatusOK, res)
}

// handleLift answers POST /v1/suppressions/lift; see authorizeLift for who may.
func (s *Service) handleLift(w http.ResponseWriter, r *http.Request) {
	var body LiftRequest
	if !s.decodeBody(w, r, &body) {
		return
	}
	if err := validIdentifiers(body.TenantID, body.SubjectIDs, body.SessionIDs); err != nil {
		s.reject(w, http.StatusBadRequest, metrics.ReasonInvalid, err.Error())
		return
	}
	p, ok := s.authorizeLift(w, r, body.TenantID)
	if !ok || !s.limit(w, body.TenantID) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), suppressionTimeout)
	defer cancel()
	res, err := s.Lift(ctx, p, body)
	if s.suppressionFailed(w, err) {
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// authorizeLift returns the principal that may lift suppressions of tenant, or answers
// 403: lifting undoes an erasure, so it needs an authenticated principal whose token names
// the tenant itself. With authentication disabled, and for an operator's wildcard token,
// it is refused.
func (s *Service) authorizeLift(w http.ResponseWriter, r *http.Request, tenant string) (auth.Principal, bool) {
	if s.Auth == nil || s.Auth.Disabled() {
		s.reject(w, http.StatusForbidden, metrics.ReasonForbidden, "forbidden: lifting a suppression needs an authenticated principal; authentication is disabled")
		return auth.Principal{}, false
	}
	p, ok := auth.PrincipalFrom(r.Context())
	if !ok {
		s.reject(w, http.StatusUnauthorized, metrics.ReasonUnauthenticated, "unauthenticated")
		return auth.Principal{}, false
	}
	if !slices.Contains(p.Tenants, tenant) {
		s.reject(w, http.StatusForbidden, metrics.ReasonForbidden, "forbidden: lifting a suppression needs a token scoped to this tenant by name")
		return auth.Principal{}, false
	}
	if !p.Has(auth.RoleLift) {
		s.reject(w, http.StatusForbidden, metrics.ReasonForbidden, "forbidden: lifting a suppression needs the "+auth.RoleLift+" role")
		return auth.Principal{}, false
	}
	return p, true
}

// suppressionFailed answers the error of a check or a lift, if any.
func (s *Service) suppressionFailed(w http.ResponseWriter, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrInvalid):
		s.reject(w, http.StatusBadRequest, metrics.ReasonInvalid, err.Error())
	case errors.Is(err, ErrUnavailable):
		s.reject(w, http.StatusServiceUnavailable, metrics.ReasonUnavailable, UnavailableReason(err))
	default:
		s.log().Error("suppression request failed", zap.Error(err))
		writeError(w, http.StatusInternalServerError, "internal error")
	}
	return true
}
