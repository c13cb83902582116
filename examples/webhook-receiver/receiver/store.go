package receiver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
)

// Item is one record the processor holds about a data subject: an embedding, a trace, a
// cached completion. Tenant and one of Subject, Hash or Session say whose it is; an
// Unreadable item is one the processor knows to be the subject's but cannot decode, so it
// can neither check nor erase it.
type Item struct {
	Tenant     string `json:"tenant"`
	Subject    string `json:"subject,omitempty"`
	Hash       string `json:"hash,omitempty"`
	Session    string `json:"session,omitempty"`
	Unreadable bool   `json:"unreadable,omitempty"`
}

// Query is whom an erasure or verification concerns: a whole tenant, or the items of a
// tenant whose Subject, Hash or Session equals one of the given identifiers exactly (byte
// for byte: no case folding, no Unicode normalisation, no patterns).
type Query struct {
	Tenant      string
	WholeTenant bool
	Subject     string
	Hash        string
	Sessions    []string
}

func (q Query) matches(it Item) bool {
	if it.Tenant != q.Tenant {
		return false
	}
	if q.WholeTenant {
		return true
	}
	return q.Subject != "" && it.Subject == q.Subject ||
		q.Hash != "" && it.Hash == q.Hash ||
		it.Session != "" && slices.Contains(q.Sessions, it.Session)
}

// Outcome is what an erasure or a read-back found.
type Outcome struct {
	Deleted         int64
	Remaining       int64
	Unexamined      int64
	UnexaminedItems []string
}

// Store is the processor's data: items in memory, optionally saved to a JSON file after
// every change. It is safe for concurrent use.
type Store struct {
	mu    sync.Mutex
	next  int64
	items map[int64]Item
	path  string
}

// NewStore returns an empty in-memory store.
func NewStore() *Store { return &Store{items: map[int64]Item{}} }

// OpenFile returns a store kept in the JSON file path (created on the first change).
func OpenFile(path string) (*Store, error) {
	s := NewStore()
	s.path = path
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("receiver: open store: %w", err)
	}
	var items []Item
	if err := json.Unmarshal(b, &items); err != nil {
		return nil, fmt.Errorf("receiver: store %s: %w", path, err)
	}
	for _, it := range items {
		s.next++
		s.items[s.next] = it
	}
	return s, nil
}

// Put adds it and returns its id.
func (s *Store) Put(it Item) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	s.items[s.next] = it
	return s.next, s.save()
}

// Count returns how many items q matches (unreadable ones included).
func (s *Store) Count(q Query) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, it := range s.items {
		if q.matches(it) {
			n++
		}
	}
	return n
}

// Erase deletes every readable item q matches and reads back: what remains, and the
// unreadable items it could not examine (named by id, never by identifier).
func (s *Store) Erase(q Query) (Outcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var o Outcome
	for id, it := range s.items {
		if q.matches(it) && !it.Unreadable {
			delete(s.items, id)
			o.Deleted++
		}
	}
	s.examine(q, &o)
	return o, s.save()
}

// Examine reads back what of q remains, deleting nothing.
func (s *Store) Examine(q Query) Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	var o Outcome
	s.examine(q, &o)
	return o
}

func (s *Store) examine(q Query, o *Outcome) {
	ids := make([]int64, 0)
	for id, it := range s.items {
		if q.matches(it) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		if s.items[id].Unreadable {
			o.Unexamined++
			o.UnexaminedItems = append(o.UnexaminedItems, fmt.Sprintf("item %d: cannot be decoded", id))
		} else {
			o.Remaining++
		}
	}
}

func (s *Store) save() error {
	if s.path == "" {
		return nil
	}
	ids := make([]int64, 0, len(s.items))
	for id := range s.items {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	items := make([]Item, 0, len(ids))
	for _, id := range ids {
		items = append(items, s.items[id])
	}
	b, err := json.Marshal(items)
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("receiver: save store: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("receiver: save store: %w", err)
	}
	return nil
}
