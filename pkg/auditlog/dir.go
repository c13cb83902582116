package auditlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/wal"

	"github.com/lethe-erasure/lethe/pkg/event"
)

// DirStore is a durable Store in a local directory, for the standalone process. Its state
// lives in memory and every change is a record appended to a write-ahead log in the
// directory; reads never touch the disk.
//
// A write decides its condition (create if absent, attempt or head seq compare) in memory
// while it holds its item, appends its record and returns only after an fsync covering the
// record: concurrent writers share one fsync (group commit), so a write costs about one
// fsync however many callers write at once. A write is visible to readers only once it is
// durable; one that fails (its fsync failed) leaves no visible state and is cut off the
// log. A write that returns an error may still be found after a crash when the error came
// from a failed fsync of a record the disk did keep; callers retry, and every write is
// idempotent.
//
// Opening the directory (OpenDir, for the service that owns the store) replays the log
// into memory; a record torn by a crash (it was never acknowledged) is cut off, every
// complete record is kept, and Repairs says what was cut for the owner to log.
// OpenDirReadOnly, for verifiers, changes nothing and fails on any damaged record, a torn
// one included. When the log has grown
// past a threshold, a write compacts it: the state is written as a new log file (a
// temporary file, fsynced and renamed into place, then the directory fsynced) and the old
// file removed.
//
// DirStore is safe for concurrent use. Only one store may have a directory open at a time:
// OpenDir takes an exclusive lock (flock) on the directory's LOCK file and fails while
// another store, in this process or another, holds it; Close releases it. Memory holds
// every stored item: the directory store serves one deployment, not a table's worth.
//
// Layout: LOCK, wal-<generation>.log (one at a time, hex generation), .tmp/ (compaction's
// temporary file, cleared on open).
type DirStore struct {
	root      string
	log       *wal.Log // nil when opened read-only
	compactAt int64    // log size that triggers a compaction; tests lower it
	base      int64    // log size after the last compaction or open

	mu         sync.RWMutex
	cond       *sync.Cond // on mu's write lock: an item was released, a compaction ended
	busy       map[item]bool
	pending    map[item]*wal.Batch // items a link applied before they were durable, and the batch making them so
	inflight   int
	compacting bool
	closed     bool

	events     map[[2]string]map[string][]byte // (tenant, subject hash) → event id → JSON
	requests   map[string]storedRequest
	reports    map[string]map[string]storedReport // request id → store → report
	receipts   map[string][]byte                  // request id → receipt JSON
	receiptIdx map[string]map[string]int64        // tenant → request id → seq at creation
	heads      map[string]storedHead
	published  map[string][]byte // request id → publication mark JSON

	suppressions map[[2]string]storedSuppression // (tenant, pseudonym) → entry
	addenda      map[string][]byte               // addendum id → addendum JSON
	addendumIdx  map[string]map[string]bool      // tenant → addendum ids
	addendaOfReq map[string]map[string]bool      // request id → addendum ids
	tasks        dirTasks
	rejections   map[string][]byte // request id → rejection JSON
}

type storedRequest struct {
	r    Request
	json []byte
}

type storedReport struct {
	d    event.StoreDone // decoded once, cloned for readers
	json []byte
}

type storedHead struct {
	seq  int64
	hash string
	// record names what the head links: a receipt's request id or an addendum's id.
	record   string
	addendum bool
	// keyID and mac are the chain MAC of the record, empty when it has none.
	keyID, mac string
	json       []byte
}

// item names one stored item, held by the write in flight on it.
type item struct {
	op      byte
	a, b, c string
}

var _ Table = (*DirStore)(nil)

// defaultCompactAt is the log size past which a write compacts the log.
const defaultCompactAt = 64 << 20

// OpenDir opens (creating it if needed, mode 0700) the store in dir and replays its log.
// It fails when another store has dir open, when dir holds the one-file-per-item layout of
// earlier versions, and when the log is damaged other than by a torn last record.
func OpenDir(dir string) (*DirStore, error) {
	s, err := newDirStore(dir)
	if err != nil {
		return nil, err
	}
	if s.log, err = wal.Open(dir, logMagic, func(p []byte, _ int64) error { return s.apply(p, nil) }); err != nil {
		return nil, fmt.Errorf("auditlog: open %s: %w", dir, err)
	}
	s.base = s.log.Bytes()
	return s, nil
}

