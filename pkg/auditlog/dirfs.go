package auditlog

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Record operations. A record's payload is the operation byte, a uvarint-prefixed tenant
// (heads only, empty otherwise) and the item's JSON.
const (
	opEvent            = 'E' // Event, stored unless its id is
	opRequest          = 'Q' // Request, replacing the stored one
	opReport           = 'P' // event.StoreDone, replacing the stored one
	opReceipt          = 'C' // event.Receipt with its index entry (tenant, seq)
	opReceiptOverwrite = 'O' // event.Receipt without touching the index
	opIndex            = 'I' // an index entry alone: indexEntry (compaction writes it)
	opHead             = 'H' // Head of the tenant
	opPublished        = 'B' // publication mark of a request's receipt
	opAddendum         = 'A' // Addendum with its index entries (tenant, request)
	opTask             = 'T' // Task of the schedule, replacing one with its id
	opUntask           = 'U' // a Task's removal from the schedule (only its id)
	opSuppression      = 'S' // event.Suppression, replacing the stored entry of its tenant and pseudonym
	opRejection        = 'R' // Rejection, replacing the stored one of its request
)

type indexEntry struct {
	Tenant    string `json:"tenant"`
	RequestID string `json:"request_id"`
	Seq       int64  `json:"seq"`
}

// record encodes a record payload.
func record(op byte, tenant string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, retry.Permanent(err)
	}
	return rawRecord(op, tenant, b), nil
}

func rawRecord(op byte, tenant string, js []byte) []byte {
	p := make([]byte, 0, 1+binary.MaxVarintLen64+len(tenant)+len(js))
	p = append(p, op)
	p = binary.AppendUvarint(p, uint64(len(tenant)))
	p = append(p, tenant...)
	return append(p, js...)
}

// decode decodes a stored item; a malformed one is permanent.
func decode(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return retry.Permanent(fmt.Errorf("malformed item: %w", err))
	}
	return nil
}

// valueOf sets out to v when v is a T — the value this process encoded the record from,
// sharing no memory with its caller — and decodes js into it otherwise (a record read from
// the log).
func valueOf[T any](js []byte, v any, out *T) error {
	if t, ok := v.(T); ok {
		*out = t
		return nil
	}
	return decode(js, out)
}

// apply applies a record payload to the state; s.mu is held or the store is not shared yet.
// v is the value the payload encodes when this process wrote it (nil: decode the payload).
func (s *DirStore) apply(p []byte, v any) error {
	if len(p) < 2 {
		return errors.New("short record")
	}
	n, k := binary.Uvarint(p[1:])
	if k <= 0 || uint64(len(p)-1-k) < n {
		return errors.New("bad tenant length")
	}
	op, tenant, js := p[0], string(p[1+k:1+k+int(n)]), p[1+k+int(n):]
	switch op {
	case opEvent:
		var e Event
		if err := decode(js, &e); err != nil {
			var ok bool
			if e.TenantID, e.SubjectHash, e.EventID, ok = eventKey(js); !ok {
				return err
			}
		}
		key := [2]string{e.TenantID, e.SubjectHash}
		if s.events[key] == nil {
			s.events[key] = map[string][]byte{}
		}
		if _, ok := s.events[key][e.EventID]; !ok {
			s.events[key][e.EventID] = js
		}
	case opRequest:
		var r Request
		if err := valueOf(js, v, &r); err != nil {
			return err
		}
		s.requests[r.RequestID] = storedRequest{r: r, json: js}
	case opReport:
		var d event.StoreDone
		if err := valueOf(js, v, &d); err != nil {
			return err
		}
		if s.reports[d.RequestID] == nil {
			s.reports[d.RequestID] = map[string]storedReport{}
		}
		s.reports[d.RequestID][d.Store] = storedReport{d: d, json: js}
	case opReceipt, opReceiptOverwrite:
		var r event.Receipt
		if err := valueOf(js, v, &r); err != nil {
			return err
		}
		s.receipts[r.RequestID] = js
		if op == opReceipt {
			s.index(indexEntry{Tenant: r.TenantID, RequestID: r.RequestID, Seq: r.Seq})
		}
	case opIndex:
		var e indexEntry
		if err := decode(js, &e); err != nil {
			return err
		}
		s.index(e)
	case opHead:
		var h Head
		if err := valueOf(js, v, &h); err != nil {
			return err
		}
		hm := headMAC(h)
		sh := storedHead{seq: h.Seq, hash: h.Hash, record: h.RequestID, keyID: hm.KeyID, mac: hm.MAC, json: js}
		if h.Addendum != nil {
			sh.record, sh.addendum = h.Addendum.AddendumID, true
		}
		s.heads[tenant] = sh
	case opPublished:
		var m publishedMark
		if err := decode(js, &m); err != nil {
			return err
		}
		s.published[m.RequestID] = js
	case opAddendum:
		var a Addendum
		if err := decode(js, &a); err != nil {
			return err
		}
		s.indexAddendum(a, js)
	case opTask:
		var t Task
		if err := decode(js, &t); err != nil {
			return err
		}
		s.tasks.put(t)
	case opUntask:
		var t Task
		if err := decode(js, &t); err != nil {
			return err
		}
		s.tasks.remove(t.ID)
	case opSuppression:
		return s.applySuppression(js)
	case opRejection:
		var r Rejection
		if err := decode(js, &r); err != nil {
			return err
		}
		s.rejections[r.RequestID] = js
	default:
		return fmt.Errorf("unknown record operation %q", op)
	}
	return nil
}

