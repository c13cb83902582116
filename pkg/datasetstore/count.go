package datasetstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lethe-erasure/lethe/pkg/datasetstore/rows"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
)

var (
	_ deletion.Counter      = (*Store)(nil)
	_ deletion.BatchCounter = (*Store)(nil)
)

// Count counts what Erase would delete of s in st now, with Erase's locations and units:
// per location the matching rows of the current objects and, where the bucket keeps
// versions, the older versions that hold such rows; for a tenant, its dataset objects and
// older versions. It changes nothing; what it cannot read it does not count (Verify
// reports it). With summaries, the current version of a CSV or TSV object that this
// process wrote last is counted from its row index (rowindex.go), without a read.
func (s *Store) Count(ctx context.Context, st inventory.Entry, subj deletion.Subject) ([]event.LocationCount, error) {
	locs, m, err := s.targets(st, subj)
	if err != nil {
		return nil, err
	}
	var out []event.LocationCount
	for _, l := range locs {
		var c counts
		if m == nil {
			c, err = tenantData(ctx, l, false)
		} else {
			c, err = countMatched(ctx, l, m)
		}
		if err != nil {
			return nil, fmt.Errorf("dataset store %q: count: %w", st.Name, err)
		}
		out = append(out, c.of(l.name, c.current, c.old)...)
	}
	return out, nil
}

// countMatched counts the rows m matches in the current objects of l and the older versions
// that hold any.
func countMatched(ctx context.Context, l location, m *matcher) (c counts, err error) {
	listed := time.Now()
	ls, err := inventoryOf(ctx, l)
	c.versioned = ls.Versioned != nil
	if err != nil || m.empty() {
		return c, err
	}
	unreadable := func(err error) bool {
		return errors.Is(err, rows.ErrMalformed) || errors.Is(err, objectstore.ErrNotFound)
	}
	sv := l.index(m, nil, true)
	for _, key := range ls.Keys {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		if cur := ls.Current(key); !sv.skip(ctx, key, cur, false) {
			m.begin()
			// the rows of a version this process wrote are counted from its row index
			n, known := sv.countKnown(key, cur, listed, m)
			var err error
			if !known {
				n, err = countObject(ctx, l.bucket, key, m, sv, l.lim)
			}
			if err != nil && !unreadable(err) {
				return c, err
			}
			if err == nil {
				c.current += int64(n)
				m.keep(false)
			}
		}
		for _, v := range ls.Versions[key] {
			if v.Latest || v.DeleteMarker || sv.skip(ctx, key, v, false) {
				continue
			}
			m.begin()
			n, err := countVersion(ctx, ls.Versioned, v, m, sv, l.lim)
			if err != nil && !unreadable(err) {
				return c, err
			}
			if err == nil && n > 0 {
				c.old++
				m.keep(true)
			}
		}
		if err := sv.flush(ctx, key, ls.Live(key)); err != nil {
			return c, err
		}
	}
	l.hand.Put(listingKey(l), ls, listed)
	return c, nil
}

// CountBatch counts what EraseBatch would delete of each subject, reading each object and
// older version once for the whole batch, with EraseBatch's grouping and attribution (a row
// holding the identifiers of two subjects counts for the first of them). Where EraseBatch
// erases one subject at a time, so does CountBatch.
func (s *Store) CountBatch(ctx context.Context, st inventory.Entry, subjects []deletion.Subject) ([][]event.LocationCount, []error) {
	found := make([][]event.LocationCount, len(subjects))
	errs := make([]error, len(subjects))
	l, err := LocatorsOf(st)
	for i, subj := range subjects {
		switch {
		case err != nil:
			errs[i] = err
		case perSubject(l): // as EraseBatch: each subject on its own
			found[i], errs[i] = s.Count(ctx, st, subj)
		}
	}
	if err != nil || perSubject(l) {
		return found, errs
	}
	gs := s.batchGroups(st, subjects, errs, func(int) {})
	gs.each(func(use []int, locs []location) {
		runGroup(ctx, l, subjects, use, locs, countMatched, func(i int, lcs []event.LocationCount, err error) {
			if err != nil {
				errs[i] = fmt.Errorf("dataset store %q: find: %w", st.Name, err)
				return
			}
			found[i] = append(found[i], lcs...)
		})
	})
	return found, errs
}

// targets are the locations of st for subj and, for a subject-scope subj, its row matcher
// (nil for a tenant).
func (s *Store) targets(st inventory.Entry, subj deletion.Subject) ([]location, *matcher, error) {
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
