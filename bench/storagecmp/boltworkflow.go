package storagecmp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/lethe-erasure/lethe/pkg/workflow"
)

var (
	bRecords = []byte("records") // request id → Record JSON
	bHolds   = []byte("holds")   // hold id → Hold JSON
)

// BoltWorkflow is a workflow.Store in one bbolt file: each write is one transaction that
// writes only its own record, where workflow.FileStore rewrites the whole state.
type BoltWorkflow struct {
	db *bolt.DB
}

var _ workflow.Store = (*BoltWorkflow)(nil)

// OpenBoltWorkflow opens (creating it) the store in file path with bbolt's default options.
func OpenBoltWorkflow(path string) (*BoltWorkflow, error) {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return nil, fmt.Errorf("storagecmp: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bRecords); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(bHolds)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("storagecmp: create buckets: %w", err)
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
	var out []workflow.Record
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bRecords).ForEach(func(_, v []byte) error {
			var r workflow.Record
			if err := decode(v, &r); err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].SubmittedAt.Equal(out[j].SubmittedAt) {
			return out[i].SubmittedAt.Before(out[j].SubmittedAt)
		}
		return out[i].RequestID < out[j].RequestID
	})
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
	var out []workflow.Hold
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bHolds).ForEach(func(_, v []byte) error {
			var h workflow.Hold
			if err := decode(v, &h); err != nil {
				return err
			}
			out = append(out, h)
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, err
}
