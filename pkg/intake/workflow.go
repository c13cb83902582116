package intake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// SubmitOptions are the workflow's options of a submission.
type SubmitOptions struct {
	// DryRun counts per store what the erasure would delete and deletes nothing; the
	// request ends PREVIEWED and may be confirmed (Confirm).
	DryRun bool
	// Channel is how the request arrived, the channel label of lethe_requests_total:
	// http, kafka or replay; empty counts as api (a Go caller).
	Channel string
}

// Request states of the workflow, beside the pipeline's (PENDING … COMPLETE).
const (
	StatePreviewed        = string(workflow.Previewed)
	StateScheduled        = string(workflow.Scheduled)
	StateCancelled        = string(workflow.Cancelled)
	StateAwaitingApproval = string(workflow.AwaitingApproval)
	StateRejected         = string(workflow.Rejected)
	// StatePartial: the receipt exists and lists stores under a legal hold EXEMPT.
	StatePartial = "PARTIAL"
)

// Errors of the workflow's verbs.
var (
	// ErrForbidden: the principal may not do this (not an approver, or its own request).
	ErrForbidden = errors.New("forbidden")
	// ErrState: the request is not in a state that allows it (409).
	ErrState = workflow.ErrTransition
)

// Windows are cancellation windows: a tenant's ("tenant:acme") overrides its
// regulation's ("GDPR"). No entry: no window.
type Windows map[string]time.Duration

// For returns the window of a request of tenant under regulation.
func (w Windows) For(tenant, regulation string) time.Duration {
	if d, ok := w["tenant:"+tenant]; ok {
		return d
	}
	return w[strings.ToUpper(regulation)]
}

// UnmarshalText parses a list of cancellation windows: "GDPR=24h,tenant:acme=0s".
func (w *Windows) UnmarshalText(b []byte) error {
	out := Windows{}
	for _, kv := range strings.Split(string(b), ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if !ok || k == "" || err != nil || d < 0 {
			return fmt.Errorf("entry %q: want REGULATION=duration or tenant:ID=duration", kv)
		}
		if !strings.HasPrefix(k, "tenant:") {
			k = strings.ToUpper(k)
		}
		out[k] = d
	}
	*w = out
	return nil
}

// MarshalText writes w's entries in key order.
func (w Windows) MarshalText() ([]byte, error) { return marshalDurations(w), nil }

// gate records req in the workflow when it must pass a gate before it runs (a dry run is
// published as one, and recorded PREVIEWED) and returns the state it recorded; an ungated
// request gets the exemptions of the legal holds covering it and "", and is published by
// the caller.
func (s *Service) gate(ctx context.Context, req *event.Requested, actor string, opts SubmitOptions) (workflow.State, error) {
	if s.Workflow == nil {
		if opts.DryRun {
			return "", fmt.Errorf("%w: dry runs are not enabled", ErrInvalid)
		}
		return "", s.admit(ctx, req, nil)
	}
	now := s.now()
	rec := workflow.Record{
		RequestID: req.RequestID, TenantID: req.TenantID, SubjectHash: req.SubjectHash, Scope: req.Scope,
		Regulation: req.Regulation, SubmittedBy: actor, SubmittedAt: now, DueAt: req.DueAt,
		Window:        s.Windows.For(req.TenantID, req.Regulation),
		NeedsApproval: s.needsApproval(req),
	}
	if opts.DryRun {
		req.DryRun = true
		if err := s.publish(ctx, req); err != nil {
			return "", err
		}
		if err := s.Store.PutRequest(ctx, auditlog.RequestOf(req)); err != nil {
			s.log().Warn("request state not recorded", zap.String("request_id", req.RequestID), zap.Error(err))
		}
		rec.State = workflow.Previewed
		rec.History = []workflow.Transition{{To: workflow.Previewed, Actor: actor, At: now}}
		real := *req
		real.DryRun = false
		if rec.Event, _ = s.keepable(&real); rec.Event == nil {
			s.log().Info("dry run kept without identifiers: confirming it needs them again", zap.String("request_id", req.RequestID))
		}
		if err := s.Workflow.Create(ctx, rec); err != nil {
			return "", s.unavailable(ErrStateStoreUnavailable, req.TenantID, fmt.Errorf("record dry run: %w", err))
		}
		s.log().Info("dry run requested", zap.String("request_id", req.RequestID), zap.String("tenant", req.TenantID))
		return workflow.Previewed, nil
	}
	next := rec.Next()
	if next == workflow.Released {
		rec.State = workflow.Released
		return "", s.admit(ctx, req, &rec)
	}
	if err := s.seal(ctx, req); err != nil {
		return "", err
	}
	b, err := s.keepable(req)
	if err != nil {
		return "", err
	}
	rec.Event, rec.State = b, next
	if next == workflow.Scheduled {
		rec.ExecuteAt = now.Add(rec.Window)
	}
	rec.History = []workflow.Transition{{To: next, Actor: actor, At: now}}
	if err := s.Workflow.Create(ctx, rec); err != nil {
		return "", s.unavailable(ErrStateStoreUnavailable, req.TenantID, fmt.Errorf("record gated request: %w", err))
	}
	s.log().Info("erasure gated", zap.String("request_id", req.RequestID), zap.String("tenant", req.TenantID),
		zap.String("state", string(next)), zap.Time("execute_at", rec.ExecuteAt))
	return next, nil
}

