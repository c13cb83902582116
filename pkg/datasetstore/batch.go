package datasetstore

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

var _ deletion.BatchStore = (*Store)(nil)

// batchHits makes a matcher match the rows of many subjects and attributes each matched
// row to one of them. Every format's filter stops at the first field of a row that
// matches, so each matched row is one hit: the hit goes to the subject whose id or
// session that field holds (the first subject of the batch that has it, when several do).
// begin forgets the hits of the object or version about to be read; keep adds them to
// their subjects' counts once the read (and its rewrite or version delete) succeeded.
type batchHits struct {
	ids, sessions map[string]int // value -> subject index
	row           []int64        // hits since begin, per subject
	current, old  []int64        // kept: rows removed from current objects, versions deleted
}

func newBatchHits(subjects []deletion.Subject, use []int) *batchHits {
	n := len(subjects)
	b := &batchHits{ids: map[string]int{}, sessions: map[string]int{}, row: make([]int64, n), current: make([]int64, n), old: make([]int64, n)}
	for _, i := range use {
		s := subjects[i]
		if _, dup := b.ids[s.ID]; s.ID != "" && !dup {
			b.ids[s.ID] = i
		}
		for _, ses := range s.Sessions {
			if _, dup := b.sessions[ses]; ses != "" && !dup {
				b.sessions[ses] = i
			}
		}
	}
	return b
}

func (b *batchHits) hit(owners map[string]int, v string) bool {
	i, ok := owners[v]
	if ok && v != "" {
		b.row[i]++
	}
	return ok && v != ""
}

func (b *batchHits) empty(m *matcher) bool {
	return (len(b.ids) == 0 || len(m.subjectCols) == 0) && (len(b.sessions) == 0 || len(m.sessionCols) == 0)
}

// begin forgets the hits not kept (a no-op for a matcher of one subject).
func (m *matcher) begin() {
	if m.batch != nil {
		clear(m.batch.row)
	}
}

// keep adds the hits since begin to their subjects: as rows removed, or, for a version,
// as one version deleted for each subject it held.
func (m *matcher) keep(version bool) {
	if m.batch == nil {
		return
	}
	for i, n := range m.batch.row {
		switch {
		case n == 0:
		case version:
			m.batch.old[i]++
		default:
			m.batch.current[i] += n
		}
	}
	clear(m.batch.row)
}

// EraseBatch erases subjects from the datasets of st reading and rewriting each object,
// and each older version, once for the whole batch: every row of any of the subjects is
// removed in the same rewrite, and each subject is told the rows and versions that held
// its own data. Subjects whose prefixes differ (another tenant, a prefix naming the
// subject's pseudonym) form separate groups; a subject the store refuses (no identifier)
// fails alone; an error reading or writing fails its whole group, which the runtime
// retries (erasing is idempotent). A row holding the identifiers of two subjects of the
// batch is counted for the first of them only. Tenant-scope subjects, and every subject of
// a store whose mention policy redacts or erases, go through Erase.
func (s *Store) EraseBatch(ctx context.Context, st inventory.Store, subjects []deletion.Subject) ([]deletion.Result, []error) {
	results := make([]deletion.Result, len(subjects))
	errs := make([]error, len(subjects))
	l, err := LocatorsOf(st)
	if err == nil && l.Mentions != "" && l.Mentions != MentionsFail {
		// Redacting or erasing mentions is per subject: each subject goes through Erase.
		for i, subj := range subjects {
			results[i], errs[i] = s.Erase(ctx, st, subj)
		}
		return results, errs
	}
	groups := map[string][]int{}
	var order []string
	locsOf := map[string][]location{}
	for i, subj := range subjects {
		if err != nil {
			errs[i] = err
			continue
		}
		if subj.TenantScope() {
			results[i], errs[i] = s.Erase(ctx, st, subj)
			continue
		}
		if _, errs[i] = matcherFor(st, subj); errs[i] != nil {
			continue
		}
		locs, err := s.locations(st, subj)
		if err != nil {
			errs[i] = err
			continue
		}
		names := make([]string, len(locs))
		for j, loc := range locs {
			names[j] = loc.name
		}
		k := strings.Join(names, "\x00")
		if _, ok := groups[k]; !ok {
			order = append(order, k)
			locsOf[k] = locs
		}
		groups[k] = append(groups[k], i)
	}
	// Groups have disjoint subjects and their own locations (another tenant, another
	// prefix), so they run side by side (a rewrite of one object still takes its lock): a
	// batch of many tenants' subjects takes about as long as its slowest tenant's, not the
	// sum of them.
	var g errgroup.Group
	g.SetLimit(batchGroupLimit)
	for _, k := range order {
		g.Go(func() error {
			s.eraseGroup(ctx, st, l, subjects, groups[k], locsOf[k], results, errs)
			return nil
		})
	}
	_ = g.Wait() // every outcome is in errs
	return results, errs
}

// batchGroupLimit bounds how many groups of one batch EraseBatch erases at a time.
const batchGroupLimit = 8

// eraseGroup erases the subjects use (indexes into subjects) from locs, one rewrite per
// object for all of them, and sets their results and errors.
func (s *Store) eraseGroup(ctx context.Context, st inventory.Store, l Locators, subjects []deletion.Subject, use []int, locs []location, results []deletion.Result, errs []error) {
	m := newMatcher(l.SubjectColumns, l.SessionColumns, "", nil)
	m.batch = newBatchHits(subjects, use)
	for _, loc := range locs {
		clear(m.batch.current)
		clear(m.batch.old)
		c, err := eraseRows(ctx, loc, m)
		for _, i := range use {
			if errs[i] != nil {
				continue
			}
			results[i].Locations = append(results[i].Locations, event.LocationCount{Location: loc.name, Deleted: m.batch.current[i]})
			if c.versioned {
				results[i].Locations = append(results[i].Locations, event.LocationCount{Location: loc.name + oldVersions, Deleted: m.batch.old[i]})
			}
			if err != nil {
				errs[i] = fmt.Errorf("dataset store %q: %w", st.Name, err)
			}
		}
		if err != nil {
			return
		}
	}
}

// VerifyBatch verifies each subject with Verify.
func (s *Store) VerifyBatch(ctx context.Context, st inventory.Store, subjects []deletion.Subject) ([]event.Verification, []error) {
	return deletion.VerifyEach(ctx, s, st, subjects)
}
