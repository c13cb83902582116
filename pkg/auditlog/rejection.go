package auditlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Rejection is an intake record that was refused and dead-lettered, kept so that its
// producer, which gets no answer from the broker, can find the refusal by the request id
// its tenant and idempotency key name. It holds no identifier: Reason names the field at
// fault and what was expected, never a value.
type Rejection struct {
	RequestID string    `json:"request_id"`
	TenantID  string    `json:"tenant_id"`
	Reason    string    `json:"reason"`
	Producer  string    `json:"producer,omitempty"` // the principal the record's credential authenticated
	At        time.Time `json:"at"`
}

// Rejections are the refused intake records (part of Table), one per request id: the
// latest refusal replaces an earlier one.
type Rejections interface {
	// PutRejection stores r, replacing the rejection of r.RequestID if there is one.
	PutRejection(ctx context.Context, r Rejection) error
	// GetRejection returns the rejection of requestID, or ErrNotFound.
	GetRejection(ctx context.Context, requestID string) (Rejection, error)
}

var _ Rejections = (*DirStore)(nil)

// PutRejection stores r, replacing the rejection of its request.
func (s *DirStore) PutRejection(ctx context.Context, r Rejection) error {
	if r.RequestID == "" || r.TenantID == "" {
		return retry.Permanent(errors.New("auditlog: rejection needs a request id and a tenant id"))
	}
	err := s.write(ctx, item{op: opRejection, a: r.RequestID}, func() ([]byte, error) {
		return record(opRejection, "", r)
	})
	return wrap("put rejection", err)
}

// GetRejection returns the rejection of requestID, or ErrNotFound.
func (s *DirStore) GetRejection(ctx context.Context, requestID string) (Rejection, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	js, ok := s.rejections[requestID]
	if !ok {
		return Rejection{}, fmt.Errorf("auditlog: get rejection: %w", ErrNotFound)
	}
	var r Rejection
	return r, wrap("get rejection", decode(js, &r))
}