// OpenDirReadOnly reads the store in dir into memory without changing anything in the
// directory (wal.Read): no repair, truncation or compaction. Every write fails. It fails
// with a *wal.DamageError when any record does not verify (a torn last record included),
// with wal.ErrInUse while a running store holds the directory, and with an error wrapping
// fs.ErrNotExist when dir holds no store.
func OpenDirReadOnly(dir string) (*DirStore, error) {
	s, err := newDirStore(dir)
	if err != nil {
		return nil, err
	}
	if err := wal.Read(dir, logMagic, func(p []byte, _ int64) error { return s.apply(p, nil) }); err != nil {
		return nil, fmt.Errorf("auditlog: read %s: %w", dir, err)
	}
	s.closed = true // no writes
	return s, nil
}

const logMagic = "lethe-audit-1"

func newDirStore(dir string) (*DirStore, error) {
	if fi, err := os.Stat(filepath.Join(dir, "requests")); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("auditlog: open %s: the directory holds the one-file-per-item layout of an earlier version, which this version does not read", dir)
	}
	s := &DirStore{
		root: dir, compactAt: defaultCompactAt, busy: map[item]bool{}, pending: map[item]*wal.Batch{},
		events: map[[2]string]map[string][]byte{}, requests: map[string]storedRequest{},
		reports: map[string]map[string]storedReport{}, receipts: map[string][]byte{},
		receiptIdx: map[string]map[string]int64{}, heads: map[string]storedHead{},
		published: map[string][]byte{}, suppressions: map[[2]string]storedSuppression{}, rejections: map[string][]byte{},
		addenda: map[string][]byte{}, addendumIdx: map[string]map[string]bool{},
		addendaOfReq: map[string]map[string]bool{}, tasks: dirTasks{byID: map[string]Task{}},
	}
	s.cond = sync.NewCond(&s.mu)
	return s, nil
}

// Repairs lists what opening the store changed in its directory (a torn last record cut
// off, a superseded log file removed), for the owner to log; nil when opened read-only.
func (s *DirStore) Repairs() []wal.Repair {
	if s.log == nil {
		return nil
	}
	return s.log.Repairs()
}

// Close waits for the writes in flight, then closes the log and releases the directory.
// Later writes fail; reads keep answering from memory.
func (s *DirStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.log == nil {
		s.closed = true
		return nil
	}
	s.closed = true
	for s.inflight > 0 || s.compacting {
		s.cond.Wait()
	}
	s.cond.Broadcast()
	if err := s.log.Close(); err != nil {
		return fmt.Errorf("auditlog: close: %w", err)
	}
	return nil
}

// AppendEvent stores e unless its id is stored for the tenant and subject hash.
func (s *DirStore) AppendEvent(ctx context.Context, e Event) error {
	if e.EventID == "" || e.TenantID == "" || e.SubjectHash == "" {
		return retry.Permanent(errors.New("auditlog: event needs an event id, a tenant id and a subject hash"))
	}
	err := s.write(ctx, item{opEvent, e.TenantID, e.SubjectHash, e.EventID}, func() ([]byte, error) {
		if _, ok := s.events[[2]string{e.TenantID, e.SubjectHash}][e.EventID]; ok {
			return nil, nil
		}
		return record(opEvent, "", e)
	})
	return wrap("append event", err)
}

// Events returns the subject's events ordered by At then EventID.
func (s *DirStore) Events(ctx context.Context, tenant, subjectHash string) ([]Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.events[[2]string{tenant, subjectHash}]
	evs := make([]Event, 0, len(m))
	for _, b := range m {
		var e Event
		if err := decode(b, &e); err != nil {
			return nil, wrap("events", err)
		}
		evs = append(evs, e)
	}
	SortEvents(evs)
	return evs, ctx.Err()
}

