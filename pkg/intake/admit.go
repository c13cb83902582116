package intake

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// admit is the one gate in front of every publish that deletes: submit, confirm,
// approve, the window's release, re-drive, a hold's release and a replayed dead letter
// all call it last.
//
// rec is the request's workflow record as it will stand after the caller's move; nil
// makes admit read it. admit refuses, with an error wrapping ErrState:
//   - a request whose record is not RELEASED (a dry run not confirmed, a window not
//     over, an approval not given, a cancelled or rejected request);
//   - a TENANT request without a workflow store (ErrForbidden), or without its approval;
//   - a re-drive naming only stores that a legal hold exempts.
//
// It sets req.Exempt to the stores held now. A dry run deletes nothing and passes.
func (s *Service) admit(ctx context.Context, req *event.Requested, rec *workflow.Record) error {
	if req.DryRun {
		return nil
	}
	if s.Workflow == nil {
		if req.Scope == event.ScopeTenant {
			return fmt.Errorf("%w: TENANT scope needs approval, and no workflow store is configured", ErrForbidden)
		}
		return nil
	}
	if rec == nil {
		got, err := s.Workflow.Get(ctx, req.RequestID)
		switch {
		case err == nil:
			rec = &got
		case !errors.Is(err, workflow.ErrNotFound):
			return s.unavailable(ErrStateStoreUnavailable, req.TenantID, fmt.Errorf("read workflow: %w", err))
		}
	}
	if rec != nil && rec.State != workflow.Released {
		return fmt.Errorf("%w: the request is %s", ErrState, rec.State)
	}
	if s.needsApproval(req) && (rec == nil || rec.ApprovedBy == "") {
		return fmt.Errorf("%w: a TENANT request runs only once approved", ErrState)
	}
	if err := s.exempt(ctx, req); err != nil {
		return err
	}
	if len(req.OnlyStores) > 0 && !slices.ContainsFunc(req.OnlyStores, func(st string) bool { _, held := req.ExemptionOf(st); return !held }) {
		return fmt.Errorf("%w: every store named is under a legal hold", ErrState)
	}
	return nil
}

// needsApproval reports whether req must wait for a second person: a TENANT request
// when RequireApproval is set or callers are authenticated.
func (s *Service) needsApproval(req *event.Requested) bool {
	return req.Scope == event.ScopeTenant && (s.RequireApproval || s.Auth != nil && !s.Auth.Disabled())
}
