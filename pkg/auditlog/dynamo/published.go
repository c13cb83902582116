package dynamo

import (
	"context"
	"errors"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// publishedSK is the sort key of a request's publication mark.
const publishedSK = "PUBLISHED"

// publishedMark is the item (REQ#<request id>, PUBLISHED) beside the receipt.
type publishedMark struct {
	RequestID string `json:"request_id"`
	ReceiptID string `json:"receipt_id"`
}

// MarkPublished writes the publication mark of requestID's receipt, with an unconditional
// write shared with concurrent ones (group commit): a request has one receipt, so a second
// mark is the first again.
func (s *Store) MarkPublished(ctx context.Context, requestID, receiptID string) error {
	if requestID == "" {
		return retry.Permanent(errors.New("auditlog/dynamo: publication mark needs a request id"))
	}
	item, err := record(reqPK(requestID), publishedSK, publishedMark{RequestID: requestID, ReceiptID: receiptID})
	if err != nil {
		return err
	}
	return s.write(ctx, item)
}

// Published reports whether requestID's receipt was marked published (a consistent read).
func (s *Store) Published(ctx context.Context, requestID string) (bool, error) {
	var m publishedMark
	err := s.get(ctx, "published", reqPK(requestID), publishedSK, &m)
	if errors.Is(err, auditlog.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
