// Package redisstore erases data subjects from inventory stores of kind "redis" (session
// history, query caches, agent graph state) with github.com/redis/go-redis/v9.
//
// Key templates such as "session:{tenant}:{subject}:*" name where a subject's keys live.
// Every template holds {tenant}. Applications write identifiers with KeyPart (or Key),
// so one identifier fills exactly one part of a key and a pattern never matches another
// subject's keys.
//
// Erase unlinks the keys an optional per-subject index lists (only those the store's
// patterns match) and, unless the entry is index_only, the keys SCAN finds on every
// primary. Records families (locators.records) are key families whose keys name no
// subject: Erase scans them on every primary and unlinks the keys whose named hash field
// or JSON key holds the subject's id or a session id exactly. Counts are exact. Verify
// scans again and reports what it cannot read as unexamined. Errors name templates, never
// identifiers.
//
// Details: docs/stores/redis.md.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// VerifyMethod is the Method of every Verification this package returns.
const VerifyMethod = "redis scan MATCH on every primary"

// VerifyIndexMethod is the verification method of index_only stores.
const VerifyIndexMethod = "redis index set read back (index_only: keys outside the index are not scanned)"

// VerifyRecordsSuffix ends the verification method of a store with records families.
const VerifyRecordsSuffix = "; records families scanned on every primary, named fields read and matched exactly"

const (
	scanCount   = 1000 // COUNT hint of each SCAN call
	unlinkBatch = 500  // keys per pipelined UNLINK batch
)

// Store is a deletion.Store for inventory stores of kind "redis". It is safe for
// concurrent use; the client is the caller's to close.
type Store struct {
	client redis.UniversalClient
}

var _ deletion.Store = (*Store)(nil)

// New returns a Store over client: a *redis.Client, *redis.ClusterClient (every master is
// scanned) or *redis.Ring (every shard is scanned).
func New(client redis.UniversalClient) *Store { return &Store{client: client} }

// Erase deletes every key of s that st's templates cover, first through the index, then by
// scanning every primary, then the keys of st's records families whose fields name s (for
// a tenant, every key of the families), and reports the deleted count per key template
// and records template. Keys of a records family it cannot read are left alone. See the
// package documentation for the contract.
func (r *Store) Erase(ctx context.Context, st inventory.Entry, s deletion.Subject) (deletion.Result, error) {
	p, err := newPlan(st, s)
	if err != nil {
		return deletion.Result{}, err
	}
	t := &tally{n: make([]int64, len(p.locations))}
	indexes, err := r.indexes(ctx, p)
	if err != nil {
		return deletion.Result{}, err
	}
	for _, idx := range indexes {
		if err := r.eraseIndexed(ctx, p, idx, t); err != nil {
			return deletion.Result{}, err
		}
	}
	for _, pt := range p.patterns {
		if indexOnly(st, s) {
			break
		}
		if _, err := r.scanDelete(ctx, p, pt, t); err != nil {
			return deletion.Result{}, classify("scan and unlink "+p.locations[pt.loc], err)
		}
	}
	if err := r.eraseAllRecords(ctx, p, t); err != nil {
		return deletion.Result{}, err
	}
	res := deletion.Result{Locations: make([]event.LocationCount, len(p.locations))}
	for i, loc := range p.locations {
		res.Locations[i] = event.LocationCount{Location: loc, Deleted: t.n[i]}
	}
	return res, nil
}

// Verify counts the distinct keys of s that st's patterns find on every primary, plus the
// names st's index still lists for those patterns, plus the keys of st's records families
// whose fields name s (for a tenant, every key of the families). What it cannot read is
// unexamined, never zero: an index key that is not a set (its members, and for an
// index_only store the subject's keys, are unknown), a key of a records family that is
// neither a hash nor a string holding a JSON object, and a shard of a Ring that is down
// (not scanned). It changes nothing.
func (r *Store) Verify(ctx context.Context, st inventory.Entry, s deletion.Subject) (event.Verification, error) {
	p, err := newPlan(st, s)
	if err != nil {
		return event.Verification{}, err
	}
	var mu sync.Mutex
	found := map[string]struct{}{}
	down := map[string]bool{}
	// index_only: no scan, but the templates still tell which listed members are s's
	method, scans := VerifyMethod, p.patterns
	if indexOnly(st, s) {
		method, scans = VerifyIndexMethod, nil
	}
	for _, pt := range scans {
		skipped, err := r.forEachPrimary(ctx, func(ctx context.Context, node redis.Cmdable) error {
			return scan(ctx, node, pt.glob, "", func(keys []string) error {
				mu.Lock()
				defer mu.Unlock()
				for _, k := range keys {
					if p.match(k) >= 0 {
						found[k] = struct{}{}
					}
				}
				return nil
			})
		})
		if err != nil {
			return event.Verification{}, classify("scan "+p.locations[pt.loc], err)
		}
		for _, name := range skipped {
			down[name] = true
		}
	}
	indexes, err := r.indexes(ctx, p)
	if err != nil {
		return event.Verification{}, err
	}
	notSets := 0
	for _, idx := range indexes {
		members, err := r.members(ctx, idx)
		if errors.Is(err, errNotASet) {
			notSets++
			continue
		}
		if err != nil {
			return event.Verification{}, err
		}
		for _, m := range members {
			if p.match(m) >= 0 {
				found[m] = struct{}{}
			}
		}
	}
	unreadN, unreadItems := 0, []string(nil)
	if p.scanRecords() {
		for _, rp := range p.records {
			keys, unread, skipped, err := r.recordsRemain(ctx, rp, p.owners, p.whole)
			if err != nil {
				return event.Verification{}, classify("scan "+p.locations[rp.loc], err)
			}
			for k := range keys {
				found[k] = struct{}{}
			}
			for _, name := range skipped {
				down[name] = true
			}
			if len(unread) > 0 {
				unreadN += len(unread)
				unreadItems = append(unreadItems, unreadItem(p.locations[rp.loc], len(unread)))
			}
		}
	}
	if len(p.records) > 0 {
		method += VerifyRecordsSuffix
	}
	v := verification(method, p, len(found), notSets, indexOnly(st, s), r.downShards(down))
	v.Unexamined += int64(unreadN)
	v.UnexaminedItems = append(v.UnexaminedItems, unreadItems...)
	return v, nil
}

