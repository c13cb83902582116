package auditlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// DirStore is a durable Store in a local directory, for the standalone process: one JSON
// file per item. Conditional creates write a temporary file, fsync it and hard-link it to
// its final name (the link fails if the name exists, so a create is atomic and never
// leaves a partial file); conditional replaces compare and then rename a synced temporary
// file over the old one under the store's mutex. Directories are fsynced after each
// change, so an acknowledged write survives a crash, and reopening the directory sees
// every acknowledged write.
//
// DirStore is safe for concurrent use within one process. Two processes must not open the
// same directory: the conditional replaces are atomic only under the in-process mutex.
//
// Layout (every name derived from an id is "x" + hex(id), or "h" + hex(sha256(id)) for
// ids longer than 100 bytes, so no id can escape its directory or collide with another):
//
//	events/<tenant>/<subject hash>/<event id>.json
//	requests/<request id>.json
//	reports/<request id>/<store>.json
//	receipts/<request id>.json
//	tenants/<tenant>/head.json
//	tenants/<tenant>/receipts/<request id>.<seq>   (index entry; holds the request id)
type DirStore struct {
	root string
	mu   sync.RWMutex
}

var _ Store = (*DirStore)(nil)

// OpenDir opens (creating it if needed) the store in dir. Temporary files left by a crash
// are removed.
func OpenDir(dir string) (*DirStore, error) {
	s := &DirStore{root: dir}
	if err := os.RemoveAll(s.tmpDir()); err != nil {
		return nil, fmt.Errorf("auditlog: open %s: %w", dir, err)
	}
	for _, d := range []string{"events", "requests", "reports", "receipts", "tenants", ".tmp"} {
		if err := s.mkdirs(filepath.Join(dir, d)); err != nil {
			return nil, fmt.Errorf("auditlog: open %s: %w", dir, err)
		}
	}
	return s, nil
}

// AppendEvent stores e unless its id is stored for the tenant and subject hash.
func (s *DirStore) AppendEvent(ctx context.Context, e Event) error {
	if e.EventID == "" || e.TenantID == "" || e.SubjectHash == "" {
		return deletion.Permanent(errors.New("auditlog: event needs an event id, a tenant id and a subject hash"))
	}
	p := filepath.Join(s.root, "events", name(e.TenantID), name(e.SubjectHash), name(e.EventID)+".json")
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.create(p, e); err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("auditlog: append event: %w", err)
	}
	return nil
}

// Events returns the subject's events ordered by At then EventID.
func (s *DirStore) Events(ctx context.Context, tenant, subjectHash string) ([]Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	dir := filepath.Join(s.root, "events", name(tenant), name(subjectHash))
	files, err := listDir(dir)
	if err != nil {
		return nil, fmt.Errorf("auditlog: events: %w", err)
	}
	evs := make([]Event, 0, len(files))
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var e Event
		if err := readJSON(filepath.Join(dir, f), &e); err != nil {
			return nil, fmt.Errorf("auditlog: events: %w", err)
		}
		evs = append(evs, e)
	}
	SortEvents(evs)
	return evs, nil
}

// PutRequest inserts r or replaces the stored request when r.Attempt >= its attempt.
func (s *DirStore) PutRequest(ctx context.Context, r Request) error {
	if r.RequestID == "" {
		return deletion.Permanent(errors.New("auditlog: request needs a request id"))
	}
	p := filepath.Join(s.root, "requests", name(r.RequestID)+".json")
	s.mu.Lock()
	defer s.mu.Unlock()
	var old Request
	switch err := readJSON(p, &old); {
	case err == nil && r.Attempt < old.Attempt:
		return nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return fmt.Errorf("auditlog: put request: %w", err)
	}
	if err := s.replace(p, r); err != nil {
		return fmt.Errorf("auditlog: put request: %w", err)
	}
	return nil
}

// GetRequest returns the request or ErrNotFound.
func (s *DirStore) GetRequest(ctx context.Context, requestID string) (Request, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var r Request
	if err := readJSON(filepath.Join(s.root, "requests", name(requestID)+".json"), &r); err != nil {
		return Request{}, fmt.Errorf("auditlog: get request: %w", err)
	}
	return r, nil
}

// ListRequests returns the tenant's requests ("" for every tenant) ordered by RequestedAt
// then RequestID. It reads every stored request: the directory store serves one
// deployment's requests, not a table's worth.
func (s *DirStore) ListRequests(ctx context.Context, tenant string) ([]Request, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	dir := filepath.Join(s.root, "requests")
	files, err := listDir(dir)
	if err != nil {
		return nil, fmt.Errorf("auditlog: list requests: %w", err)
	}
	rs := []Request{}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var r Request
		if err := readJSON(filepath.Join(dir, f), &r); err != nil {
			return nil, fmt.Errorf("auditlog: list requests: %w", err)
		}
		if tenant == "" || r.TenantID == tenant {
			rs = append(rs, r)
		}
	}
	SortRequests(rs)
	return rs, nil
}

// PutReport stores d unless a report of a later attempt is stored for its request and store.
func (s *DirStore) PutReport(ctx context.Context, d event.StoreDone) error {
	if d.RequestID == "" || d.Store == "" {
		return deletion.Permanent(errors.New("auditlog: report needs a request id and a store"))
	}
	dir := filepath.Join(s.root, "reports", name(d.RequestID))
	p := filepath.Join(dir, name(d.Store)+".json")
	s.mu.Lock()
	defer s.mu.Unlock()
	var old event.StoreDone
	switch err := readJSON(p, &old); {
	case err == nil && d.Attempt < old.Attempt:
		return nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return fmt.Errorf("auditlog: put report: %w", err)
	}
	if err := s.mkdirs(dir); err != nil {
		return fmt.Errorf("auditlog: put report: %w", err)
	}
	if err := s.replace(p, d); err != nil {
		return fmt.Errorf("auditlog: put report: %w", err)
	}
	return nil
}

