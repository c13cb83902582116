package redisstore

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

var _ deletion.Counter = (*Store)(nil)

// Count counts, per key template as Erase reports them, the keys of s that exist now and
// that Erase would unlink: those the index lists and, unless st is index_only, those the
// patterns find on every primary, then, per records template, the keys of the family whose
// fields name s (every key of the family for a tenant) that no key template took. It
// changes nothing. An index key that is not a set and a records key it cannot read are
// skipped here (Verify reports them).
func (r *Store) Count(ctx context.Context, st inventory.Entry, s deletion.Subject) ([]event.LocationCount, error) {
	p, err := newPlan(st, s)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	found := map[string]int{}
	add := func(keys []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			if loc := p.match(k); loc >= 0 {
				found[k] = loc
			}
		}
	}
	if !indexOnly(st, s) {
		for _, pt := range p.patterns {
			_, err := r.forEachPrimary(ctx, func(ctx context.Context, node redis.Cmdable) error {
				return scan(ctx, node, pt.glob, "", func(keys []string) error { add(keys); return nil })
			})
			if err != nil {
				return nil, classify("scan "+p.locations[pt.loc], err)
			}
		}
	}
	indexes, err := r.indexes(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, idx := range indexes {
		members, err := r.members(ctx, idx)
		if errors.Is(err, errNotASet) {
			continue
		}
		if err != nil {
			return nil, err
		}
		add(members)
	}
	n := make([]int64, len(p.locations))
	keys := make([]indexed, 0, len(found))
	for k, loc := range found {
		keys = append(keys, indexed{key: k, loc: loc})
	}
	if err := r.countExisting(ctx, keys, func(k indexed, exists int64) { n[k.loc] += exists }); err != nil {
		return nil, err
	}
	if p.scanRecords() {
		for _, rp := range p.records {
			recs, _, _, err := r.recordsRemain(ctx, rp, p.owners, p.whole)
			if err != nil {
				return nil, classify("scan "+p.locations[rp.loc], err)
			}
			for k := range recs {
				// Erase unlinks a key once: by the key templates first, else by the first family.
				if _, dup := found[k]; !dup {
					found[k] = rp.loc
					n[rp.loc]++
				}
			}
		}
	}
	return locationCounts(p, n), nil
}

// locationCounts pairs p's locations with the counts n, one per location.
func locationCounts(p plan, n []int64) []event.LocationCount {
	locs := make([]event.LocationCount, len(p.locations))
	for i, loc := range p.locations {
		locs[i] = event.LocationCount{Location: loc, Deleted: n[i]}
	}
	return locs
}
