package qdrantstore

import (
	"context"
	"fmt"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

var _ deletion.Counter = (*Store)(nil)

// Count counts exactly, per collection template as Erase reports them, the points an Erase
// of s would delete now: those the filter Erase uses matches, or for a tenant-scope s
// every point of the tenant (by its tenant field, or in its own collections). It writes
// nothing; errors are classified as Verify's.
func (st *Store) Count(ctx context.Context, inv inventory.Entry, s deletion.Subject) ([]event.LocationCount, error) {
	l, err := LocatorsOf(inv)
	if err != nil {
		return nil, err
	}
	var f *qdrant.Filter
	if s.TenantScope() {
		if err := tenantTemplates(l); err != nil {
			return nil, err
		}
		if f, err = tenantFilter(l, s.Tenant); err != nil {
			return nil, err
		}
	} else {
		if f, err = subjectFilter(l, s); err != nil {
			return nil, err
		}
		if err := checkFilter(f); err != nil {
			return nil, err
		}
	}
	var locs []event.LocationCount
	for _, tmpl := range l.Collections {
		loc := location(tmpl, s.Tenant)
		var n int64
		for _, coll := range collections(tmpl, s) {
			c, err := st.count(ctx, coll, f)
			if err != nil {
				return nil, fmt.Errorf("qdrant: count %s: %w", loc, redact(err, coll, loc))
			}
			n += c
		}
		locs = append(locs, event.LocationCount{Location: loc, Deleted: n})
	}
	return locs, nil
}
