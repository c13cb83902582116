package auditlog

import (
	"context"
	"path/filepath"

	"github.com/lethe-erasure/lethe/pkg/event"
)

// OverwriteReceipt replaces the stored receipt of r.RequestID unconditionally, as an
// attacker with write access to the directory could (auditlogtest.ReceiptOverwriter).
func (s *DirStore) OverwriteReceipt(ctx context.Context, r event.Receipt) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.receiptPath(r.RequestID)
	if err := s.mkdirs(filepath.Dir(p)); err != nil {
		return err
	}
	return s.replace(p, r)
}
