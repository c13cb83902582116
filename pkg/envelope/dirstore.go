package envelope

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/wal"
)

// Record operations of the key log. A payload is the operation byte and the uvarint-prefixed
// id; a key record adds the wrapped key and its CRC-32C, the part of the record outside the
// log's own checksum, so that it can be zeroed in place.
const (
	opKey       = 'K' // the wrapped key of id
	opTombstone = 'T' // id was destroyed; the payload may end in the time (8 bytes, Unix nanoseconds)
	opCorrupt   = 'X' // id's key was found damaged (written by compaction only)
)

// DirKeyStore is a durable KeyStore in a local directory, for the standalone process: the
// keys live in memory and every change is a record appended to a write-ahead log with group
// commit (see the wal type): a call returns after an fsync covering its record, which
// concurrent callers share, and its change becomes visible only once durable. Opening
// replays the log and cuts off a record torn by a crash. A log grown past a threshold is
// compacted into a new file holding the live keys and the tombstones.
//
// Destroy appends a tombstone and waits for its fsync, then overwrites the wrapped key's
// bytes in the log in place with zeros (a key record has a fixed position, and its key
// bytes are outside the record's checksum) and fsyncs again; Replace overwrites the
// replaced key the same way. So once Destroy returns, no file of the store holds the
// wrapped key; a compaction also copies only live keys. If the overwrite fails, Destroy
// returns the error and a retried Destroy overwrites again; compaction leaves the bytes in
// a removed file only.
//
// Overwriting is best effort: a journaling or copy-on-write filesystem, a snapshot, a
// backup or an SSD's wear levelling may keep the old bytes, as may the blocks of a log
// file removed by compaction. What remains is a data key wrapped by the KEK, useless
// without it; keep the KEK away from this directory and its backups, and rotate it with
// Sealer.RewrapAll: once the old KEK is destroyed, those remnants open nothing (see
// docs/threat-model.md for what overwriting does not guarantee). Tombstones are kept
// forever so that a shredded id cannot get a new key.
//
// DirKeyStore is safe for concurrent use. Only one store may have a directory open at a
// time: NewDirKeyStore takes an exclusive lock (flock) on the directory's LOCK file and
// fails while another store, in this process or another, holds it; Close releases it.
type DirKeyStore struct {
	root      string
	log       *wal.Log
	compactAt int64
	base      int64

	mu         sync.RWMutex
	cond       *sync.Cond // on mu's write lock: an id was released, a compaction ended
	busy       map[string]bool
	inflight   int
	compacting bool
	closed     bool
	keys       map[string]*keyEntry
	now        func() time.Time // the time Destroy records
}

// keyEntry is the state of one id. where is the log region holding its current key, stale
// the regions holding keys it no longer has and not yet overwritten.
type keyEntry struct {
	key     []byte // nil for a tombstone or a damaged key
	tomb    bool
	tombAt  time.Time // when the id was destroyed; zero in tombstones of earlier versions
	corrupt bool
	where   region
	stale   []region
}

type region struct {
	off int64
	n   int // 0: none
}

var (
	_ KeyStore    = (*DirKeyStore)(nil)
	_ Replacer    = (*DirKeyStore)(nil)
	_ Lister      = (*DirKeyStore)(nil)
	_ BatchGetter = (*DirKeyStore)(nil)
)

// NewDirKeyStore opens (creating it if needed, mode 0700) the store in dir and replays its
// log, for the service that owns it: a torn last record is cut off (see Repairs). It fails
// when another store has dir open, when dir holds the one-file-per-key layout of earlier
// versions, and when the log is damaged other than by a torn last record.
func NewDirKeyStore(dir string) (*DirKeyStore, error) {
	if fi, err := os.Stat(filepath.Join(dir, "keys")); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("envelope: open key store %s: the directory holds the one-file-per-key layout of an earlier version, which this version does not read", dir)
	}
	s := &DirKeyStore{root: dir, compactAt: 64 << 20, busy: map[string]bool{}, keys: map[string]*keyEntry{}, now: time.Now}
	s.cond = sync.NewCond(&s.mu)
	var err error
	if s.log, err = wal.Open(dir, "lethe-keys-1", s.apply); err != nil {
		return nil, fmt.Errorf("envelope: open key store %s: %w", dir, err)
	}
	s.base = s.log.Bytes()
	return s, nil
}

// Close waits for the calls in flight, then closes the log and releases the directory.
// Later Creates, Destroys and Replaces fail; Get keeps answering from memory.
func (s *DirKeyStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for s.inflight > 0 || s.compacting {
		s.cond.Wait()
	}
	s.cond.Broadcast()
	return wrapDir("close", s.log.Close())
}

// Create stores wrapped for id (KeyStore). wrapped must not be empty.
func (s *DirKeyStore) Create(ctx context.Context, id string, wrapped []byte) error {
	if err := check(ctx, id); err != nil {
		return err
	}
	if len(wrapped) == 0 {
		return retry.Permanent(errors.New("envelope: empty wrapped key"))
	}
	err, _ := s.change(id, func(e *keyEntry) ([]byte, int, error) {
		switch {
		case e == nil:
			p, n := keyRecord(id, wrapped)
			return p, n, nil
		case e.tomb:
			return nil, 0, Shredded(e.tombAt)
		default:
			return nil, 0, ErrExists
		}
	})
	return wrapDir("create", err)
}

