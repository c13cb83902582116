package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// locators are a helpdesk store's: the directory holding <tenant>.json.
type locators struct {
	Dir string `yaml:"dir"`
}

// ticket is one support ticket; Requester is the customer id.
type ticket struct {
	Requester string `json:"requester"`
	Text      string `json:"text"`
}

// ticketStore erases a subject's tickets by rewriting its tenant's file without them.
type ticketStore struct{ mu sync.Mutex }

var (
	_ deletion.Store     = (*ticketStore)(nil)
	_ deletion.Validator = (*ticketStore)(nil)
)

func (s *ticketStore) Validate(st inventory.Entry) error {
	_, err := locatorsOf(st)
	return err
}

func locatorsOf(st inventory.Entry) (locators, error) {
	var l locators
	if err := st.Locators.Decode(&l); err != nil {
		return l, retry.Permanent(fmt.Errorf("helpdesk: store %q: %w", st.Name, err))
	}
	if !filepath.IsAbs(l.Dir) {
		return l, retry.Permanent(fmt.Errorf("helpdesk: store %q: locators.dir must be an absolute path", st.Name))
	}
	return l, nil
}

func (s *ticketStore) Erase(ctx context.Context, st inventory.Entry, sub deletion.Subject) (deletion.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	path, all, err := s.read(ctx, st, sub)
	if err != nil {
		return deletion.Result{}, err
	}
	keep := []ticket{}
	for _, t := range all {
		if !matches(t, sub) {
			keep = append(keep, t)
		}
	}
	if n := len(all) - len(keep); n > 0 {
		b, err := json.Marshal(keep)
		if err != nil {
			return deletion.Result{}, retry.Permanent(err)
		}
		if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
			return deletion.Result{}, fmt.Errorf("helpdesk: write: %w", err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			return deletion.Result{}, fmt.Errorf("helpdesk: replace: %w", err)
		}
	}
	return deletion.Result{Locations: []event.LocationCount{{Location: st.Name + "/" + sub.Tenant, Deleted: int64(len(all) - len(keep))}}}, nil
}

func (s *ticketStore) Verify(ctx context.Context, st inventory.Entry, sub deletion.Subject) (event.Verification, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, all, err := s.read(ctx, st, sub)
	if err != nil {
		return event.Verification{}, err
	}
	v := event.Verification{Method: "helpdesk tickets re-read by requester"}
	for _, t := range all {
		if matches(t, sub) {
			v.Remaining++
		}
	}
	return v, nil
}

// matches reports whether t is sub's: every ticket of the tenant for a tenant-scope sub.
func matches(t ticket, sub deletion.Subject) bool {
	return sub.TenantScope() || sub.ID != "" && t.Requester == sub.ID
}

// read returns the tenant's file and its tickets (none when it does not exist).
func (s *ticketStore) read(ctx context.Context, st inventory.Entry, sub deletion.Subject) (string, []ticket, error) {
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	l, err := locatorsOf(st)
	if err != nil {
		return "", nil, err
	}
	if err := subject.ValidateTenant(sub.Tenant); err != nil {
		return "", nil, retry.Permanent(err)
	}
	path := filepath.Join(l.Dir, sub.Tenant+".json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("helpdesk: read: %w", err)
	}
	var all []ticket
	if err := json.Unmarshal(b, &all); err != nil {
		return "", nil, retry.Permanent(fmt.Errorf("helpdesk: %s.json: %w", sub.Tenant, err))
	}
	return path, all, nil
}
