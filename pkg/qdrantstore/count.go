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

// Count says, per collection template, how many points an Erase of s would delete: an
// exact count with the filter Erase uses, or for a tenant-scope s every point of the
// tenant (by its tenant field, or in its own collections). It writes nothing; errors are
// classified as Verify's.
func (st *Store) Count(ctx context.Context, inv inventory.Store, s deletion.Subject) (deletion.Result, error) {
	l, err := LocatorsOf(inv)
	if err != nil {
		return deletion.Result{}, err
	}
	var f *qdrant.Filter
	if s.TenantScope() {
		if err := tenantTemplates(l); err != nil {
			return deletion.Result{}, err
		}
		if f, err = tenantFilter(l, s.Tenant); err != nil {
			return deletion.Result{}, err
		}
	} else {
		if f, err = subjectFilter(l, s); err != nil {
			return deletion.Result{}, err
		}
		if err := checkFilter(f); err != nil {
			return deletion.Result{}, err
		}
	}
	var res deletion.Result
	for _, tmpl := range l.Collections {
		loc := location(tmpl, s.Tenant)
		var n int64
		for _, coll := range collections(tmpl, s) {
			c, err := st.count(ctx, coll, f)
			if err != nil {
				return res, fmt.Errorf("qdrant: count %s: %w", loc, redact(err, coll, loc))
			}
			n += c
		}
		res.Locations = append(res.Locations, event.LocationCount{Location: loc, Deleted: n})
	}
	return res, nil
}
