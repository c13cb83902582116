// Package storagecmp compares Lethe's embedded durable stores — the audit table's
// auditlog.DirStore and the request gate's workflow.FileStore, both over pkg/wal — with the same
// stores written on go.etcd.io/bbolt, operation for operation, so the choice between them
// rests on figures (docs/storage.md). The bbolt stores here are measurement subjects, not
// production code: they implement the auditlog.Store and workflow.Store contracts the
// benchmarks exercise, with bbolt's default options (NoSync false: every write transaction
// fdatasyncs before it returns) and one bucket per kind of item keyed as the directory
// store keys it.
package storagecmp

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// Buckets of BoltAudit.
var (
	bEvents     = []byte("events")      // (tenant, subject hash, event id) → Event JSON
	bRequests   = []byte("requests")    // request id → Request JSON
	bReports    = []byte("reports")     // (request id, store) → StoreDone JSON
	bReceipts   = []byte("receipts")    // request id → Receipt JSON
	bReceiptIdx = []byte("receipt_idx") // (tenant, request id) → seq, big-endian
	bHeads      = []byte("heads")       // tenant → seq (big-endian, 8 bytes) ‖ Head JSON
)

// BoltAudit is an auditlog.Store in one bbolt file. Each conditional write is one
// read-write transaction that checks its condition and puts the item, so it is atomic on
// its item and durable when it returns. With Batch set, writes go through bolt's DB.Batch,
// which coalesces concurrent writers into one transaction (bbolt's group commit); every
// write function here may run more than once, as Batch requires.
type BoltAudit struct {
	db    *bolt.DB
	Batch bool
}

var _ auditlog.Store = (*BoltAudit)(nil)

// OpenBoltAudit opens (creating it) the store in file path with bbolt's default options.
func OpenBoltAudit(path string) (*BoltAudit, error) {
	db, err := openBolt(path, bEvents, bRequests, bReports, bReceipts, bReceiptIdx, bHeads)
	if err != nil {
		return nil, err
	}
	return &BoltAudit{db: db}, nil
}

// openBolt opens the database in file path with bbolt's default options and creates the
// buckets it lacks.
func openBolt(path string, buckets ...[]byte) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return nil, fmt.Errorf("storagecmp: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("storagecmp: create buckets: %w", err)
	}
	return db, nil
}

// DB is the underlying database, for size and statistics.
func (s *BoltAudit) DB() *bolt.DB { return s.db }

// Close closes the database file.
func (s *BoltAudit) Close() error { return s.db.Close() }

func (s *BoltAudit) update(fn func(*bolt.Tx) error) error {
	if s.Batch {
		return s.db.Batch(fn)
	}
	return s.db.Update(fn)
}

// key joins parts, each prefixed by its length, so that no part can run into the next and
// a prefix of whole parts selects exactly the items under it.
func key(parts ...string) []byte {
	var k []byte
	for _, p := range parts {
		k = binary.AppendUvarint(k, uint64(len(p)))
		k = append(k, p...)
	}
	return k
}

// scan calls fn with the value of every key of bucket b under prefix, in key order.
func scan(tx *bolt.Tx, b, prefix []byte, fn func(k, v []byte) error) error {
	c := tx.Bucket(b).Cursor()
	for k, v := c.Seek(prefix); k != nil && len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

func decode(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("storagecmp: malformed item: %w", err)
	}
	return nil
}

// AppendEvent stores e unless its id is stored for the tenant and subject hash.
func (s *BoltAudit) AppendEvent(_ context.Context, e auditlog.Event) error {
	js, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b, k := tx.Bucket(bEvents), key(e.TenantID, e.SubjectHash, e.EventID)
		if b.Get(k) != nil {
			return nil
		}
		return b.Put(k, js)
	})
}

// Events returns the subject's events ordered by At then EventID.
func (s *BoltAudit) Events(_ context.Context, tenant, subjectHash string) ([]auditlog.Event, error) {
	var evs []auditlog.Event
	err := s.db.View(func(tx *bolt.Tx) error {
		return scan(tx, bEvents, key(tenant, subjectHash), func(_, v []byte) error {
			var e auditlog.Event
			if err := decode(v, &e); err != nil {
				return err
			}
			evs = append(evs, e)
			return nil
		})
	})
	auditlog.SortEvents(evs)
	return evs, err
}

// PutRequest inserts r or replaces the stored request when r.Attempt >= its attempt.
func (s *BoltAudit) PutRequest(_ context.Context, r auditlog.Request) error {
	js, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bRequests)
		if old := b.Get([]byte(r.RequestID)); old != nil {
			var o auditlog.Request
			if err := decode(old, &o); err != nil {
				return err
			}
			if r.Attempt < o.Attempt {
				return nil
			}
		}
		return b.Put([]byte(r.RequestID), js)
	})
}

// GetRequest returns the request or auditlog.ErrNotFound.
func (s *BoltAudit) GetRequest(_ context.Context, requestID string) (auditlog.Request, error) {
	var r auditlog.Request
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bRequests).Get([]byte(requestID))
		if v == nil {
			return fmt.Errorf("storagecmp: get request: %w", auditlog.ErrNotFound)
		}
		return decode(v, &r)
	})
	return r, err
}

// ListRequests returns the tenant's requests ("" for every tenant).
func (s *BoltAudit) ListRequests(_ context.Context, tenant string) ([]auditlog.Request, error) {
	var rs []auditlog.Request
	err := s.db.View(func(tx *bolt.Tx) error {
		return scan(tx, bRequests, nil, func(_, v []byte) error {
			var r auditlog.Request
			if err := decode(v, &r); err != nil {
				return err
			}
			if tenant == "" || r.TenantID == tenant {
				rs = append(rs, r)
			}
			return nil
		})
	})
	auditlog.SortRequests(rs)
	return rs, err
}

