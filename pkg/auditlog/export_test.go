package auditlog

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/event"
)

// OverwriteReceipt replaces the stored receipt of r.RequestID unconditionally, as an
// attacker with write access to the directory could (auditlogtest.ReceiptOverwriter).
func (s *DirStore) OverwriteReceipt(ctx context.Context, r event.Receipt) error {
	return s.overwriteReceipt(ctx, r)
}
