// Package wal is the write-ahead log under Lethe's embedded durable stores (the audit
// table's DirStore and the data-key DirKeyStore): an append-only file of checksummed
// records with group commit, replayed into the owner's memory on open, compacted by the
// owner's snapshot, and locked to one process.
package wal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Log file format: a 16-byte header (the magic of the store kind), then records, each
//
//	u32 length | u32 kept | u32 crc32c(length, kept, payload[:kept]) | payload (length bytes)
//
// all little-endian. The last length-kept bytes of a payload are outside the checksum so
// that they can be zeroed in place (scrub); their owner checks them itself.
const (
	headerSize = 16
	recordHead = 12
	maxRecord  = 64 << 20
	lockName   = "LOCK"
	tmpDir     = ".tmp"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt marks a log that cannot be replayed safely.
var ErrCorrupt = errors.New("corrupt log")

// Batch is the records appended between two fsyncs; done and err are guarded by wal.mu.
type Batch struct {
	done bool
	err  error
}

// Log is an append-only log with group commit. append writes a record into the file (no
// fsync) and returns the batch it belongs to; commit returns once an fsync covering that
// batch succeeded, or with its error. One committer at a time fsyncs (the leader) for every
// record appended so far; the others wait for it. After a failed fsync every record not yet
// synced fails and is cut off the file, so the file again ends with the last synced record;
// if that cut fails, the log is broken and every later call fails until it is reopened.
type Log struct {
	dir   string
	magic string
	lock  *os.File
	Sync  func(*os.File) error // fsync; tests replace it to inject failures

	mu         sync.Mutex
	cond       *sync.Cond
	f          *os.File
	gen        uint64
	size       int64 // bytes in the file, synced or not
	syncedSize int64 // bytes covered by the last successful fsync
	syncing    bool
	cur        *Batch
	broken     error
}

// Open locks dir (creating it, mode 0700) and replays its log: apply receives each
// record's payload and the file offset of the payload. A torn last record is cut off. The
// magic names the kind of store and must be headerSize bytes at most.
func Open(dir, magic string, apply func(payload []byte, off int64) error) (_ *Log, err error) {
	w := &Log{dir: dir, magic: magic, Sync: (*os.File).Sync, cur: &Batch{}}
	w.cond = sync.NewCond(&w.mu)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if w.lock, err = os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			w.lock.Close()
		}
	}()
	if err := syscall.Flock(int(w.lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, fmt.Errorf("directory is in use by another store (lock %s): %w", lockName, err)
	}
	if err := os.RemoveAll(filepath.Join(dir, tmpDir)); err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(dir, tmpDir), 0o700); err != nil {
		return nil, err
	}
	gens, err := gens(dir)
	if err != nil {
		return nil, err
	}
	if len(gens) == 0 {
		if err := w.writeLog(1, func(*bufio.Writer, *int64) error { return nil }); err != nil {
			return nil, err
		}
		gens = []uint64{1}
	}
	w.gen = gens[len(gens)-1]
	for _, g := range gens[:len(gens)-1] { // left by a compaction that crashed before removing them
		if err := os.Remove(w.path(g)); err != nil {
			return nil, err
		}
	}
	if w.f, err = os.OpenFile(w.path(w.gen), os.O_RDWR, 0); err != nil {
		return nil, err
	}
	if err := w.replay(apply); err != nil {
		w.f.Close()
		return nil, err
	}
	return w, nil
}

func (w *Log) path(gen uint64) string {
	return filepath.Join(w.dir, fmt.Sprintf("wal-%016x.log", gen))
}

// gens returns the generations of the log files in dir, ascending.
func gens(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var gens []uint64
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, "wal-") || !strings.HasSuffix(n, ".log") {
			continue
		}
		g, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(n, "wal-"), ".log"), 16, 64)
		if err == nil {
			gens = append(gens, g)
		}
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
	return gens, nil
}

