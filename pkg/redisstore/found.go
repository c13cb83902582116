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

var _ deletion.Finder = (*Store)(nil)

// Find counts, per key template as Erase reports them, the keys of s that exist now and
// that Erase would unlink: those the index lists and, unless st is index_only, those the
// patterns find on every primary. It changes nothing. An index key that is not a set is
// skipped here (Verify reports it).
func (r *Store) Find(ctx context.Context, st inventory.Store, s deletion.Subject) ([]event.LocationCount, error) {
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
	keys := make([]string, 0, len(found))
	for k := range found {
		keys = append(keys, k)
	}
	for start := 0; start < len(keys); start += unlinkBatch {
		batch := keys[start:min(start+unlinkBatch, len(keys))]
		pipe := r.client.Pipeline()
		cmds := make([]*redis.IntCmd, len(batch))
		for i, k := range batch {
			cmds[i] = pipe.Exists(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, classify("count keys", err)
		}
		for i, c := range cmds {
			n[found[batch[i]]] += c.Val()
		}
	}
	locs := make([]event.LocationCount, len(p.locations))
	for i, loc := range p.locations {
		locs[i] = event.LocationCount{Location: loc, Deleted: n[i]}
	}
	return locs, nil
}
