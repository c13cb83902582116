package qdrantstore

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/qdrant/go-client/qdrant"
)

var _ deletion.BatchStore = (*Store)(nil)

// EraseBatch erases subjects from st with one delete per collection: it counts each
// subject's points exactly, as Erase does, then deletes, with wait=true, the points
// passing the union of the subjects' filters. A subject whose filter is refused (no
// identifier to match) fails alone and is left out of the delete; a failed delete fails
// every subject whose points were in that collection. Tenant-scope subjects, and every
// subject of a store with semantic read-back, are erased one by one with Erase.
func (st *Store) EraseBatch(ctx context.Context, inv inventory.Store, subjects []deletion.Subject) ([]deletion.Result, []error) {
	results := make([]deletion.Result, len(subjects))
	errs := make([]error, len(subjects))
	l, err := LocatorsOf(inv)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return results, errs
	}
	type target struct {
		subjects []deletion.Subject
		owners   []int
		loc      string
	}
	// Each subject's points are counted exactly, as Erase counts them: the counts of the
	// batch's subjects run side by side (countLimit at a time), so the batch waits about
	// as long as its slowest count, not their sum.
	semantic := l.similar() != SimilarOff // its vectors are read before the delete, per subject
	filters := make([]*qdrant.Filter, len(subjects))
	var g errgroup.Group
	g.SetLimit(countLimit)
	for i, s := range subjects {
		if s.TenantScope() || semantic {
			results[i], errs[i] = st.Erase(ctx, inv, s)
			continue
		}
		if filters[i], errs[i] = subjectFilter(l, s); errs[i] != nil {
			continue
		}
		g.Go(func() error {
			for _, tmpl := range l.Collections {
				loc := location(tmpl, s.Tenant)
				var matched int64
				for _, coll := range collections(tmpl, s) {
					n, err := st.count(ctx, coll, filters[i])
					if err != nil {
						errs[i] = fmt.Errorf("qdrant: count %s: %w", loc, redact(err, coll, loc))
						return nil
					}
					matched += n
				}
				results[i].Locations = append(results[i].Locations, event.LocationCount{Location: loc, Deleted: matched})
			}
			return nil
		})
	}
	_ = g.Wait() // every outcome is in errs
	targets := map[string]*target{}
	var order []string
	for i, s := range subjects {
		if filters[i] == nil || errs[i] != nil {
			continue
		}
		for _, tmpl := range l.Collections {
			for _, coll := range collections(tmpl, s) {
				t := targets[coll]
				if t == nil {
					t = &target{loc: location(tmpl, s.Tenant)}
					targets[coll] = t
					order = append(order, coll)
				}
				t.subjects = append(t.subjects, s)
				t.owners = append(t.owners, i)
			}
		}
	}
	for _, coll := range order {
		t := targets[coll]
		f, err := filterOf(l, t.subjects)
		if err == nil {
			err = st.deletePoints(ctx, coll, f)
		}
		if err != nil && status.Code(err) != codes.NotFound {
			err = fmt.Errorf("qdrant: delete from %s: %w", t.loc, redact(classify(err), coll, t.loc))
			for _, i := range t.owners {
				if errs[i] == nil {
					errs[i] = err
				}
			}
		}
	}
	for i := range results {
		if errs[i] != nil {
			results[i] = deletion.Result{}
		}
	}
	return results, errs
}

// countLimit bounds the counts of one batch that run at a time.
const countLimit = 16

// VerifyBatch verifies each subject with Verify: the exact count is per subject.
func (st *Store) VerifyBatch(ctx context.Context, inv inventory.Store, subjects []deletion.Subject) ([]event.Verification, []error) {
	return deletion.VerifyEach(ctx, st, inv, subjects)
}