// PutRequest inserts r or replaces the stored request when r.Attempt >= its attempt.
func (s *DirStore) PutRequest(ctx context.Context, r Request) error {
	if r.RequestID == "" {
		return retry.Permanent(errors.New("auditlog: request needs a request id"))
	}
	err := s.writeValue(ctx, item{op: opRequest, a: r.RequestID}, storedRequest{r: r}.copy(), func() ([]byte, error) {
		if old, ok := s.requests[r.RequestID]; ok && r.Attempt < old.r.Attempt {
			return nil, nil
		}
		return record(opRequest, "", r)
	})
	return wrap("put request", err)
}

// GetRequest returns the request or ErrNotFound.
func (s *DirStore) GetRequest(ctx context.Context, requestID string) (Request, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr, ok := s.requests[requestID]
	if !ok {
		return Request{}, fmt.Errorf("auditlog: get request: %w", ErrNotFound)
	}
	return sr.copy(), nil
}

// ListRequests returns the tenant's requests ("" for every tenant) ordered by RequestedAt
// then RequestID, from memory.
func (s *DirStore) ListRequests(ctx context.Context, tenant string) ([]Request, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	rs := make([]Request, 0, len(s.requests))
	for _, sr := range s.requests {
		if tenant == "" || sr.r.TenantID == tenant {
			rs = append(rs, sr.copy())
		}
	}
	s.mu.RUnlock()
	SortRequests(rs)
	return rs, nil
}

func (sr storedRequest) copy() Request {
	r := sr.r
	r.ExpectedStores = append([]string(nil), r.ExpectedStores...)
	r.SessionHashes = append([]string(nil), r.SessionHashes...)
	r.Exempt = append([]event.Exemption(nil), r.Exempt...)
	return r
}

// PutReport stores d unless a report of a later attempt is stored for its request and store.
func (s *DirStore) PutReport(ctx context.Context, d event.StoreDone) error {
	if d.RequestID == "" || d.Store == "" {
		return retry.Permanent(errors.New("auditlog: report needs a request id and a store"))
	}
	err := s.writeValue(ctx, item{op: opReport, a: d.RequestID, b: d.Store}, d.Clone(), func() ([]byte, error) {
		if old, ok := s.reports[d.RequestID][d.Store]; ok && d.Attempt < old.d.Attempt {
			return nil, nil
		}
		return record(opReport, "", d)
	})
	return wrap("put report", err)
}

// CreateReport stores d unless a report is stored for its request and store (ErrExists).
func (s *DirStore) CreateReport(ctx context.Context, d event.StoreDone) error {
	if d.RequestID == "" || d.Store == "" {
		return retry.Permanent(errors.New("auditlog: report needs a request id and a store"))
	}
	err := s.writeValue(ctx, item{op: opReport, a: d.RequestID, b: d.Store}, d.Clone(), func() ([]byte, error) {
		if _, ok := s.reports[d.RequestID][d.Store]; ok {
			return nil, ErrExists
		}
		return record(opReport, "", d)
	})
	return wrap("create report", err)
}

// Reports returns the request's reports ordered by store name.
func (s *DirStore) Reports(ctx context.Context, requestID string) ([]event.StoreDone, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.reportsOf(requestID), nil
}

// reportsOf returns copies of the request's reports ordered by store name; s.mu is held.
func (s *DirStore) reportsOf(requestID string) []event.StoreDone {
	m := s.reports[requestID]
	ds := make([]event.StoreDone, 0, len(m))
	for _, sr := range m {
		ds = append(ds, sr.d.Clone())
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].Store < ds[j].Store })
	return ds
}

// RequestState returns the request, its reports and its publication mark as of one moment.
func (s *DirStore) RequestState(ctx context.Context, requestID string) (RequestState, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr, ok := s.requests[requestID]
	if !ok {
		return RequestState{}, fmt.Errorf("auditlog: request state: %w", ErrNotFound)
	}
	_, published := s.published[requestID]
	return RequestState{Request: sr.copy(), Reports: s.reportsOf(requestID), Published: published}, ctx.Err()
}

