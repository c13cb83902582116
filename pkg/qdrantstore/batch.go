package qdrantstore

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/qdrant/go-client/qdrant"
)

var _ deletion.BatchStore = (*Store)(nil)

// EraseBatch erases subjects from st with one delete per collection and tenant: it counts
// each subject's points exactly, as Erase does, then deletes, with wait=true, the points
// passing the union of the filters of that tenant's subjects. A subject whose filter is refused (no
// identifier to match) fails alone and is left out of the delete; a failed delete fails
// every subject whose points were in that collection. Tenant-scope subjects, and every
// subject of a store with semantic read-back, are erased one by one with Erase.
func (st *Store) EraseBatch(ctx context.Context, inv inventory.Entry, subjects []deletion.Subject) ([]deletion.Result, []error) {
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
		coll, tenant string
		subjects     []deletion.Subject
		owners       []int
		loc          string
	}
	// Each subject's points are counted exactly, as Erase counts them: the counts of the
	// batch's subjects run side by side (countLimit at a time), so the batch waits about
	// as long as its slowest count, not their sum.
	// Semantic read-back reads a subject's vectors before the delete, and mention handling
	// rewrites or deletes other points after it: both go subject by subject, through Erase.
	alone := l.similar() != SimilarOff || len(l.TextFields) > 0 && l.mentions() != MentionsFail
	filters := make([]*qdrant.Filter, len(subjects))
	var g errgroup.Group
	g.SetLimit(countLimit)
	for i, s := range subjects {
		if s.TenantScope() || alone {
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
				k := coll + "\x00" + s.Tenant
				t := targets[k]
				if t == nil {
					t = &target{coll: coll, tenant: s.Tenant, loc: location(tmpl, s.Tenant)}
					targets[k] = t
					order = append(order, k)
				}
				t.subjects = append(t.subjects, s)
				t.owners = append(t.owners, i)
			}
		}
	}
	for _, k := range order {
		t := targets[k]
		f, err := filterOf(l, t.tenant, t.subjects)
		if err == nil {
			err = st.deletePoints(ctx, t.coll, f)
		}
		if err != nil && status.Code(err) != codes.NotFound {
			err = fmt.Errorf("qdrant: delete from %s: %w", t.loc, redact(classify(err), t.coll, t.loc))
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

// VerifyBatch verifies each subject as Verify does. It first counts, exactly, the points
// of each collection that pass the union of the filters of its subjects of one tenant
// (and, with text fields, scrolls for mentions of any of their identifiers among that
// tenant's points): where the union finds nothing, each
// of its subjects finds nothing either, so a subject whose every collection found nothing
// is verified clean by these shared reads. Every other subject — one whose collection
// still holds something of the batch, a tenant-scope one, any subject of a store with
// semantic read-back — is verified with Verify, its exact count its own.
func (st *Store) VerifyBatch(ctx context.Context, inv inventory.Entry, subjects []deletion.Subject) ([]event.Verification, []error) {
	vs := make([]event.Verification, len(subjects))
	errs := make([]error, len(subjects))
	l, err := LocatorsOf(inv)
	if err != nil || l.similar() != SimilarOff || len(subjects) < 2 {
		return deletion.VerifyEach(ctx, st, inv, subjects)
	}
	type group struct {
		coll, tenant string
		subjects     []deletion.Subject
		owners       []int
	}
	groups := map[string]*group{}
	var order []string
	shared := make([]bool, len(subjects)) // verified by the shared reads unless a read finds something
	for i, s := range subjects {
		if s.TenantScope() {
			continue
		}
		if _, err := subjectFilter(l, s); err != nil || len(unsearchable(l, s)) > 0 {
			continue
		}
		shared[i] = true
		for _, tmpl := range l.Collections {
			for _, coll := range collections(tmpl, s) {
				k := coll + "\x00" + s.Tenant
				g := groups[k]
				if g == nil {
					g = &group{coll: coll, tenant: s.Tenant}
					groups[k] = g
					order = append(order, k)
				}
				g.subjects = append(g.subjects, s)
				g.owners = append(g.owners, i)
			}
		}
	}
	var mu sync.Mutex
	var reads errgroup.Group
	reads.SetLimit(countLimit)
	for _, k := range order {
		g := groups[k]
		reads.Go(func() error {
			if !st.noneOf(ctx, l, g.coll, g.tenant, g.subjects) {
				mu.Lock()
				for _, i := range g.owners {
					shared[i] = false
				}
				mu.Unlock()
			}
			return nil
		})
	}
	_ = reads.Wait()
	method := MethodSubject
	if len(l.TextFields) > 0 {
		method += MethodMentions
	}
	var each errgroup.Group
	each.SetLimit(countLimit)
	for i, s := range subjects {
		if shared[i] {
			vs[i] = event.Verification{Method: method}
			continue
		}
		each.Go(func() error {
			vs[i], errs[i] = st.Verify(ctx, inv, s)
			return nil
		})
	}
	_ = each.Wait() // every outcome is in errs
	return vs, errs
}

// noneOf reports whether coll holds no point of any of subjects, all of tenant, by the
// exact count of the union of their filters and, with text fields, no mention of any of
// their identifiers. A failed read reports false: the subjects are then verified one by
// one.
func (st *Store) noneOf(ctx context.Context, l Locators, coll, tenant string, subjects []deletion.Subject) bool {
	f, err := filterOf(l, tenant, subjects)
	if err != nil {
		return false
	}
	if n, err := st.count(ctx, coll, f); err != nil || n != 0 {
		return false
	}
	var ids []string
	for _, s := range subjects {
		ids = append(ids, identifiers(s)...)
	}
	m, err := st.mentioning(ctx, l, coll, tenant, ids)
	return err == nil && len(m) == 0
}