func (s *DirStore) index(e indexEntry) {
	if s.receiptIdx[e.Tenant] == nil {
		s.receiptIdx[e.Tenant] = map[string]int64{}
	}
	s.receiptIdx[e.Tenant][e.RequestID] = e.Seq
}

var (
	errClosed   = errors.New("store is closed")
	errReadOnly = errors.New("store is opened read-only")
)

// write runs one conditional write of it. decide runs under s.mu while the store holds it
// (no other write of it is in flight) and returns the record to append, nil for a no-op,
// or an error. The record is applied to memory only after its fsync succeeded.
func (s *DirStore) write(ctx context.Context, it item, decide func() ([]byte, error)) error {
	return s.writeValue(ctx, it, nil, decide)
}

// writeValue is write of a record that encodes v (see apply), which must share no memory
// with its caller.
func (s *DirStore) writeValue(ctx context.Context, it item, v any, decide func() ([]byte, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for (s.busy[it] || s.compacting) && !s.closed {
		s.cond.Wait()
	}
	if s.log == nil {
		return errReadOnly
	}
	if s.closed {
		return errClosed
	}
	rec, err := decide()
	if err != nil || rec == nil {
		return err
	}
	b, _, err := s.log.Append(rec, 0)
	if err != nil {
		return err
	}
	s.busy[it] = true
	s.inflight++
	s.mu.Unlock()
	err = s.log.Commit(b)
	s.mu.Lock()
	delete(s.busy, it)
	s.inflight--
	if err == nil {
		err = s.apply(rec, v)
	}
	s.cond.Broadcast()
	if err == nil {
		s.maybeCompact()
	}
	return err
}

// maybeCompact compacts the log when it has grown past the threshold and doubled since the
// last compaction. It stops new writes, waits for those in flight and writes the state as
// a new log; s.mu is held. A failed compaction leaves the current log in use.
func (s *DirStore) maybeCompact() {
	size := s.log.Bytes()
	if s.compacting || s.closed || size < s.compactAt || size < 2*s.base {
		return
	}
	s.compacting = true
	for s.inflight > 0 {
		s.cond.Wait()
	}
	if s.log.Compact(s.snapshot) == nil {
		s.base = s.log.Bytes()
	}
	s.compacting = false
	s.cond.Broadcast()
}

// snapshot emits one record per stored item.
func (s *DirStore) snapshot(emit func([]byte, int) (int64, error)) error {
	put := func(op byte, tenant string, js []byte) error {
		_, err := emit(rawRecord(op, tenant, js), 0)
		return err
	}
	for _, m := range s.events {
		for _, js := range m {
			if err := put(opEvent, "", js); err != nil {
				return err
			}
		}
	}
	for _, sr := range s.requests {
		if err := put(opRequest, "", sr.json); err != nil {
			return err
		}
	}
	for _, m := range s.reports {
		for _, sr := range m {
			if err := put(opReport, "", sr.json); err != nil {
				return err
			}
		}
	}
	for _, js := range s.receipts {
		if err := put(opReceiptOverwrite, "", js); err != nil {
			return err
		}
	}
	for tenant, m := range s.receiptIdx {
		for id, seq := range m {
			js, err := json.Marshal(indexEntry{Tenant: tenant, RequestID: id, Seq: seq})
			if err != nil {
				return err
			}
			if err := put(opIndex, "", js); err != nil {
				return err
			}
		}
	}
	for tenant, sh := range s.heads {
		if err := put(opHead, tenant, sh.json); err != nil {
			return err
		}
	}
	for _, js := range s.published {
		if err := put(opPublished, "", js); err != nil {
			return err
		}
	}
	for _, js := range s.addenda {
		if err := put(opAddendum, "", js); err != nil {
			return err
		}
	}
	for _, t := range s.tasks.byID {
		js, err := json.Marshal(t)
		if err != nil {
			return err
		}
		if err := put(opTask, "", js); err != nil {
			return err
		}
	}
	for _, ss := range s.suppressions {
		if err := put(opSuppression, "", ss.json); err != nil {
			return err
		}
	}
	for _, js := range s.rejections {
		if err := put(opRejection, "", js); err != nil {
			return err
		}
	}
	return nil
}
