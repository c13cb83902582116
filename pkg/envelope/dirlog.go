package envelope

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/lethe-erasure/lethe/pkg/wal"
)

var errClosed = errors.New("store is closed")

// apply applies the record payload p, found at log offset off, to the keys; s.mu is held
// or the store is not shared yet.
func (s *DirKeyStore) apply(p []byte, off int64) error {
	if len(p) < 2 {
		return errors.New("short record")
	}
	n, k := binary.Uvarint(p[1:])
	if k <= 0 || uint64(len(p)-1-k) < n {
		return errors.New("bad id length")
	}
	op, id, rest := p[0], string(p[1+k:1+k+int(n)]), p[1+k+int(n):]
	old := s.keys[id]
	e := &keyEntry{}
	if old != nil {
		e.stale = old.stale
		if old.where.n > 0 {
			e.stale = append(e.stale, old.where)
		}
	}
	switch op {
	case opKey:
		if len(rest) < 4 {
			return errors.New("short key record")
		}
		key, sum := rest[:len(rest)-4], rest[len(rest)-4:]
		switch {
		case !slices.ContainsFunc(rest, func(b byte) bool { return b != 0 }): // overwritten by a Destroy or Replace, whose record follows
			e.corrupt = true
		case wal.Checksum(key) != binary.LittleEndian.Uint32(sum): // damaged, or a torn overwrite
			e.corrupt = true
			e.where = region{off: off + int64(1+k+int(n)), n: len(rest)}
		default:
			e.key = bytes.Clone(key)
			e.where = region{off: off + int64(1+k+int(n)), n: len(rest)}
		}
	case opTombstone:
		e.tomb = true
		if len(rest) == 8 {
			e.tombAt = time.Unix(0, int64(binary.LittleEndian.Uint64(rest))).UTC()
		}
	case opCorrupt:
		e.corrupt = true
	default:
		return errors.New("unknown record operation")
	}
	s.keys[id] = e
	return nil
}

// change runs one change of id. decide runs under s.mu while the store holds id (no other
// change of it is in flight) and returns the record to append (nil: none) and the size of
// its overwritable tail, or an error. The record is applied to memory once its fsync
// succeeded. Then the regions of the log still holding keys id no longer has are zeroed
// and synced; scrubErr is the error of that step.
func (s *DirKeyStore) change(id string, decide func(*keyEntry) ([]byte, int, error)) (err, scrubErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for (s.busy[id] || s.compacting) && !s.closed {
		s.cond.Wait()
	}
	if s.closed {
		return errClosed, nil
	}
	p, n, err := decide(s.keys[id])
	if err != nil {
		return err, nil
	}
	if p == nil && (s.keys[id] == nil || len(s.keys[id].stale) == 0) {
		return nil, nil
	}
	s.busy[id] = true
	s.inflight++
	defer func() {
		delete(s.busy, id)
		s.inflight--
		s.cond.Broadcast()
		if err == nil && scrubErr == nil {
			_ = s.maybeCompact(false) // best effort here: the next write or Close compacts again
		}
	}()
	if p != nil {
		b, off, err := s.log.Append(p, n)
		if err != nil {
			return err, nil
		}
		s.mu.Unlock()
		err = s.log.Commit(b)
		s.mu.Lock()
		if err == nil {
			err = s.apply(p, off)
		}
		if err != nil {
			return err, nil
		}
	}
	return nil, s.scrub(s.keys[id])
}

// scrub zeroes and syncs the stale regions of e; s.mu is held and released while waiting.
func (s *DirKeyStore) scrub(e *keyEntry) error {
	if len(e.stale) == 0 {
		return nil
	}
	var b *wal.Batch
	for _, r := range e.stale {
		var err error
		if b, err = s.log.Scrub(r.off, r.n); err != nil {
			return err
		}
	}
	s.mu.Unlock()
	err := s.log.Commit(b)
	s.mu.Lock()
	if err == nil {
		e.stale = nil
	}
	return err
}

// maybeCompact compacts the log when forced or when it has grown past the threshold and
// doubled since the last compaction: it stops new changes, waits for those in flight and
// writes the tombstones and live keys as a new log. s.mu is held.
func (s *DirKeyStore) maybeCompact(force bool) error {
	size := s.log.Bytes()
	if s.compacting || s.closed || !force && (size < s.compactAt || size < 2*s.base) {
		return nil
	}
	s.compacting = true
	defer s.cond.Broadcast()
	for s.inflight > 0 {
		s.cond.Wait()
	}
	where := map[string]region{}
	err := s.log.Compact(func(emit func([]byte, int) (int64, error)) error {
		for id, e := range s.keys {
			var err error
			switch {
			case e.tomb && e.tombAt.IsZero():
				_, err = emit(idRecord(opTombstone, id), 0)
			case e.tomb:
				_, err = emit(tombRecord(id, e.tombAt), 0)
			case e.corrupt:
				_, err = emit(idRecord(opCorrupt, id), 0)
			default:
				p, n := keyRecord(id, e.key)
				var off int64
				off, err = emit(p, n)
				where[id] = region{off: off + int64(len(p)-n), n: n}
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for id, e := range s.keys {
			e.where, e.stale = where[id], nil
		}
		s.base = s.log.Bytes()
	}
	s.compacting = false
	return err
}
