package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/lethe-erasure/lethe/pkg/wal"
)

// FileStore is a durable Store in a local directory on the write-ahead log of pkg/wal.
// Its state lives in memory; every Create, Swap and PutHold appends one record (the
// operation byte and the item's JSON) and returns once an fsync covers it, and only then
// is the change visible. A write that fails leaves no visible state. Writes are
// serialised (one fsync each): gated requests change at the pace of people.
//
// Opening replays the log; a record torn by a crash (never acknowledged) is cut off and
// Repairs says so. When the log holds mostly superseded records (Swap and PutHold replace
// earlier ones), a write compacts it into a new log file holding one record per live item.
// Only one store may have the directory open at a time (an exclusive flock on its LOCK
// file); Close releases it. With an empty path the store keeps everything in memory.
//
// Earlier versions kept the store in one JSON file at the same path. OpenFile migrates
// such a file once: its records are written into a new log directory, which then takes the
// file's place, and the file is kept beside it renamed to path + ".migrated".
type FileStore struct {
	log        *wal.Log // nil: a memory store
	compactMin int      // records in the log below which it is never compacted; tests lower it

	mu       sync.Mutex
	records  map[string]Record
	holds    map[string]Hold
	appended int // records in the current log file, live and superseded
	closed   bool
}

var _ Store = (*FileStore)(nil)

// Record operations: the payload is the operation byte and the item's JSON.
const (
	opRecord = 'R' // a Record, replacing the stored one with its id
	opHold   = 'H' // a Hold, replacing the stored one with its id

	logMagic          = "lethe-workflow-1"
	defaultCompactMin = 1024
)

// Suffixes of the files beside path during and after a migration from the JSON file.
const (
	migratedSuffix  = ".migrated"  // the old JSON file, kept
	migratingSuffix = ".migrating" // the log directory being written from it
)

// fileState is the layout of the JSON file of earlier versions.
type fileState struct {
	Records []Record `json:"records"`
	Holds   []Hold   `json:"holds"`
}

// OpenFile opens (creating it, mode 0700) the store in the directory path and replays its
// log; "" is a memory store. When path is the JSON file of an earlier version, it is
// migrated first (see FileStore). It fails when another store has path open and when the
// log is damaged other than by a torn last record.
func OpenFile(path string) (*FileStore, error) {
	s := &FileStore{compactMin: defaultCompactMin, records: map[string]Record{}, holds: map[string]Hold{}}
	if path == "" {
		return s, nil
	}
	if err := migrate(path); err != nil {
		return nil, fmt.Errorf("workflow: migrate %s: %w", filepath.Base(path), err)
	}
	var err error
	s.log, err = wal.Open(path, logMagic, func(p []byte, _ int64) error {
		s.appended++
		return s.apply(p)
	})
	if err != nil {
		return nil, fmt.Errorf("workflow: open %s: %w", filepath.Base(path), err)
	}
	return s, nil
}

// migrate turns the JSON file at path, if there is one, into a log directory at path. The
// log is written complete in path + ".migrating", then the file is renamed to
// path + ".migrated" and the directory to path, so a crash at any step leaves either the
// file (the migration starts over) or the finished log (the last rename is completed).
func migrate(path string) error {
	tmp, old := path+migratingSuffix, path+migratedSuffix
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Stat(tmp); err == nil { // the file was renamed, the log not yet
			return finishMigration(tmp, path)
		}
		return nil
	case err != nil:
		return err
	case fi.IsDir():
		return nil
	}
	if _, err := os.Stat(old); err == nil {
		return fmt.Errorf("both the JSON file and %s exist: move one away", filepath.Base(old))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var st fileState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if err := os.RemoveAll(tmp); err != nil { // left by a migration that crashed
		return err
	}
	s, err := OpenFile(tmp)
	if err != nil {
		return err
	}
	for _, r := range st.Records {
		s.records[r.RequestID] = r
	}
	for _, h := range st.Holds {
		s.holds[h.ID] = h
	}
	err = s.log.Compact(s.snapshot)
	if cerr := s.log.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(path, old); err != nil {
		return err
	}
	return finishMigration(tmp, path)
}

