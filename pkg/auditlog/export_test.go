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

// AppendRawEvent appends an event record holding js as it is, as an app of another
// version could have written it; js must carry event_id, tenant_id and subject_hash.
func (s *DirStore) AppendRawEvent(ctx context.Context, js []byte) error {
	return s.write(ctx, item{op: opEvent, a: string(js)}, func() ([]byte, error) {
		return rawRecord(opEvent, "", js), nil
	})
}

// OverwriteAddendum replaces the stored addendum of a.AddendumID unconditionally, as an
// attacker with write access to the directory could.
func (s *DirStore) OverwriteAddendum(ctx context.Context, a Addendum) error {
	return s.write(ctx, item{op: opAddendum, a: a.AddendumID}, func() ([]byte, error) {
		return record(opAddendum, "", a)
	})
}