// eraseAllRecords erases the keys of p's records families that p's subject owns (every key
// of the families for a tenant), adding the UNLINK replies to t.
func (r *Store) eraseAllRecords(ctx context.Context, p plan, t *tally) error {
	if !p.scanRecords() {
		return nil
	}
	for _, rp := range p.records {
		if err := r.eraseRecords(ctx, rp, p.owners, p.whole, func(_ int, n int64) { t.add(rp.loc, n) }); err != nil {
			return classify("scan and unlink "+p.locations[rp.loc], err)
		}
	}
	return nil
}

// downShards returns, sorted, the names in scanned (shards a scan skipped) and, for a
// ring, the names of its shards that are down now: also when nothing was scanned
// (index_only), since the ring routes a down shard's index keys to another shard, where
// they read as empty.
func (r *Store) downShards(scanned map[string]bool) []string {
	down := maps.Clone(scanned)
	if ring, ok := r.client.(*redis.Ring); ok {
		_, names := ringShards(ring)
		for _, name := range names {
			if down == nil {
				down = map[string]bool{}
			}
			down[name] = true
		}
	}
	return slices.Sorted(maps.Keys(down))
}

// verification is what Verify reports for p: remaining keys found, notSets index keys
// that are not sets, and the shards down whose keys were not read.
func verification(method string, p plan, remaining, notSets int, indexOnly bool, down []string) event.Verification {
	v := event.Verification{Method: method, Remaining: int64(remaining)}
	if notSets > 0 {
		v.Unexamined += int64(notSets)
		v.UnexaminedItems = append(v.UnexaminedItems, p.notSetItem(notSets, indexOnly))
	}
	for _, name := range down {
		v.Unexamined++
		v.UnexaminedItems = append(v.UnexaminedItems, fmt.Sprintf("shard %s: down, its keys were not scanned", name))
	}
	return v
}

// errNotASet marks an index key that holds something other than a set (WRONGTYPE).
var errNotASet = errors.New("index key is not a set")

// members returns the members of index set idx, errNotASet when the key holds another type.
func (r *Store) members(ctx context.Context, idx string) ([]string, error) {
	ms, err := r.client.SMembers(ctx, idx).Result()
	if isWrongType(err) {
		return nil, errNotASet
	}
	if err != nil {
		return nil, classify("read index", err)
	}
	return ms, nil
}

// indexOnly reports whether st trusts its index alone for s: the app writes every key of a
// subject through the index, so erasing and verifying cost the subject's footprint, not a
// scan of the keyspace. A tenant erasure always scans.
func indexOnly(st inventory.Entry, s deletion.Subject) bool {
	l, err := LocatorsOf(st)
	return err == nil && l.IndexOnly && l.Index != "" && !s.TenantScope()
}

// tally sums deleted keys per location; forEachPrimary may add concurrently.
type tally struct {
	mu sync.Mutex
	n  []int64
}

func (t *tally) add(loc int, n int64) {
	t.mu.Lock()
	t.n[loc] += n
	t.mu.Unlock()
}

// forEachPrimary calls fn for every primary that holds keys: each master of a cluster
// (concurrently), each live shard of a ring (concurrently), or the single server. It returns
// the names of the ring's shards that are down and were not called: go-redis marks a shard
// down after failed health checks and routes around it, so its keys are out of reach.
func (r *Store) forEachPrimary(ctx context.Context, fn func(ctx context.Context, node redis.Cmdable) error) (skipped []string, err error) {
	switch c := r.client.(type) {
	case *redis.ClusterClient:
		return nil, c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return fn(ctx, n) })
	case *redis.Ring:
		up, skipped := ringShards(c)
		var g errgroup.Group
		for _, n := range up {
			g.Go(func() error { return fn(ctx, n) })
		}
		return skipped, g.Wait()
	default:
		return nil, fn(ctx, r.client)
	}
}