// seal seals req's identifiers without publishing it, so they can wait in the workflow.
func (s *Service) seal(ctx context.Context, req *event.Requested) error {
	if s.Sealer == nil || req.Sealed != nil {
		return nil
	}
	sealed, err := s.Sealer.SealIdentifiers(ctx, req.RequestID, req.Identifiers)
	if err != nil {
		return s.unavailable(ErrKeyStoreUnavailable, req.TenantID, fmt.Errorf("seal identifiers: %w", err))
	}
	req.Sealed, req.Identifiers = sealed, event.Identifiers{SessionIDs: []string{}}
	return nil
}

// keepable encodes req to be kept in the workflow: only when it carries no identifier in
// the clear (they are sealed, or it is a TENANT request). Kept events are in
// single-object encoding whatever the topic's framing, so the workflow store reads back
// without a registry; publish frames them when they are released. Otherwise it returns nil and,
// for a request that must wait, an error: without a sealer Lethe keeps no identifiers.
func (s *Service) keepable(req *event.Requested) ([]byte, error) {
	if req.Identifiers.SubjectID != "" || len(req.Identifiers.SessionIDs) > 0 {
		return nil, fmt.Errorf("%w: a request that waits (approval or cancellation window) needs sealed identifiers; configure the key store", ErrInvalid)
	}
	b, err := event.Request.Encode(req)
	if err != nil {
		return nil, fmt.Errorf("intake: encode: %w", err)
	}
	return b, nil
}

// exempt sets req.Exempt to the stores of req under an active legal hold.
func (s *Service) exempt(ctx context.Context, req *event.Requested) error {
	holds, err := s.Workflow.Holds(ctx)
	if err != nil {
		return s.unavailable(ErrStateStoreUnavailable, req.TenantID, fmt.Errorf("read holds: %w", err))
	}
	req.Exempt = []event.Exemption{}
	for _, st := range req.ExpectedStores {
		if !req.Acts(st) {
			continue
		}
		for _, h := range holds {
			if h.Covers(req.TenantID, req.SubjectHash, st, req.Scope == event.ScopeTenant) {
				req.Exempt = append(req.Exempt, event.Exemption{Store: st, HoldID: h.ID, LegalBasis: h.LegalBasis})
				break
			}
		}
	}
	return nil
}

