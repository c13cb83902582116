package auditlog

import (
	"context"
	"errors"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/wal"
)

// Linker is the optional capability of a store that links a receipt into its tenant's
// chain in one step under its own lock. Issue uses it in place of its loop of conditional
// writes; it has the same contract as Issue for a receipt Issue has normalised, and may
// answer errLinkByCAS to have Issue run the loop instead. Once it has set the receipt's
// Seq, PrevHash and Hash, and before it writes anything, it calls seal with the head it
// links after: seal sets the receipt's chain MAC, or refuses the link with an error that
// LinkReceipt returns.
//
// The directory store is one: holding the whole chain in one process, it applies each link
// to memory as it appends the link's records (head first, then receipt) and then waits for
// their fsync, so the receipts of one tenant share fsyncs (group commit) instead of each
// waiting for the one before it to be durable. Nothing it has not made durable leaves it:
// reads of the tenant's head and receipts wait for the fsync of what they would return,
// and a failed fsync of a link breaks the log (wal.AppendVisible), so that no later record
// builds on a link the file lost.
type Linker interface {
	LinkReceipt(ctx context.Context, r event.Receipt, seal func(HeadMAC, *event.Receipt) error) (event.Receipt, error)
}

// errLinkByCAS asks Issue to link by conditional writes: the head names a record that is
// not stored (a writer of the conditional-write protocol crashed after its swap), which
// that protocol's helping step repairs.
var errLinkByCAS = errors.New("auditlog: link by conditional writes")

var _ Linker = (*DirStore)(nil)

// LinkReceipt links r into its tenant's chain (see Linker).
func (s *DirStore) LinkReceipt(ctx context.Context, r event.Receipt, seal func(HeadMAC, *event.Receipt) error) (event.Receipt, error) {
	if err := ctx.Err(); err != nil {
		return event.Receipt{}, err
	}
	head, rcpt := item{op: opHead, a: r.TenantID}, item{op: opReceipt, a: r.RequestID}
	s.mu.Lock()
	for (s.busy[head] || s.busy[rcpt] || s.compacting) && !s.closed {
		s.cond.Wait()
	}
	switch {
	case s.log == nil:
		s.mu.Unlock()
		return event.Receipt{}, errReadOnly
	case s.closed:
		s.mu.Unlock()
		return event.Receipt{}, errClosed
	}
	if _, ok := s.receipts[r.RequestID]; ok { // issued already: return it once durable
		s.mu.Unlock()
		return s.GetReceipt(ctx, r.RequestID)
	}
	h := s.heads[r.TenantID]
	if h.seq > 0 && !s.holdsHeadRecord(h) {
		s.mu.Unlock()
		return event.Receipt{}, errLinkByCAS
	}
	next := r
	next.Seq, next.PrevHash = h.seq+1, h.hash
	next.Hash = HashReceipt(next)
	if err := seal(HeadMAC{Seq: h.seq, Hash: h.hash, KeyID: h.keyID, MAC: h.mac}, &next); err != nil {
		s.mu.Unlock()
		return event.Receipt{}, err
	}
	hv := Head{Seq: next.Seq, Hash: next.Hash, RequestID: next.RequestID, Receipt: next}
	hr, err := record(opHead, r.TenantID, hv)
	if err != nil {
		s.mu.Unlock()
		return event.Receipt{}, err
	}
	rr, err := record(opReceipt, "", next)
	if err != nil {
		s.mu.Unlock()
		return event.Receipt{}, err
	}
	b, err := s.appendApplied(hr, head, hv)
	if err == nil {
		b, err = s.appendApplied(rr, rcpt, next)
	}
	if err != nil { // what was appended stays applied: a head without its receipt is what a crash leaves, and is helped
		s.mu.Unlock()
		return event.Receipt{}, wrap("link receipt", err)
	}
	s.pending[head] = b // the receipt may be in a later batch than the head: reads of the tenant wait for both
	s.inflight++
	s.mu.Unlock()
	err = s.log.Commit(b)
	s.mu.Lock()
	s.inflight--
	if err == nil {
		for _, it := range []item{head, rcpt} {
			if s.pending[it] == b {
				delete(s.pending, it)
			}
		}
	}
	s.cond.Broadcast()
	if err == nil {
		s.maybeCompact()
	}
	s.mu.Unlock()
	if err != nil {
		return event.Receipt{}, wrap("link receipt", err)
	}
	return next, nil
}

// appendApplied appends rec, the record of v, applies it to memory at once and marks it
// pending until its batch is durable; s.mu is held.
func (s *DirStore) appendApplied(rec []byte, it item, v any) (*wal.Batch, error) {
	b, err := s.log.AppendVisible(rec)
	if err != nil {
		return nil, err
	}
	if err := s.apply(rec, v); err != nil {
		return nil, err
	}
	s.pending[it] = b
	return b, nil
}

// holdsHeadRecord reports whether the record the head h names is stored; s.mu is held.
func (s *DirStore) holdsHeadRecord(h storedHead) bool {
	if h.addendum {
		_, ok := s.addenda[h.record]
		return ok
	}
	_, ok := s.receipts[h.record]
	return ok
}

// rlockSettled read-locks the store once no record of it is pending (applied by a link
// and not durable yet), waiting for the fsync of the one that is. The caller unlocks.
func (s *DirStore) rlockSettled(it item) error {
	for {
		s.mu.RLock()
		b := s.pending[it]
		if b == nil {
			return nil
		}
		s.mu.RUnlock()
		if err := s.log.Commit(b); err != nil {
			return err
		}
		s.mu.Lock()
		if s.pending[it] == b {
			delete(s.pending, it)
		}
		s.mu.Unlock()
	}
}
