package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// FileStore is a Store in one JSON file, rewritten atomically (temporary file, fsync,
// rename) on every change, so a crash leaves the previous or the new state, never a torn
// one. With an empty path it keeps everything in memory. One process owns the file.
type FileStore struct {
	path string

	mu      sync.Mutex
	records map[string]Record
	holds   map[string]Hold
}

var _ Store = (*FileStore)(nil)

type fileState struct {
	Records []Record `json:"records"`
	Holds   []Hold   `json:"holds"`
}

// OpenFile opens (or creates) the store at path; "" is a memory store.
func OpenFile(path string) (*FileStore, error) {
	s := &FileStore{path: path, records: map[string]Record{}, holds: map[string]Hold{}}
	if path == "" {
		return s, nil
	}
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workflow: read %s: %w", filepath.Base(path), err)
	}
	var st fileState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("workflow: decode %s: %w", filepath.Base(path), err)
	}
	for _, r := range st.Records {
		s.records[r.RequestID] = r
	}
	for _, h := range st.Holds {
		s.holds[h.ID] = h
	}
	return s, nil
}

// save writes the state; the caller holds mu.
func (s *FileStore) save() error {
	if s.path == "" {
		return nil
	}
	var st fileState
	for _, r := range s.records {
		st.Records = append(st.Records, r)
	}
	for _, h := range s.holds {
		st.Holds = append(st.Holds, h)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("workflow: encode: %w", err)
	}
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("workflow: write: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("workflow: write: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("workflow: sync: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("workflow: write: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("workflow: rename: %w", err)
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
	s.records[r.RequestID] = r
	if err := s.save(); err != nil {
		delete(s.records, r.RequestID)
		return err
	}
	return nil
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
	s.records[r.RequestID] = r
	if err := s.save(); err != nil {
		s.records[r.RequestID] = prev
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
	sort.Slice(out, func(i, j int) bool {
		if !out[i].SubmittedAt.Equal(out[j].SubmittedAt) {
			return out[i].SubmittedAt.Before(out[j].SubmittedAt)
		}
		return out[i].RequestID < out[j].RequestID
	})
	return out, nil
}

// PutHold implements Store.
func (s *FileStore) PutHold(_ context.Context, h Hold) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, had := s.holds[h.ID]
	s.holds[h.ID] = h
	if err := s.save(); err != nil {
		if had {
			s.holds[h.ID] = prev
		} else {
			delete(s.holds, h.ID)
		}
		return err
	}
	return nil
}

// Holds implements Store.
func (s *FileStore) Holds(context.Context) ([]Hold, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Hold, 0, len(s.holds))
	for _, h := range s.holds {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}