// keepHeld records a published request with exempt stores as RELEASED with its (sealed)
// event, so that releasing the hold can re-drive the held stores.
func (s *Service) keepHeld(ctx context.Context, req *event.Requested, actor string) {
	if s.Workflow == nil || len(req.Exempt) == 0 {
		return
	}
	now := s.now()
	rec := workflow.Record{
		RequestID: req.RequestID, TenantID: req.TenantID, SubjectHash: req.SubjectHash, Scope: req.Scope,
		Regulation: req.Regulation, SubmittedBy: actor, SubmittedAt: now, DueAt: req.DueAt, State: workflow.Released,
		History: []workflow.Transition{{To: workflow.Released, Actor: actor, At: now}},
	}
	rec.Event, _ = s.keepable(req)
	if err := s.Workflow.Create(ctx, rec); err != nil && !errors.Is(err, workflow.ErrExists) {
		s.log().Warn("held request not recorded: releasing the hold will need its identifiers", zap.String("request_id", req.RequestID), zap.Error(err))
	}
}

// release moves rec to RELEASED by action and publishes its kept event at attempt. It
// claims the record before it publishes (a conditional write), so two replicas never
// both release it and a cancellation cannot race it; a publish that fails leaves the
// record RELEASED and unpublished, and Sweep publishes it again.
func (s *Service) release(ctx context.Context, rec workflow.Record, action workflow.Action, actor string, attempt int) (workflow.Record, error) {
	moved, err := rec.Move(action, workflow.Released, actor, s.now())
	if err != nil {
		return rec, err
	}
	if rec.Event == nil {
		return rec, fmt.Errorf("%w: the request's identifiers were not kept; submit it again", ErrInvalid)
	}
	var req event.Requested
	if err := event.Request.Decode(rec.Event, &req); err != nil {
		return rec, fmt.Errorf("intake: decode kept request: %w", err)
	}
	req.DryRun, req.Attempt = false, max(attempt, req.Attempt)
	if err := s.admit(ctx, &req, &moved); err != nil {
		return rec, err
	}
	if moved.Event, err = event.Request.Encode(&req); err != nil { // with its exemptions
		return rec, fmt.Errorf("intake: encode: %w", err)
	}
	moved.Unpublished = true
	claimed, err := s.Workflow.Swap(ctx, moved)
	if errors.Is(err, workflow.ErrConflict) {
		return rec, fmt.Errorf("%w: the request changed meanwhile", ErrState)
	}
	if err != nil {
		return rec, s.unavailable(ErrStateStoreUnavailable, rec.TenantID, fmt.Errorf("record release: %w", err))
	}
	s.log().Info("erasure released", zap.String("request_id", rec.RequestID), zap.String("tenant", rec.TenantID),
		zap.String("action", string(action)), zap.Int("exempt_stores", len(req.Exempt)))
	return s.publishReleased(ctx, claimed, &req)
}

// publishReleased publishes req, the event of the claimed record rec, records it and
// clears rec's Unpublished mark.
func (s *Service) publishReleased(ctx context.Context, rec workflow.Record, req *event.Requested) (workflow.Record, error) {
	if err := s.publish(ctx, req); err != nil {
		return rec, err
	}
	if err := s.Store.PutRequest(ctx, auditlog.RequestOf(req)); err != nil {
		s.log().Warn("request state not recorded", zap.String("request_id", req.RequestID), zap.Error(err))
	}
	rec.Unpublished = false
	out, err := s.Workflow.Swap(ctx, rec)
	if err != nil {
		// Published: a later sweep publishes it again, which the pipeline absorbs.
		s.log().Warn("release not marked published", zap.String("request_id", rec.RequestID), zap.Error(err))
		return rec, nil
	}
	return out, nil
}

// republish publishes again a record released more than a grace period ago whose
// publish was never acknowledged.
func (s *Service) republish(ctx context.Context, rec workflow.Record) error {
	if n := len(rec.History); n > 0 && s.now().Sub(rec.History[n-1].At) < republishGrace {
		return nil // its releaser is probably publishing it now
	}
	var req event.Requested
	if err := event.Request.Decode(rec.Event, &req); err != nil {
		return fmt.Errorf("intake: decode kept request: %w", err)
	}
	if err := s.admit(ctx, &req, &rec); err != nil {
		return err
	}
	_, err := s.publishReleased(ctx, rec, &req)
	return err
}

