package redisstore

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

var _ deletion.BatchStore = (*Store)(nil)

// EraseBatch erases subjects from st with pipelines shared by the whole batch: one round
// trip reads every subject's index sets, and the indexed keys of all subjects are
// unlinked (and removed from their index) in pipelined batches of unlinkBatch keys. Keys
// outside the index are then found, unless st is index_only, by each subject's own SCAN,
// as Erase does. Each result counts its subject's keys per key template. A subject the
// templates cannot serve fails alone; a failed round trip fails every subject of the
// batch (the runtime retries; unlinking is idempotent). Tenant-scope subjects go through
// Erase.
func (r *Store) EraseBatch(ctx context.Context, st inventory.Store, subjects []deletion.Subject) ([]deletion.Result, []error) {
	results := make([]deletion.Result, len(subjects))
	errs := make([]error, len(subjects))
	plans := make([]plan, len(subjects))
	tallies := make([]*tally, len(subjects))
	var use []int
	for i, s := range subjects {
		if s.TenantScope() {
			results[i], errs[i] = r.Erase(ctx, st, s)
			continue
		}
		p, err := newPlan(st, s)
		if err != nil {
			errs[i] = err
			continue
		}
		plans[i], tallies[i] = p, &tally{n: make([]int64, len(p.locations))}
		use = append(use, i)
	}
	failAll := func(err error) ([]deletion.Result, []error) {
		for _, i := range use {
			results[i], errs[i] = deletion.Result{}, err
		}
		return results, errs
	}
	if err := r.eraseIndexedBatch(ctx, plans, tallies, use); err != nil {
		return failAll(err)
	}
	for _, i := range use {
		if indexOnly(st, subjects[i]) {
			continue
		}
		for _, pt := range plans[i].patterns {
			if _, err := r.scanDelete(ctx, plans[i], pt, tallies[i]); err != nil {
				errs[i] = classify("scan and unlink "+plans[i].locations[pt.loc], err)
				break
			}
		}
	}
	for _, i := range use {
		if errs[i] != nil {
			continue
		}
		res := deletion.Result{Locations: make([]event.LocationCount, len(plans[i].locations))}
		for j, loc := range plans[i].locations {
			res.Locations[j] = event.LocationCount{Location: loc, Deleted: tallies[i].n[j]}
		}
		results[i] = res
	}
	return results, errs
}

// indexed is one key an index lists for a subject of the batch.
type indexed struct {
	key, index string
	owner, loc int
}

// eraseIndexedBatch reads the index sets of every subject in use in one pipeline and
// unlinks the members their plans cover, in pipelines of unlinkBatch keys, removing them
// from their index sets. Index keys that are not sets are left alone (Verify reports them).
func (r *Store) eraseIndexedBatch(ctx context.Context, plans []plan, tallies []*tally, use []int) error {
	pipe := r.client.Pipeline()
	type read struct {
		owner int
		index string
		cmd   *redis.StringSliceCmd
	}
	var reads []read
	for _, i := range use {
		for _, idx := range plans[i].indexes {
			reads = append(reads, read{i, idx, pipe.SMembers(ctx, idx)})
		}
	}
	if len(reads) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		for _, rd := range reads {
			if e := rd.cmd.Err(); e != nil && !isWrongType(e) {
				return classify("read index", e)
			}
		}
	}
	var keys []indexed
	for _, rd := range reads {
		if rd.cmd.Err() != nil {
			continue // not a set
		}
		for _, m := range rd.cmd.Val() {
			if loc := plans[rd.owner].match(m); loc >= 0 {
				keys = append(keys, indexed{m, rd.index, rd.owner, loc})
			}
		}
	}
	for len(keys) > 0 {
		n := min(len(keys), unlinkBatch)
		pipe := r.client.Pipeline()
		cmds := make([]*redis.IntCmd, n)
		for j, k := range keys[:n] {
			cmds[j] = pipe.Unlink(ctx, k.key)
			pipe.SRem(ctx, k.index, k.key)
		}
		if all, err := pipe.Exec(ctx); err != nil {
			return classify("unlink indexed keys", cause(all, err))
		}
		for j, c := range cmds {
			tallies[keys[j].owner].add(keys[j].loc, c.Val())
		}
		keys = keys[n:]
	}
	return nil
}

// VerifyBatch verifies each subject with Verify.
func (r *Store) VerifyBatch(ctx context.Context, st inventory.Store, subjects []deletion.Subject) ([]event.Verification, []error) {
	return deletion.VerifyEach(ctx, r, st, subjects)
}