// Get returns the wrapped key of id (KeyStore).
func (s *DirKeyStore) Get(ctx context.Context, id string) ([]byte, error) {
	if err := check(ctx, id); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.keys[id]
	switch {
	case e == nil:
		return nil, ErrMissing
	case e.tomb:
		return nil, Shredded(e.tombAt)
	case e.corrupt:
		return nil, retry.Permanent(fmt.Errorf("envelope: dir key store: get: %w: the stored key is damaged", ErrCorrupt))
	default:
		return bytes.Clone(e.key), nil
	}
}

// GetBatch returns the wrapped key of each of ids, as Get does (BatchGetter).
func (s *DirKeyStore) GetBatch(ctx context.Context, ids []string) ([][]byte, []error) {
	keys, errs := make([][]byte, len(ids)), make([]error, len(ids))
	for i, id := range ids {
		keys[i], errs[i] = s.Get(ctx, id)
	}
	return keys, errs
}

// Destroy tombstones id and overwrites its wrapped key in the log (KeyStore).
func (s *DirKeyStore) Destroy(ctx context.Context, id string) error {
	if err := check(ctx, id); err != nil {
		return err
	}
	err, scrubErr := s.change(id, func(e *keyEntry) ([]byte, int, error) {
		if e != nil && e.tomb {
			return nil, 0, nil // destroyed already; change still overwrites what is left
		}
		return tombRecord(id, s.now()), 0, nil
	})
	if err == nil && scrubErr != nil {
		err = fmt.Errorf("overwrite the destroyed key: %w", scrubErr)
	}
	return wrapDir("destroy", err)
}

// Replace stores wrapped for id if the stored key equals old (Replacer), then overwrites
// the old key in the log.
func (s *DirKeyStore) Replace(ctx context.Context, id string, old, wrapped []byte) error {
	if err := check(ctx, id); err != nil {
		return err
	}
	if len(wrapped) == 0 {
		return retry.Permanent(errors.New("envelope: empty wrapped key"))
	}
	// A failed overwrite of the old key is left to the next Destroy or compaction: the
	// replace itself is durable.
	err, _ := s.change(id, func(e *keyEntry) ([]byte, int, error) {
		switch {
		case e == nil:
			return nil, 0, ErrMissing
		case e.tomb:
			return nil, 0, Shredded(e.tombAt)
		case e.corrupt:
			return nil, 0, retry.Permanent(fmt.Errorf("%w: the stored key is damaged", ErrCorrupt))
		case !bytes.Equal(e.key, old):
			return nil, 0, ErrConflict
		}
		p, n := keyRecord(id, wrapped)
		return p, n, nil
	})
	return wrapDir("replace", err)
}

// Live yields the ids of the keys that are not destroyed, damaged ones included (Lister).
// It takes a snapshot of the ids in memory when iteration starts, so it holds no lock
// while the caller works on an id.
func (s *DirKeyStore) Live(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		s.mu.RLock()
		ids := make([]string, 0, len(s.keys))
		for id, e := range s.keys {
			if !e.tomb {
				ids = append(ids, id)
			}
		}
		s.mu.RUnlock()
		for _, id := range ids {
			if err := ctx.Err(); err != nil {
				yield("", err)
				return
			}
			if !yield(id, nil) {
				return
			}
		}
	}
}

func keyRecord(id string, wrapped []byte) (payload []byte, scrub int) {
	p := idRecord(opKey, id)
	p = append(p, wrapped...)
	p = binary.LittleEndian.AppendUint32(p, wal.Checksum(wrapped))
	return p, len(wrapped) + 4
}

// tombRecord is the tombstone of id destroyed at at.
func tombRecord(id string, at time.Time) []byte {
	return binary.LittleEndian.AppendUint64(idRecord(opTombstone, id), uint64(at.UnixNano()))
}

func idRecord(op byte, id string) []byte {
	p := make([]byte, 0, 1+binary.MaxVarintLen64+len(id)+64)
	p = append(p, op)
	p = binary.AppendUvarint(p, uint64(len(id)))
	return append(p, id...)
}

func check(ctx context.Context, id string) error {
	if id == "" {
		return retry.Permanent(errors.New("envelope: empty id"))
	}
	return ctx.Err()
}

// wrapDir wraps err unless it is nil or one of the KeyStore sentinels.
func wrapDir(op string, err error) error {
	var se *ShreddedError
	if err == nil || err == ErrExists || err == ErrMissing || err == ErrConflict || errors.As(err, &se) {
		return err
	}
	return fmt.Errorf("envelope: dir key store: %s: %w", op, err)
}

// Repairs lists what opening the store changed in its directory (a torn last record cut
// off, a superseded log file removed), for the owner to log.
func (s *DirKeyStore) Repairs() []wal.Repair { return s.log.Repairs() }