// republishGrace is how long a released record may stay unpublished before a sweep
// publishes it.
const republishGrace = 30 * time.Second

// gated returns the workflow record of requestID, authorised for p.
func (s *Service) gated(ctx context.Context, p auth.Principal, requestID string) (workflow.Record, error) {
	if s.Workflow == nil {
		return workflow.Record{}, fmt.Errorf("%w: no such gated request", auditlog.ErrNotFound)
	}
	rec, err := s.Workflow.Get(ctx, requestID)
	if errors.Is(err, workflow.ErrNotFound) {
		return rec, fmt.Errorf("%w: no such gated request", auditlog.ErrNotFound)
	}
	if err != nil {
		return rec, s.unavailable(ErrStateStoreUnavailable, "", err)
	}
	if s.Auth != nil && !p.May(rec.TenantID) {
		return rec, fmt.Errorf("%w: the token may not act for this tenant", ErrForbidden)
	}
	return rec, nil
}

// Confirm turns the dry run requestID into a real erasure: it passes the remaining gates
// (approval, window) or runs at once, superseding the dry run's counts (a higher attempt).
func (s *Service) Confirm(ctx context.Context, p auth.Principal, requestID string) (workflow.Record, error) {
	rec, err := s.gated(ctx, p, requestID)
	if err != nil {
		return rec, err
	}
	if rec.State != workflow.Previewed {
		return rec, fmt.Errorf("%w: confirm a %s request", ErrState, rec.State)
	}
	next := rec.Next()
	if next == workflow.Released {
		return s.release(ctx, rec, workflow.Confirm, p.Name, 2)
	}
	return s.advance(ctx, rec, workflow.Confirm, next, p.Name, func(r *workflow.Record) {
		if next == workflow.Scheduled {
			r.ExecuteAt = s.now().Add(r.Window)
		}
		s.bumpAttempt(r)
	})
}

// bumpAttempt makes the kept event of a confirmed dry run supersede its counts.
func (s *Service) bumpAttempt(r *workflow.Record) {
	var req event.Requested
	if r.Event == nil || event.Request.Decode(r.Event, &req) != nil {
		return
	}
	req.Attempt = 2
	if b, err := event.Request.Encode(&req); err == nil {
		r.Event = b
	}
}

// advance moves rec by action to a waiting state and stores it.
func (s *Service) advance(ctx context.Context, rec workflow.Record, action workflow.Action, to workflow.State, actor string, edit func(*workflow.Record)) (workflow.Record, error) {
	moved, err := rec.Move(action, to, actor, s.now())
	if err != nil {
		return rec, err
	}
	if edit != nil {
		edit(&moved)
	}
	out, err := s.Workflow.Swap(ctx, moved)
	if errors.Is(err, workflow.ErrConflict) {
		return rec, fmt.Errorf("%w: the request changed meanwhile", ErrState)
	}
	if err != nil {
		return rec, s.unavailable(ErrStateStoreUnavailable, rec.TenantID, err)
	}
	s.log().Info("erasure gate moved", zap.String("request_id", rec.RequestID), zap.String("tenant", rec.TenantID),
		zap.String("action", string(action)), zap.String("state", string(to)), zap.String("actor", actor))
	return out, nil
}

