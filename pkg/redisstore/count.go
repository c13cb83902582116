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

// Count says, per key template, how many distinct keys of s an Erase would unlink: the
// keys its patterns find on every primary and the names the index lists (an index member
// whose key has expired counts too, so the figure is an upper bound). It changes nothing;
// an index key that is not a set is skipped, as Erase skips it.
func (r *Store) Count(ctx context.Context, st inventory.Store, s deletion.Subject) (deletion.Result, error) {
	p, err := newPlan(st, s)
	if err != nil {
		return deletion.Result{}, err
	}
	var mu sync.Mutex
	found := map[string]int{}
	add := func(k string) {
		if i := p.match(k); i >= 0 {
			found[k] = i
		}
	}
	if !indexOnly(st, s) {
		for _, pt := range p.patterns {
			_, err := r.forEachPrimary(ctx, func(ctx context.Context, node redis.Cmdable) error {
				return scan(ctx, node, pt.glob, "", func(keys []string) error {
					mu.Lock()
					defer mu.Unlock()
					for _, k := range keys {
						add(k)
					}
					return nil
				})
			})
			if err != nil {
				return deletion.Result{}, classify("scan "+p.locations[pt.loc], err)
			}
		}
	}
	indexes, err := r.indexes(ctx, p)
	if err != nil {
		return deletion.Result{}, err
	}
	for _, idx := range indexes {
		members, err := r.members(ctx, idx)
		if errors.Is(err, errNotASet) {
			continue
		}
		if err != nil {
			return deletion.Result{}, err
		}
		for _, m := range members {
			add(m)
		}
	}
	n := make([]int64, len(p.locations))
	for _, i := range found {
		n[i]++
	}
	res := deletion.Result{Locations: make([]event.LocationCount, len(p.locations))}
	for i, loc := range p.locations {
		res.Locations[i] = event.LocationCount{Location: loc, Deleted: n[i]}
	}
	return res, nil
}