// ringShards returns the clients of the ring's live shards and the names of those down.
func ringShards(c *redis.Ring) (up []*redis.Client, down []string) {
	up = c.GetShardClients()
	live := map[string]bool{}
	for _, n := range up {
		live[n.Options().Addr] = true
	}
	for name, addr := range c.Options().Addrs {
		if !live[addr] {
			down = append(down, name)
		}
	}
	return up, down
}

// pipeline returns a MULTI pipeline where all keys live on one server, a plain pipeline
// where they may span slots or shards.
func (r *Store) pipeline() redis.Pipeliner {
	switch r.client.(type) {
	case *redis.ClusterClient, *redis.Ring:
		return r.client.Pipeline()
	default:
		return r.client.TxPipeline()
	}
}

// scan calls fn with each page of keys that SCAN MATCH glob (of type typ, when set) returns
// from node, until the cursor comes back to 0.
func scan(ctx context.Context, node redis.Cmdable, glob, typ string, fn func([]string) error) error {
	var cursor uint64
	for {
		var keys []string
		var err error
		if typ != "" {
			keys, cursor, err = node.ScanType(ctx, cursor, glob, scanCount, typ).Result()
		} else {
			keys, cursor, err = node.Scan(ctx, cursor, glob, scanCount).Result()
		}
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := fn(keys); err != nil {
				return err
			}
		}
		if cursor == 0 {
			return nil
		}
	}
}

// indexes returns the index keys to read: the subject's own, or every key of the tenant
// that the index template covers (as many parts as the template: a longer key is data, not
// an index), whatever its type.
func (r *Store) indexes(ctx context.Context, p plan) ([]string, error) {
	if p.indexGlob == "" {
		return p.indexes, nil
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	var out []string
	// No TYPE filter: an index key that is not a set must be seen, to be reported.
	_, err := r.forEachPrimary(ctx, func(ctx context.Context, node redis.Cmdable) error {
		return scan(ctx, node, p.indexGlob, "", func(keys []string) error {
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys {
				if !seen[k] && globMatch(p.indexGlob, k) && strings.Count(k, string(Delimiter)) == p.indexParts {
					seen[k] = true
					out = append(out, k)
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, classify("scan index sets", err)
	}
	return out, nil
}

// eraseIndexed unlinks the members of index idx that p covers and removes them from idx.
// An index key that is not a set is left alone (Verify reports it unexamined).
func (r *Store) eraseIndexed(ctx context.Context, p plan, idx string, t *tally) error {
	members, err := r.members(ctx, idx)
	if errors.Is(err, errNotASet) {
		return nil
	}
	if err != nil {
		return err
	}
	var keys []string
	var locs []int
	for _, m := range members {
		if loc := p.match(m); loc >= 0 {
			keys = append(keys, m)
			locs = append(locs, loc)
		}
	}
	for len(keys) > 0 {
		n := min(len(keys), unlinkBatch)
		pipe := r.pipeline()
		cmds := make([]*redis.IntCmd, n)
		rem := make([]any, n)
		for i, k := range keys[:n] {
			cmds[i] = pipe.Unlink(ctx, k)
			rem[i] = k
		}
		pipe.SRem(ctx, idx, rem...)
		if all, err := pipe.Exec(ctx); err != nil {
			return classify("unlink indexed keys", cause(all, err))
		}
		for i, c := range cmds {
			t.add(locs[i], c.Val())
		}
		keys, locs = keys[n:], locs[n:]
	}
	return nil
}

// scanDelete scans every primary for pt and unlinks, in pipelined batches, the keys that
// p covers (checked in Go), adding the UNLINK replies to t.
func (r *Store) scanDelete(ctx context.Context, p plan, pt pattern, t *tally) ([]string, error) {
	return r.forEachPrimary(ctx, func(ctx context.Context, node redis.Cmdable) error {
		batch := make([]string, 0, unlinkBatch)
		seen := make(map[string]bool, unlinkBatch)
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			pipe := r.client.Pipeline()
			cmds := make([]*redis.IntCmd, len(batch))
			for i, k := range batch {
				cmds[i] = pipe.Unlink(ctx, k)
			}
			if all, err := pipe.Exec(ctx); err != nil {
				return cause(all, err)
			}
			var n int64
			for _, c := range cmds {
				n += c.Val()
			}
			t.add(pt.loc, n)
			batch = batch[:0]
			clear(seen)
			return nil
		}
		err := scan(ctx, node, pt.glob, "", func(keys []string) error {
			for _, k := range keys {
				// A key SCAN returns twice within a batch is unlinked once; across batches the
				// second UNLINK replies 0, so the count stays exact either way.
				if seen[k] || !pt.matches(k) {
					continue
				}
				seen[k] = true
				batch = append(batch, k)
				if len(batch) == unlinkBatch {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		return flush()
	})
}

// opError names the operation that failed without any identifier.
func opError(op string, err error) error { return fmt.Errorf("redisstore: %s: %w", op, err) }