// replay applies every complete record and cuts a torn tail. A damaged record counts as
// the torn tail when it reaches the end of the file or only zeros follow it (what a crash
// during an append leaves); anywhere else it is ErrCorrupt.
func (w *Log) replay(apply func([]byte, int64) error) error {
	b, err := io.ReadAll(w.f)
	if err != nil {
		return err
	}
	if len(b) < headerSize || string(bytes.TrimRight(b[:headerSize], "\x00")) != w.magic {
		return fmt.Errorf("%w: %s is not a log of this store", ErrCorrupt, filepath.Base(w.f.Name()))
	}
	off := int64(headerSize)
	for off < int64(len(b)) {
		rec := b[off:]
		length, _, ok := check(rec)
		if !ok {
			end := int64(len(b))
			if len(rec) >= recordHead && off+recordHead+int64(length) < end && !allZero(rec) {
				return fmt.Errorf("%w: damaged record at offset %d of %s", ErrCorrupt, off, filepath.Base(w.f.Name()))
			}
			if err := w.f.Truncate(off); err != nil {
				return err
			}
			if err := w.Sync(w.f); err != nil {
				return err
			}
			break
		}
		if err := apply(rec[recordHead:recordHead+length], off+recordHead); err != nil {
			return fmt.Errorf("%w: record at offset %d: %w", ErrCorrupt, off, err)
		}
		off += recordHead + int64(length)
	}
	w.size, w.syncedSize = off, off
	return nil
}

// check validates the record at the start of rec.
func check(rec []byte) (length, kept uint32, ok bool) {
	if len(rec) < recordHead {
		return 0, 0, false
	}
	length = binary.LittleEndian.Uint32(rec[0:])
	kept = binary.LittleEndian.Uint32(rec[4:])
	if length > maxRecord || kept > length || int64(len(rec)) < recordHead+int64(length) {
		return length, kept, false
	}
	crc := crc32.Update(crc32.Checksum(rec[:8], crcTable), crcTable, rec[recordHead:recordHead+kept])
	return length, kept, crc == binary.LittleEndian.Uint32(rec[8:])
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// encode appends the record of payload to buf; the last scrub bytes of payload are
// outside the checksum.
func encode(buf, payload []byte, scrub int) []byte {
	var h [recordHead]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(h[4:], uint32(len(payload)-scrub))
	crc := crc32.Update(crc32.Checksum(h[:8], crcTable), crcTable, payload[:len(payload)-scrub])
	binary.LittleEndian.PutUint32(h[8:], crc)
	return append(append(buf, h[:]...), payload...)
}

// append writes the record of payload (see encode) and returns its batch and the file
// offset of the payload. The record is durable once commit of the batch returns nil.
func (w *Log) Append(payload []byte, scrub int) (*Batch, int64, error) {
	if len(payload) > maxRecord {
		return nil, 0, errors.New("record too large")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return nil, 0, w.broken
	}
	rec := encode(nil, payload, scrub)
	if _, err := w.f.WriteAt(rec, w.size); err != nil {
		if terr := w.f.Truncate(w.size); terr != nil { // a partial record must not stay
			w.broken = fmt.Errorf("log unusable after a failed write: %w", terr)
		}
		return nil, 0, fmt.Errorf("write log: %w", err)
	}
	off := w.size + recordHead
	w.size += int64(len(rec))
	return w.cur, off, nil
}

// scrub zeroes n bytes at off, a region of a synced record outside its checksum, and
// returns the batch whose commit makes the zeros durable.
func (w *Log) Scrub(off int64, n int) (*Batch, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return nil, w.broken
	}
	if off+int64(n) > w.syncedSize {
		return nil, errors.New("scrub outside the synced log")
	}
	if _, err := w.f.WriteAt(make([]byte, n), off); err != nil {
		return nil, fmt.Errorf("scrub log: %w", err)
	}
	return w.cur, nil
}