// Awaiting implements Awaiter.
func (s *DirStore) Awaiting(ctx context.Context, requestID string) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr, ok := s.requests[requestID]
	if !ok {
		return true, ctx.Err()
	}
	reports := s.reports[requestID]
	for _, st := range sr.r.ExpectedStores {
		if _, ok := reports[st]; !ok {
			return true, ctx.Err()
		}
	}
	return false, ctx.Err()
}

// GetReceipt returns the request's receipt or ErrNotFound.
func (s *DirStore) GetReceipt(ctx context.Context, requestID string) (event.Receipt, error) {
	if err := s.rlockSettled(item{op: opReceipt, a: requestID}); err != nil {
		return event.Receipt{}, wrap("get receipt", err)
	}
	defer s.mu.RUnlock()
	b, ok := s.receipts[requestID]
	if !ok {
		return event.Receipt{}, fmt.Errorf("auditlog: get receipt: %w", ErrNotFound)
	}
	var r event.Receipt
	return r, wrap("get receipt", decode(b, &r))
}

// PutReceipt creates the receipt of r.RequestID, or fails with ErrExists. One record
// stores the receipt and the tenant's index entry (its tenant and seq).
func (s *DirStore) PutReceipt(ctx context.Context, r event.Receipt) error {
	if r.RequestID == "" || r.TenantID == "" {
		return retry.Permanent(errors.New("auditlog: receipt needs a request id and a tenant id"))
	}
	err := s.write(ctx, item{op: opReceipt, a: r.RequestID}, func() ([]byte, error) {
		if _, ok := s.receipts[r.RequestID]; ok {
			return nil, ErrExists
		}
		return record(opReceipt, "", r)
	})
	return wrap("put receipt", err)
}

// overwriteReceipt replaces the stored receipt of r.RequestID unconditionally and keeps
// its index entry, as someone with write access to the directory could.
func (s *DirStore) overwriteReceipt(ctx context.Context, r event.Receipt) error {
	err := s.write(ctx, item{op: opReceipt, a: r.RequestID}, func() ([]byte, error) {
		return record(opReceiptOverwrite, "", r)
	})
	return wrap("overwrite receipt", err)
}

// Receipts returns the tenant's receipts ordered by Seq. A receipt whose tenant or seq
// disagrees with the index entry written with it is skipped.
func (s *DirStore) Receipts(ctx context.Context, tenant string) ([]event.Receipt, error) {
	if err := s.rlockSettled(item{op: opHead, a: tenant}); err != nil {
		return nil, wrap("receipts", err)
	}
	defer s.mu.RUnlock()
	var rs []event.Receipt
	for id, seq := range s.receiptIdx[tenant] {
		b, ok := s.receipts[id]
		if !ok {
			continue
		}
		var r event.Receipt
		if err := decode(b, &r); err != nil {
			return nil, wrap("receipts", err)
		}
		if r.TenantID == tenant && r.Seq == seq {
			rs = append(rs, r)
		}
	}
	SortReceipts(rs)
	return rs, nil
}

// Head returns the tenant's head, the zero Head when it has none.
func (s *DirStore) Head(ctx context.Context, tenant string) (Head, error) {
	if err := s.rlockSettled(item{op: opHead, a: tenant}); err != nil {
		return Head{}, wrap("head", err)
	}
	defer s.mu.RUnlock()
	sh, ok := s.heads[tenant]
	if !ok {
		return Head{}, nil
	}
	var h Head
	return h, wrap("head", decode(sh.json, &h))
}

// SwapHead replaces the tenant's head with h if its Seq is oldSeq, else ErrConflict.
func (s *DirStore) SwapHead(ctx context.Context, tenant string, oldSeq int64, h Head) error {
	err := s.write(ctx, item{op: opHead, a: tenant}, func() ([]byte, error) {
		if s.heads[tenant].seq != oldSeq {
			return nil, ErrConflict
		}
		return record(opHead, tenant, h)
	})
	return wrap("swap head", err)
}

// wrap adds the operation to err unless it is nil or a sentinel.
func wrap(op string, err error) error {
	if err == nil || err == ErrExists || err == ErrConflict || err == context.Canceled || err == context.DeadlineExceeded {
		return err
	}
	return fmt.Errorf("auditlog: %s: %w", op, err)
}
