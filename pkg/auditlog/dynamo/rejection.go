package dynamo

import (
	"context"
	"errors"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

var _ auditlog.Rejections = (*Store)(nil)

// rejPK is the partition of a request's rejection: REJ#<request id>.
func rejPK(requestID string) string { return "REJ#" + esc(requestID) }

// PutRejection stores r, replacing the rejection of its request.
func (s *Store) PutRejection(ctx context.Context, r auditlog.Rejection) error {
	if r.RequestID == "" || r.TenantID == "" {
		return retry.Permanent(errors.New("auditlog/dynamo: rejection needs a request id and a tenant id"))
	}
	item, err := record(rejPK(r.RequestID), "REJECTION", r)
	if err != nil {
		return err
	}
	return s.put(ctx, "put rejection", item, "", nil)
}

// GetRejection returns the rejection of requestID (a consistent read), or
// auditlog.ErrNotFound.
func (s *Store) GetRejection(ctx context.Context, requestID string) (auditlog.Rejection, error) {
	var r auditlog.Rejection
	err := s.get(ctx, "get rejection", rejPK(requestID), "REJECTION", &r)
	return r, err
}