// Reports returns the request's reports ordered by store name.
func (s *DirStore) Reports(ctx context.Context, requestID string) ([]event.StoreDone, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	dir := filepath.Join(s.root, "reports", name(requestID))
	files, err := listDir(dir)
	if err != nil {
		return nil, fmt.Errorf("auditlog: reports: %w", err)
	}
	ds := make([]event.StoreDone, 0, len(files))
	for _, f := range files {
		var d event.StoreDone
		if err := readJSON(filepath.Join(dir, f), &d); err != nil {
			return nil, fmt.Errorf("auditlog: reports: %w", err)
		}
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].Store < ds[j].Store })
	return ds, nil
}

// GetReceipt returns the request's receipt or ErrNotFound.
func (s *DirStore) GetReceipt(ctx context.Context, requestID string) (event.Receipt, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var r event.Receipt
	if err := readJSON(s.receiptPath(requestID), &r); err != nil {
		return event.Receipt{}, fmt.Errorf("auditlog: get receipt: %w", err)
	}
	return r, nil
}

// PutReceipt creates the receipt of r.RequestID, or fails with ErrExists. It writes the
// tenant's index entry first and the receipt second, so a crash in between leaves an
// entry that Receipts skips until the receipt is written.
func (s *DirStore) PutReceipt(ctx context.Context, r event.Receipt) error {
	if r.RequestID == "" || r.TenantID == "" {
		return deletion.Permanent(errors.New("auditlog: receipt needs a request id and a tenant id"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.receiptPath(r.RequestID)
	if _, err := os.Stat(p); err == nil {
		return ErrExists
	}
	dir := filepath.Join(s.root, "tenants", name(r.TenantID), "receipts")
	if err := s.mkdirs(dir); err != nil {
		return fmt.Errorf("auditlog: put receipt: %w", err)
	}
	idx := filepath.Join(dir, fmt.Sprintf("%s.%d", name(r.RequestID), r.Seq))
	if err := s.writeFile(idx, []byte(r.RequestID), false); err != nil {
		return fmt.Errorf("auditlog: put receipt index: %w", err)
	}
	if err := s.create(p, r); err != nil {
		if errors.Is(err, ErrExists) {
			return ErrExists
		}
		return fmt.Errorf("auditlog: put receipt: %w", err)
	}
	return nil
}

// Receipts returns the tenant's receipts ordered by Seq. Index entries whose receipt is
// missing or disagrees with them (seq, tenant) are skipped.
func (s *DirStore) Receipts(ctx context.Context, tenant string) ([]event.Receipt, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	dir := filepath.Join(s.root, "tenants", name(tenant), "receipts")
	files, err := listDir(dir)
	if err != nil {
		return nil, fmt.Errorf("auditlog: receipts: %w", err)
	}
	var rs []event.Receipt
	seen := map[string]bool{}
	for _, f := range files {
		i := strings.LastIndexByte(f, '.')
		if i < 0 {
			continue // not an index entry
		}
		seq, err := strconv.ParseInt(f[i+1:], 10, 64)
		if err != nil {
			continue
		}
		id, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, fmt.Errorf("auditlog: receipts: %w", err)
		}
		var r event.Receipt
		switch err := readJSON(s.receiptPath(string(id)), &r); {
		case errors.Is(err, ErrNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("auditlog: receipts: %w", err)
		}
		if r.TenantID != tenant || r.Seq != seq || seen[r.RequestID] {
			continue
		}
		seen[r.RequestID] = true
		rs = append(rs, r)
	}
	SortReceipts(rs)
	return rs, nil
}

// Head returns the tenant's head, the zero Head when it has none.
func (s *DirStore) Head(ctx context.Context, tenant string) (Head, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var h Head
	err := readJSON(s.headPath(tenant), &h)
	if errors.Is(err, ErrNotFound) {
		return Head{}, nil
	}
	if err != nil {
		return Head{}, fmt.Errorf("auditlog: head: %w", err)
	}
	return h, nil
}

// SwapHead replaces the tenant's head with h if its Seq is oldSeq, else ErrConflict.
func (s *DirStore) SwapHead(ctx context.Context, tenant string, oldSeq int64, h Head) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.headPath(tenant)
	var old Head
	if err := readJSON(p, &old); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("auditlog: swap head: %w", err)
	}
	if old.Seq != oldSeq {
		return ErrConflict
	}
	if err := s.mkdirs(filepath.Dir(p)); err != nil {
		return fmt.Errorf("auditlog: swap head: %w", err)
	}
	if err := s.replace(p, h); err != nil {
		return fmt.Errorf("auditlog: swap head: %w", err)
	}
	return nil
}

func (s *DirStore) tmpDir() string { return filepath.Join(s.root, ".tmp") }
func (s *DirStore) receiptPath(requestID string) string {
	return filepath.Join(s.root, "receipts", name(requestID)+".json")
}
func (s *DirStore) headPath(tenant string) string {
	return filepath.Join(s.root, "tenants", name(tenant), "head.json")
}
