package storagecmp

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/lethe-erasure/lethe/pkg/workflow"
)

var (
	bRecords = []byte("records") // request id → Record JSON
	bHolds   = []byte("holds")   // hold id → Hold JSON
)

// BoltWorkflow is a workflow.Store in one bbolt file: each write is one transaction that
// writes only its own record, as workflow.FileStore appends only its own record.
type BoltWorkflow struct {
	db *bolt.DB
}

var _ workflow.Store = (*BoltWorkflow)(nil)

// OpenBoltWorkflow opens (creating it) the store in file path with bbolt's default options.
func OpenBoltWorkflow(path string) (*BoltWorkflow, error) {
	db, err := openBolt(path, bRecords, bHolds)
	if err != nil {
		return nil, err
	}
	return &BoltWorkflow{db: db}, nil
}

// DB is the underlying database.
func (s *BoltWorkflow) DB() *bolt.DB { return s.db }

// Close closes the database file.
func (s *BoltWorkflow) Close() error { return s.db.Close() }

// Create stores r with Version 1, or fails with workflow.ErrExists.
func (s *BoltWorkflow) Create(_ context.Context, r workflow.Record) error {
	r.Version = 1
	js, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bRecords)
		if b.Get([]byte(r.RequestID)) != nil {
			return workflow.ErrExists
		}
		return b.Put([]byte(r.RequestID), js)
	})
}

// Get returns the record of requestID or workflow.ErrNotFound.
func (s *BoltWorkflow) Get(_ context.Context, requestID string) (workflow.Record, error) {
	var r workflow.Record
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bRecords).Get([]byte(requestID))
		if v == nil {
			return workflow.ErrNotFound
		}
		return decode(v, &r)
	})
	return r, err
}

// Swap replaces the stored record with r if the stored Version is r.Version.
func (s *BoltWorkflow) Swap(_ context.Context, r workflow.Record) (workflow.Record, error) {
	want := r.Version
	r.Version++
	js, err := json.Marshal(r)
	if err != nil {
		return workflow.Record{}, err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bRecords)
		v := b.Get([]byte(r.RequestID))
		if v == nil {
			return workflow.ErrNotFound
		}
		var prev workflow.Record
		if err := decode(v, &prev); err != nil {
			return err
		}
		if prev.Version != want {
			return workflow.ErrConflict
		}
		return b.Put([]byte(r.RequestID), js)
	})
	if err != nil {
		return workflow.Record{}, err
	}
	return r, nil
}

// List returns every record, ordered by SubmittedAt then RequestID.
func (s *BoltWorkflow) List(context.Context) ([]workflow.Record, error) {
	out, err := all[workflow.Record](s.db, bRecords)
	sortBy(out, func(r workflow.Record) (time.Time, string) { return r.SubmittedAt, r.RequestID })
	return out, err
}

// PutHold creates or replaces the hold h.ID.
func (s *BoltWorkflow) PutHold(_ context.Context, h workflow.Hold) error {
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bHolds).Put([]byte(h.ID), js) })
}

// Holds returns every hold, ordered by CreatedAt then ID.
func (s *BoltWorkflow) Holds(context.Context) ([]workflow.Hold, error) {
	out, err := all[workflow.Hold](s.db, bHolds)
	sortBy(out, func(h workflow.Hold) (time.Time, string) { return h.CreatedAt, h.ID })
	return out, err
}

// all decodes every value of bucket b.
func all[T any](db *bolt.DB, b []byte) ([]T, error) {
	var out []T
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(b).ForEach(func(_, v []byte) error {
			var x T
			if err := decode(v, &x); err != nil {
				return err
			}
			out = append(out, x)
			return nil
		})
	})
	return out, err
}

// sortBy orders xs by the time then the id that key returns.
func sortBy[T any](xs []T, key func(T) (time.Time, string)) {
	sort.Slice(xs, func(i, j int) bool {
		ti, ii := key(xs[i])
		tj, ij := key(xs[j])
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return ii < ij
	})
}