// PutReport stores d unless a report of a later attempt is stored for its request and store.
func (s *BoltAudit) PutReport(_ context.Context, d event.StoreDone) error {
	js, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b, k := tx.Bucket(bReports), key(d.RequestID, d.Store)
		if old := b.Get(k); old != nil {
			var o event.StoreDone
			if err := decode(old, &o); err != nil {
				return err
			}
			if d.Attempt < o.Attempt {
				return nil
			}
		}
		return b.Put(k, js)
	})
}

// CreateReport stores d unless a report is stored for its request and store
// (auditlog.ErrExists).
func (s *BoltAudit) CreateReport(_ context.Context, d event.StoreDone) error {
	js, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b, k := tx.Bucket(bReports), key(d.RequestID, d.Store)
		if b.Get(k) != nil {
			return auditlog.ErrExists
		}
		return b.Put(k, js)
	})
}

// Reports returns the request's reports ordered by store name.
func (s *BoltAudit) Reports(_ context.Context, requestID string) ([]event.StoreDone, error) {
	var ds []event.StoreDone
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		ds, err = reportsOf(tx, requestID)
		return err
	})
	return ds, err
}

func reportsOf(tx *bolt.Tx, requestID string) ([]event.StoreDone, error) {
	var ds []event.StoreDone
	err := scan(tx, bReports, key(requestID), func(_, v []byte) error {
		var d event.StoreDone
		if err := decode(v, &d); err != nil {
			return err
		}
		ds = append(ds, d)
		return nil
	})
	sort.Slice(ds, func(i, j int) bool { return ds[i].Store < ds[j].Store })
	return ds, err
}

// RequestState returns the request and its reports in one read transaction (no
// publication marks: Published is false).
func (s *BoltAudit) RequestState(_ context.Context, requestID string) (auditlog.RequestState, error) {
	var st auditlog.RequestState
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bRequests).Get([]byte(requestID))
		if v == nil {
			return fmt.Errorf("storagecmp: request state: %w", auditlog.ErrNotFound)
		}
		if err := decode(v, &st.Request); err != nil {
			return err
		}
		var err error
		st.Reports, err = reportsOf(tx, requestID)
		return err
	})
	return st, err
}

// GetReceipt returns the request's receipt or auditlog.ErrNotFound.
func (s *BoltAudit) GetReceipt(_ context.Context, requestID string) (event.Receipt, error) {
	var r event.Receipt
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bReceipts).Get([]byte(requestID))
		if v == nil {
			return fmt.Errorf("storagecmp: get receipt: %w", auditlog.ErrNotFound)
		}
		return decode(v, &r)
	})
	return r, err
}

// PutReceipt creates the receipt of r.RequestID and its tenant index entry in one
// transaction, or fails with auditlog.ErrExists.
func (s *BoltAudit) PutReceipt(_ context.Context, r event.Receipt) error {
	if r.RequestID == "" || r.TenantID == "" {
		return errors.New("storagecmp: receipt needs a request id and a tenant id")
	}
	js, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bReceipts)
		if b.Get([]byte(r.RequestID)) != nil {
			return auditlog.ErrExists
		}
		if err := b.Put([]byte(r.RequestID), js); err != nil {
			return err
		}
		return tx.Bucket(bReceiptIdx).Put(key(r.TenantID, r.RequestID), binary.BigEndian.AppendUint64(nil, uint64(r.Seq)))
	})
}

// Receipts returns the tenant's receipts ordered by Seq; a receipt whose tenant or seq
// disagrees with its index entry is skipped.
func (s *BoltAudit) Receipts(_ context.Context, tenant string) ([]event.Receipt, error) {
	var rs []event.Receipt
	err := s.db.View(func(tx *bolt.Tx) error {
		receipts := tx.Bucket(bReceipts)
		return scan(tx, bReceiptIdx, key(tenant), func(k, v []byte) error {
			id := k[len(key(tenant)):]
			n, w := binary.Uvarint(id)
			js := receipts.Get(id[w : w+int(n)])
			if js == nil {
				return nil
			}
			var r event.Receipt
			if err := decode(js, &r); err != nil {
				return err
			}
			if r.TenantID == tenant && uint64(r.Seq) == binary.BigEndian.Uint64(v) {
				rs = append(rs, r)
			}
			return nil
		})
	})
	auditlog.SortReceipts(rs)
	return rs, err
}

// Head returns the tenant's head, the zero Head when it has none.
func (s *BoltAudit) Head(_ context.Context, tenant string) (auditlog.Head, error) {
	var h auditlog.Head
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bHeads).Get([]byte(tenant)); len(v) > 8 {
			return decode(v[8:], &h)
		}
		return nil
	})
	return h, err
}

// SwapHead replaces the tenant's head with h if its Seq is oldSeq, else
// auditlog.ErrConflict.
func (s *BoltAudit) SwapHead(_ context.Context, tenant string, oldSeq int64, h auditlog.Head) error {
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bHeads)
		var seq int64
		if v := b.Get([]byte(tenant)); len(v) >= 8 {
			seq = int64(binary.BigEndian.Uint64(v))
		}
		if seq != oldSeq {
			return auditlog.ErrConflict
		}
		return b.Put([]byte(tenant), append(binary.BigEndian.AppendUint64(nil, uint64(h.Seq)), js...))
	})
}