func finishMigration(tmp, path string) error {
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// apply applies a record payload to the state; s.mu is held or the store is not shared yet.
func (s *FileStore) apply(p []byte) error {
	if len(p) < 1 {
		return errors.New("empty record")
	}
	switch p[0] {
	case opRecord:
		var r Record
		if err := json.Unmarshal(p[1:], &r); err != nil {
			return fmt.Errorf("malformed record: %w", err)
		}
		s.records[r.RequestID] = r
	case opHold:
		var h Hold
		if err := json.Unmarshal(p[1:], &h); err != nil {
			return fmt.Errorf("malformed hold: %w", err)
		}
		s.holds[h.ID] = h
	default:
		return fmt.Errorf("unknown record operation %q", p[0])
	}
	return nil
}

func payload(op byte, v any) ([]byte, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("workflow: encode: %w", err)
	}
	return append([]byte{op}, js...), nil
}

// write appends the record of v under op, waits for its fsync and applies it; s.mu is
// held. A memory store applies it at once.
func (s *FileStore) write(op byte, v any) error {
	if s.closed {
		return errors.New("workflow: store is closed")
	}
	p, err := payload(op, v)
	if err != nil {
		return err
	}
	if s.log != nil {
		b, _, err := s.log.Append(p, 0)
		if err == nil {
			err = s.log.Commit(b)
		}
		if err != nil {
			return fmt.Errorf("workflow: write: %w", err)
		}
		s.appended++
	}
	if err := s.apply(p); err != nil {
		return fmt.Errorf("workflow: %w", err)
	}
	s.maybeCompact()
	return nil
}

// maybeCompact rewrites the log as one record per live item once it holds at least
// compactMin records and more than half of them are superseded; s.mu is held. A failed
// compaction leaves the current log in use, and a later write tries again.
func (s *FileStore) maybeCompact() {
	live := len(s.records) + len(s.holds)
	if s.log == nil || s.appended < s.compactMin || s.appended <= 2*live {
		return
	}
	if s.log.Compact(s.snapshot) == nil {
		s.appended = live
	}
}

// snapshot emits one record per live item.
func (s *FileStore) snapshot(emit func([]byte, int) (int64, error)) error {
	put := func(op byte, v any) error {
		p, err := payload(op, v)
		if err == nil {
			_, err = emit(p, 0)
		}
		return err
	}
	for _, r := range s.records {
		if err := put(opRecord, r); err != nil {
			return err
		}
	}
	for _, h := range s.holds {
		if err := put(opHold, h); err != nil {
			return err
		}
	}
	return nil
}

// Repairs lists what opening the store changed in its directory (a torn last record cut
// off, a superseded log file removed), for the owner to log; nil for a memory store.
func (s *FileStore) Repairs() []wal.Repair {
	if s.log == nil {
		return nil
	}
	return s.log.Repairs()
}

// Close closes the log and releases the directory; later writes fail, reads keep
// answering from memory.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.log == nil {
		return nil
	}
	if err := s.log.Close(); err != nil {
		return fmt.Errorf("workflow: close: %w", err)
	}
	return nil
}

// Create implements Store.
func (s *FileStore) Create(_ context.Context, r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.records[r.RequestID]; ok {
		return ErrExists
	}
	r.Version = 1
	return s.write(opRecord, r)
}

// Get implements Store.
func (s *FileStore) Get(_ context.Context, id string) (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		return Record{}, ErrNotFound
	}
	return r, nil
}

// Swap implements Store.
func (s *FileStore) Swap(_ context.Context, r Record) (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.records[r.RequestID]
	if !ok {
		return Record{}, ErrNotFound
	}
	if prev.Version != r.Version {
		return Record{}, ErrConflict
	}
	r.Version++
	if err := s.write(opRecord, r); err != nil {
		return Record{}, err
	}
	return r, nil
}

// List implements Store.
func (s *FileStore) List(context.Context) ([]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Record, 0, len(s.records))
	for _, r := range s.records {
		out = append(out, r)
	}
	SortRecords(out)
	return out, nil
}

// PutHold implements Store.
func (s *FileStore) PutHold(_ context.Context, h Hold) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(opHold, h)
}

// Holds implements Store.
func (s *FileStore) Holds(context.Context) ([]Hold, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Hold, 0, len(s.holds))
	for _, h := range s.holds {
		out = append(out, h)
	}
	SortHolds(out)
	return out, nil
}
