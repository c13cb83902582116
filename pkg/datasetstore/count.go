package datasetstore

import (
	"context"
	"fmt"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

var _ deletion.Counter = (*Store)(nil)

// Count says, per dataset location, how many rows of s an Erase would remove from the
// current objects (for a tenant, how many dataset objects and versions it would delete),
// reading as Verify reads and rewriting nothing. Objects it cannot read are not counted.
func (s *Store) Count(ctx context.Context, st inventory.Store, subj deletion.Subject) (deletion.Result, error) {
	var res deletion.Result
	locs, m, err := s.targets(st, subj)
	if err != nil {
		return res, err
	}
	for _, l := range locs {
		c, err := remaining(ctx, l, m)
		if err != nil {
			return res, fmt.Errorf("dataset store %q: count: %w", st.Name, err)
		}
		res.Locations = append(res.Locations, event.LocationCount{Location: l.name, Deleted: c.current})
	}
	return res, nil
}

// targets are the locations of st for subj and, for a subject-scope subj, its row matcher
// (nil for a tenant).
func (s *Store) targets(st inventory.Store, subj deletion.Subject) ([]location, *matcher, error) {
	locs, err := s.locations(st, subj)
	if err != nil {
		return nil, nil, err
	}
	var m *matcher
	if !subj.TenantScope() {
		if m, err = matcherFor(st, subj); err != nil {
			return nil, nil, err
		}
	}
	return locs, m, nil
}