// commit waits until b is synced, leading the fsync when no other committer is.
func (w *Log) Commit(b *Batch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !b.done {
		if w.syncing {
			w.cond.Wait()
			continue
		}
		w.syncing = true
		batch, size := w.cur, w.size
		w.cur = &Batch{}
		f := w.f
		w.mu.Unlock()
		err := w.Sync(f)
		w.mu.Lock()
		w.syncing = false
		if err != nil {
			err = fmt.Errorf("sync log: %w", err)
			// Records appended during the failed fsync follow the failed ones in the file:
			// they are cut off too.
			later := w.cur
			later.done, later.err = true, err
			w.cur = &Batch{}
			w.Rollback()
		} else {
			w.syncedSize = size
		}
		batch.done, batch.err = true, err
		w.cond.Broadcast()
	}
	return b.err
}

// rollback cuts the file back to its synced size after a failed fsync; w.mu is held.
func (w *Log) Rollback() {
	err := w.f.Truncate(w.syncedSize)
	if err == nil {
		err = w.Sync(w.f)
	}
	if err != nil {
		w.broken = fmt.Errorf("log unusable after a failed fsync: %w", err)
		return
	}
	w.size = w.syncedSize
}

// compact replaces the log with a new generation holding the records that write emits
// (a snapshot of the state), written to a temporary file, synced and renamed into place.
// The caller guarantees that no append, scrub or commit runs meanwhile. emit returns the
// payload offset of each record in the new file.
func (w *Log) Compact(write func(emit func(payload []byte, scrub int) (int64, error)) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return w.broken
	}
	if w.syncing || w.size != w.syncedSize {
		return errors.New("compact with unsynced records")
	}
	gen := w.gen + 1
	var buf []byte
	err := w.writeLog(gen, func(bw *bufio.Writer, off *int64) error {
		return write(func(payload []byte, scrub int) (int64, error) {
			buf = encode(buf[:0], payload, scrub)
			if _, err := bw.Write(buf); err != nil {
				return 0, err
			}
			at := *off + recordHead
			*off += int64(len(buf))
			return at, nil
		})
	})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(w.path(gen), os.O_RDWR, 0)
	if err != nil {
		// The new generation is complete and will be used on reopen; this process stops
		// writing rather than diverge from it.
		w.broken = fmt.Errorf("log unusable after compaction: %w", err)
		return w.broken
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		w.broken = fmt.Errorf("log unusable after compaction: %w", err)
		return w.broken
	}
	old, oldGen := w.f, w.gen
	w.f, w.gen, w.size, w.syncedSize = f, gen, size, size
	old.Close()
	if err := os.Remove(w.path(oldGen)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err // the next open removes it
	}
	return syncDir(w.dir)
}

// writeLog writes log generation gen: a temporary file with the header and what body
// writes, synced, then renamed into place, then the directory synced.
func (w *Log) writeLog(gen uint64, body func(bw *bufio.Writer, off *int64) error) error {
	tmp := filepath.Join(w.dir, tmpDir, "log")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	bw := bufio.NewWriterSize(f, 1<<20)
	var h [headerSize]byte
	copy(h[:], w.magic)
	bw.Write(h[:])
	off := int64(headerSize)
	err = body(bw, &off)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = w.Sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, w.path(gen)); err != nil {
		return err
	}
	return syncDir(w.dir)
}

// bytes returns the size of the log file.
func (w *Log) Bytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.size
}

// close closes the log and releases the directory lock. Callers make sure no call is in
// flight.
func (w *Log) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.f.Close()
	if lerr := w.lock.Close(); err == nil { // closing the descriptor releases the flock
		err = lerr
	}
	w.broken = errors.New("store is closed")
	return err
}

// syncDir fsyncs directory d, making renames and new files in it durable.
func syncDir(d string) error {
	f, err := os.Open(d)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Checksum is the CRC-32C of b, the checksum the log uses, for owners that check the
// scrubbable tail of their records themselves.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, crcTable) }

// Generation is the number of the current log file; every compaction starts a new one.
func (w *Log) Generation() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen
}

// File is the path of the current log file.
func (w *Log) File() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.path(w.gen)
}
