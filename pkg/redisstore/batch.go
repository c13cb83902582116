package redisstore

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

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
// Erase. Records families are scanned once per tenant of the batch: a key goes to the
// subject whose identifier its fields hold (the earliest in subjects when it names
// several), so each count stays its subject's own; a failed scan fails the subjects of
// that tenant.
func (r *Store) EraseBatch(ctx context.Context, st inventory.Entry, subjects []deletion.Subject) ([]deletion.Result, []error) {
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
	r.eraseRecordsBatch(ctx, subjects, plans, tallies, use, errs)
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

// eraseRecordsBatch erases the records of the subjects in use without an error, one scan
// of each records family per tenant, adding each key's UNLINK reply to its owner's tally.
// A failed scan sets the error of every subject of its tenant.
func (r *Store) eraseRecordsBatch(ctx context.Context, subjects []deletion.Subject, plans []plan, tallies []*tally, use []int, errs []error) {
	var tenants []string
	groups := map[string][]int{}
	for _, i := range use {
		if errs[i] != nil || len(plans[i].records) == 0 {
			continue
		}
		t := subjects[i].Tenant
		if _, ok := groups[t]; !ok {
			tenants = append(tenants, t)
		}
		groups[t] = append(groups[t], i)
	}
	for _, t := range tenants {
		group := groups[t]
		owners := map[string]int{}
		for _, i := range group {
			addOwner(owners, subjects[i], i)
		}
		if len(owners) == 0 {
			continue
		}
		p := plans[group[0]] // the records patterns depend on the tenant only
		for _, rp := range p.records {
			err := r.eraseRecords(ctx, rp, owners, false, func(owner int, n int64) { tallies[owner].add(rp.loc, n) })
			if err != nil {
				err = classify("scan and unlink "+p.locations[rp.loc], err)
				for _, i := range group {
					errs[i] = err
				}
				break
			}
		}
	}
}

// indexed is one key an index lists for a subject of the batch.
type indexed struct {
	key, index string
	owner, loc int
}

// indexSet is one index set of a subject of a batch, as one pipeline read it.
type indexSet struct {
	owner   int
	index   string
	members []string
	notSet  bool // the key holds another type (WRONGTYPE)
}

// readIndexSets reads the index sets of every subject in use in one pipeline. An index
// key that is not a set is returned with notSet; any other failure fails the read.
func (r *Store) readIndexSets(ctx context.Context, plans []plan, use []int) ([]indexSet, error) {
	pipe := r.client.Pipeline()
	var sets []indexSet
	var cmds []*redis.StringSliceCmd
	for _, i := range use {
		for _, idx := range plans[i].indexes {
			sets = append(sets, indexSet{owner: i, index: idx})
			cmds = append(cmds, pipe.SMembers(ctx, idx))
		}
	}
	if len(cmds) == 0 {
		return nil, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		for _, c := range cmds {
			if e := c.Err(); e != nil && !isWrongType(e) {
				return nil, classify("read index", e)
			}
		}
	}
	for j, c := range cmds {
		sets[j].members, sets[j].notSet = c.Val(), c.Err() != nil
	}
	return sets, nil
}

// eraseIndexedBatch reads the index sets of every subject in use in one pipeline and
// unlinks the members their plans cover, in pipelines of unlinkBatch keys, removing them
// from their index sets. Index keys that are not sets are left alone (Verify reports them).
func (r *Store) eraseIndexedBatch(ctx context.Context, plans []plan, tallies []*tally, use []int) error {
	sets, err := r.readIndexSets(ctx, plans, use)
	if err != nil {
		return err
	}
	var keys []indexed
	for _, set := range sets {
		for _, m := range set.members {
			if loc := plans[set.owner].match(m); loc >= 0 {
				keys = append(keys, indexed{m, set.index, set.owner, loc})
			}
		}
	}
	return r.pipelined(ctx, keys, "unlink indexed keys", func(pipe redis.Pipeliner, k indexed) *redis.IntCmd {
		unlink := pipe.Unlink(ctx, k.key)
		pipe.SRem(ctx, k.index, k.key)
		return unlink
	}, func(k indexed, n int64) { tallies[k.owner].add(k.loc, n) })
}

// VerifyBatch verifies each subject as Verify does. The subjects st serves index_only
// share one pipeline that reads every index set of the batch; the others, and every
// subject of a store with records families, are verified one by one with Verify.
func (r *Store) VerifyBatch(ctx context.Context, st inventory.Entry, subjects []deletion.Subject) ([]event.Verification, []error) {
	vs := make([]event.Verification, len(subjects))
	errs := make([]error, len(subjects))
	plans, use, sets := r.indexOnlyBatch(ctx, st, subjects, errs, func(i int) { vs[i], errs[i] = r.Verify(ctx, st, subjects[i]) })
	found := make(map[int]map[string]struct{}, len(use))
	notSets := map[int]int{}
	for _, set := range sets {
		if set.notSet {
			notSets[set.owner]++
			continue
		}
		for _, m := range set.members {
			if plans[set.owner].match(m) >= 0 {
				if found[set.owner] == nil {
					found[set.owner] = map[string]struct{}{}
				}
				found[set.owner][m] = struct{}{}
			}
		}
	}
	down := r.downShards(nil)
	for _, i := range use {
		vs[i] = verification(VerifyIndexMethod, plans[i], len(found[i]), notSets[i], true, down)
	}
	return vs, errs
}

var _ deletion.BatchCounter = (*Store)(nil)

// CountBatch counts what Count counts for each subject. The subjects st serves index_only
// share two pipelines, one reading every index set of the batch and one checking which of
// the listed keys exist; the others, and every subject of a store with records families,
// are counted one by one with Count.
func (r *Store) CountBatch(ctx context.Context, st inventory.Entry, subjects []deletion.Subject) ([][]event.LocationCount, []error) {
	out := make([][]event.LocationCount, len(subjects))
	errs := make([]error, len(subjects))
	plans, use, sets := r.indexOnlyBatch(ctx, st, subjects, errs, func(i int) { out[i], errs[i] = r.Count(ctx, st, subjects[i]) })
	found := make(map[int]map[string]int, len(use)) // subject -> listed key -> location
	for _, set := range sets {
		for _, m := range set.members {
			if loc := plans[set.owner].match(m); loc >= 0 {
				if found[set.owner] == nil {
					found[set.owner] = map[string]int{}
				}
				found[set.owner][m] = loc
			}
		}
	}
	var keys []indexed
	for _, i := range use {
		for k, loc := range found[i] {
			keys = append(keys, indexed{key: k, owner: i, loc: loc})
		}
	}
	n := make(map[int][]int64, len(use))
	for _, i := range use {
		n[i] = make([]int64, len(plans[i].locations))
	}
	if err := r.countExisting(ctx, keys, func(k indexed, exists int64) { n[k.owner][k.loc] += exists }); err != nil {
		for _, i := range use {
			errs[i] = err
		}
		return out, errs
	}
	for _, i := range use {
		out[i] = locationCounts(plans[i], n[i])
	}
	return out, errs
}

// indexOnlyBatch reads, in one pipeline, the index sets of the subjects st serves
// index_only, and returns their plans (at their indexes in subjects), those indexes and
// the sets read. Every other subject, and every subject when st has records families, is
// handed to one (up to batchOthers at a time), its outcome its own. A subject the
// templates cannot serve, and every subject in use when the read fails, gets its error in
// errs and is left out of use.
func (r *Store) indexOnlyBatch(ctx context.Context, st inventory.Entry, subjects []deletion.Subject, errs []error, one func(i int)) ([]plan, []int, []indexSet) {
	plans := make([]plan, len(subjects))
	var use []int
	var others errgroup.Group
	others.SetLimit(batchOthers)
	defer func() { _ = others.Wait() }() // every outcome is one's to record
	records := hasRecords(st)
	for i, s := range subjects {
		if !indexOnly(st, s) || records {
			others.Go(func() error { one(i); return nil })
			continue
		}
		p, err := newPlan(st, s)
		if err != nil {
			errs[i] = err
			continue
		}
		plans[i] = p
		use = append(use, i)
	}
	if len(use) == 0 {
		return plans, nil, nil
	}
	sets, err := r.readIndexSets(ctx, plans, use)
	if err != nil {
		for _, i := range use {
			errs[i] = err
		}
		return plans, nil, nil
	}
	return plans, use, sets
}

// batchOthers bounds the subjects of a batch found or verified one by one at a time.
const batchOthers = 16

// countExisting checks which of keys exist and calls add with each key and 1 when it
// does, 0 when it does not.
func (r *Store) countExisting(ctx context.Context, keys []indexed, add func(k indexed, exists int64)) error {
	return r.pipelined(ctx, keys, "count keys", func(pipe redis.Pipeliner, k indexed) *redis.IntCmd {
		return pipe.Exists(ctx, k.key)
	}, add)
}

// pipelined sends, in pipelines of unlinkBatch keys, the commands queue adds for each key,
// and calls add with each key and the value of the command queue returned for it. A failed
// pipeline stops there and returns its error, classified as what.
func (r *Store) pipelined(ctx context.Context, keys []indexed, what string, queue func(redis.Pipeliner, indexed) *redis.IntCmd, add func(indexed, int64)) error {
	for len(keys) > 0 {
		n := min(len(keys), unlinkBatch)
		pipe := r.client.Pipeline()
		cmds := make([]*redis.IntCmd, n)
		for j, k := range keys[:n] {
			cmds[j] = queue(pipe, k)
		}
		if all, err := pipe.Exec(ctx); err != nil {
			return classify(what, cause(all, err))
		}
		for j, c := range cmds {
			add(keys[j], c.Val())
		}
		keys = keys[n:]
	}
	return nil
}
