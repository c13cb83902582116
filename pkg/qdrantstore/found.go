package qdrantstore

import (
	"context"
	"fmt"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

var _ deletion.Finder = (*Store)(nil)

// Find counts, exactly and per collection template as Erase reports them, the points of s
// that Erase would delete now; it changes nothing. A tenant-scope s counts every point of
// the tenant (by its tenant field, or in its own collections).
func (st *Store) Find(ctx context.Context, inv inventory.Store, s deletion.Subject) ([]event.LocationCount, error) {
	l, err := LocatorsOf(inv)
	if err != nil {
		return nil, err
	}
	var locs []event.LocationCount
	if s.TenantScope() {
		if err := tenantTemplates(l); err != nil {
			return nil, err
		}
		f, err := tenantFilter(l, s.Tenant)
		if err != nil {
			return nil, err
		}
		for _, tmpl := range l.Collections {
			name := location(tmpl, s.Tenant)
			n, err := st.count(ctx, name, f)
			if err != nil {
				return nil, fmt.Errorf("qdrant: count %s: %w", name, err)
			}
			locs = append(locs, event.LocationCount{Location: name, Deleted: n})
		}
		return locs, nil
	}
	f, err := subjectFilter(l, s)
	if err != nil {
		return nil, err
	}
	if err := checkFilter(f); err != nil {
		return nil, err
	}
	for _, tmpl := range l.Collections {
		loc := location(tmpl, s.Tenant)
		var matched int64
		for _, coll := range collections(tmpl, s) {
			n, err := st.count(ctx, coll, f)
			if err != nil {
				return nil, fmt.Errorf("qdrant: count %s: %w", loc, redact(err, coll, loc))
			}
			matched += n
		}
		locs = append(locs, event.LocationCount{Location: loc, Deleted: matched})
	}
	return locs, nil
}
