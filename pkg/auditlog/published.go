package auditlog

import (
	"context"
	"errors"

	"github.com/lethe-erasure/lethe/pkg/retry"
)

// PublishMarker is a durable mark (part of Table) that a request's receipt was published on erasure.completed and acknowledged by the
// broker. The aggregator publishes a receipt only while the mark is absent and writes it
// after the acknowledgement, so records handled again (redelivered, or re-consumed after a
// restart) do not publish the receipt again.
type PublishMarker interface {
	// MarkPublished records that the receipt of requestID, receiptID, was published. A
	// request is marked once: marking it again is a no-op that keeps the first mark.
	MarkPublished(ctx context.Context, requestID, receiptID string) error
	// Published reports whether the receipt of requestID was marked published.
	Published(ctx context.Context, requestID string) (bool, error)
}

// publishedMark is the stored publication mark of a request's receipt.
type publishedMark struct {
	RequestID string `json:"request_id"`
	ReceiptID string `json:"receipt_id"`
}

var _ PublishMarker = (*DirStore)(nil)

// MarkPublished records the publication of requestID's receipt unless it is recorded.
func (s *DirStore) MarkPublished(ctx context.Context, requestID, receiptID string) error {
	if requestID == "" {
		return retry.Permanent(errors.New("auditlog: publication mark needs a request id"))
	}
	err := s.write(ctx, item{op: opPublished, a: requestID}, func() ([]byte, error) {
		if _, ok := s.published[requestID]; ok {
			return nil, nil
		}
		return record(opPublished, "", publishedMark{RequestID: requestID, ReceiptID: receiptID})
	})
	return wrap("mark published", err)
}

// Published reports whether requestID's receipt was marked published.
func (s *DirStore) Published(ctx context.Context, requestID string) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.published[requestID]
	return ok, ctx.Err()
}