// Cancel cancels requestID while it waits: SCHEDULED within its window, or
// AWAITING_APPROVAL. The identifiers' key is destroyed and the cancellation is recorded in
// the audit trail (an event of type "erasure_cancelled" under the subject's pseudonym).
// After the window the request runs as any other, and Cancel answers ErrState.
func (s *Service) Cancel(ctx context.Context, p auth.Principal, requestID string) (workflow.Record, error) {
	rec, err := s.gated(ctx, p, requestID)
	if err != nil {
		return rec, err
	}
	if rec.State == workflow.Scheduled && !s.now().Before(rec.ExecuteAt) {
		return rec, fmt.Errorf("%w: the cancellation window has ended", ErrState)
	}
	out, err := s.advance(ctx, rec, workflow.Cancel, workflow.Cancelled, p.Name, func(r *workflow.Record) { r.Event = nil })
	if err != nil {
		return rec, err
	}
	if s.Sealer != nil {
		if err := s.Sealer.Shred(ctx, requestID); err != nil {
			s.log().Warn("identifiers key of a cancelled request not destroyed", zap.String("request_id", requestID), zap.Error(err))
		}
	}
	s.audit(ctx, rec, "erasure_cancelled", p.Name)
	return out, nil
}

// Decide approves (or rejects) the TENANT request requestID awaiting approval. p must
// hold auth.RoleApprover and must not be the principal that submitted it. An approved
// request then waits out its window, if any, or runs.
func (s *Service) Decide(ctx context.Context, p auth.Principal, requestID string, approve bool) (workflow.Record, error) {
	rec, err := s.gated(ctx, p, requestID)
	if err != nil {
		return rec, err
	}
	if s.Auth != nil && !p.Has(auth.RoleApprover) {
		return rec, fmt.Errorf("%w: approving needs the %s role", ErrForbidden, auth.RoleApprover)
	}
	if p.Name == rec.SubmittedBy {
		return rec, fmt.Errorf("%w: a second person must approve: the submitter cannot", ErrForbidden)
	}
	if rec.State != workflow.AwaitingApproval {
		return rec, fmt.Errorf("%w: decide on a %s request", ErrState, rec.State)
	}
	if !approve {
		out, err := s.advance(ctx, rec, workflow.Reject, workflow.Rejected, p.Name, func(r *workflow.Record) { r.Event = nil })
		if err == nil {
			s.audit(ctx, rec, "erasure_rejected", p.Name)
		}
		return out, err
	}
	rec.ApprovedBy = p.Name
	s.audit(ctx, rec, "erasure_approved", p.Name)
	if next := rec.Next(); next == workflow.Scheduled {
		return s.advance(ctx, rec, workflow.Approve, next, p.Name, func(r *workflow.Record) { r.ExecuteAt = s.now().Add(r.Window) })
	}
	return s.release(ctx, rec, workflow.Approve, p.Name, 1)
}

// Sweep releases every SCHEDULED request whose window has ended, and publishes again a
// released request whose publish was not acknowledged. The schedule is the workflow
// store, so a restarted intake releases what came due while it was down; replicas
// sharing the store release each request once.
func (s *Service) Sweep(ctx context.Context) error {
	if s.Workflow == nil {
		return nil
	}
	recs, err := s.Workflow.List(ctx)
	if err != nil {
		return fmt.Errorf("intake: list gated requests: %w", err)
	}
	now := s.now()
	var errs []error
	for _, r := range recs {
		var err error
		switch {
		case r.State == workflow.Scheduled && !now.Before(r.ExecuteAt):
			if _, err = s.release(ctx, r, workflow.Due, "scheduler", 1); errors.Is(err, ErrState) {
				err = nil // another replica released or cancelled it
			}
		case r.State == workflow.Released && r.Unpublished:
			err = s.republish(ctx, r)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RunSchedule sweeps every interval (default 1s) until ctx is done.
func (s *Service) RunSchedule(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log().Warn("schedule sweep failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// audit appends a workflow decision to the audit trail under the subject's pseudonym.
func (s *Service) audit(ctx context.Context, rec workflow.Record, typ, actor string) {
	e := auditlog.Event{
		EventID: typ + ":" + rec.RequestID, TenantID: rec.TenantID, SubjectHash: rec.SubjectHash,
		Type: typ, Actor: actor, Path: rec.RequestID, At: s.now(),
	}
	if err := s.Store.AppendEvent(ctx, e); err != nil {
		s.log().Warn("workflow decision not recorded in the audit trail", zap.String("request_id", rec.RequestID), zap.String("type", typ), zap.Error(err))
	}
}
