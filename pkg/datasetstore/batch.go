package datasetstore

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
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
func (s *Store) EraseBatch(ctx context.Context, st inventory.Entry, subjects []deletion.Subject) ([]deletion.Result, []error) {
	results := make([]deletion.Result, len(subjects))
	errs := make([]error, len(subjects))
	l, err := LocatorsOf(st)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return results, errs
	}
	if perSubject(l) {
		for i, subj := range subjects {
			results[i], errs[i] = s.Erase(ctx, st, subj)
		}
		return results, errs
	}
	gs := s.batchGroups(st, subjects, errs, func(i int) { results[i], errs[i] = s.Erase(ctx, st, subjects[i]) })
	gs.each(func(use []int, locs []location) { s.eraseGroup(ctx, st, l, subjects, use, locs, results, errs) })
	return results, errs
}

// groups are the subjects of a batch sorted by their locations (another tenant, a prefix
// naming the subject's pseudonym): each group is read and rewritten together.
type groups struct {
	order  []string
	use    map[string][]int // indexes into the batch's subjects
	locsOf map[string][]location
}

// batchGroups sorts subjects into groups; a tenant-scope subject goes to single, and a
// subject the store refuses gets its error in errs.
func (s *Store) batchGroups(st inventory.Entry, subjects []deletion.Subject, errs []error, single func(i int)) groups {
	gs := groups{use: map[string][]int{}, locsOf: map[string][]location{}}
	for i, subj := range subjects {
		if errs[i] != nil {
			continue
		}
		if subj.TenantScope() {
			single(i)
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
		if _, ok := gs.use[k]; !ok {
			gs.order = append(gs.order, k)
			gs.locsOf[k] = locs
		}
		gs.use[k] = append(gs.use[k], i)
	}
	return gs
}

// each runs fn for every group. Groups have disjoint subjects and their own locations, so
// they run side by side (a rewrite of one object still takes its lock): a batch of many
// tenants' subjects takes about as long as its slowest tenant's, not the sum of them.
func (gs groups) each(fn func(use []int, locs []location)) {
	var g errgroup.Group
	g.SetLimit(batchGroupLimit)
	for _, k := range gs.order {
		g.Go(func() error {
			fn(gs.use[k], gs.locsOf[k])
			return nil
		})
	}
	_ = g.Wait() // every outcome is in the callers' slices
}

// perSubject reports whether l's erasures go one subject at a time: redacting or erasing
// mentions is per subject.
func perSubject(l Locators) bool { return l.Mentions != "" && l.Mentions != MentionsFail }

// batchGroupLimit bounds how many groups of one batch EraseBatch erases at a time.
const batchGroupLimit = 8

// eraseGroup erases the subjects use (indexes into subjects) from locs, one rewrite per
// object for all of them, and sets their results and errors.
func (s *Store) eraseGroup(ctx context.Context, st inventory.Entry, l Locators, subjects []deletion.Subject, use []int, locs []location, results []deletion.Result, errs []error) {
	runGroup(ctx, l, subjects, use, locs, eraseRows, func(i int, lcs []event.LocationCount, err error) {
		if errs[i] != nil {
			return
		}
		results[i].Locations = append(results[i].Locations, lcs...)
		if err != nil {
			errs[i] = fmt.Errorf("dataset store %q: %w", st.Name, err)
		}
	})
}

// runGroup runs pass (eraseRows, countMatched) over each location of one group with a matcher
// for the subjects use, and hands each subject its counts of the location and the pass's
// error; it stops after the first location that fails.
func runGroup(ctx context.Context, l Locators, subjects []deletion.Subject, use []int, locs []location,
	pass func(context.Context, location, *matcher) (counts, error), add func(i int, lcs []event.LocationCount, err error)) {
	m := newMatcher(l.SubjectColumns, l.SessionColumns, "", nil)
	m.batch = newBatchHits(subjects, use)
	for _, loc := range locs {
		clear(m.batch.current)
		clear(m.batch.old)
		c, err := pass(ctx, loc, m)
		for _, i := range use {
			add(i, c.of(loc.name, m.batch.current[i], m.batch.old[i]), err)
		}
		if err != nil {
			return
		}
	}
}

// VerifyBatch verifies each subject with Verify, the subjects sharing one listing of each
// location (listings).
func (s *Store) VerifyBatch(ctx context.Context, st inventory.Entry, subjects []deletion.Subject) ([]event.Verification, []error) {
	shared := &Store{s3: s.s3, dir: s.dir, sum: s.sum, listed: &listings{m: map[string]*listed{}}, lim: s.lim, names: s.names}
	return deletion.VerifyEach(ctx, shared, st, subjects)
}

// listings shares the listing of each location among the verifications of one batch:
// every subject of the batch was erased before the batch is verified, so one listing
// taken after the erasures serves them all, where each subject would otherwise list each
// location twice (rows and mentions).
type listings struct {
	mu sync.Mutex
	m  map[string]*listed // location name, NUL, prefix → its listing
}

type listed struct {
	once sync.Once
	ls   objectstore.Listing
	err  error
}

// of returns the listing of l, listing it on first use.
func (s *listings) of(ctx context.Context, l location) (objectstore.Listing, error) {
	s.mu.Lock()
	e := s.m[l.name+"\x00"+l.prefix]
	if e == nil {
		e = &listed{}
		s.m[l.name+"\x00"+l.prefix] = e
	}
	s.mu.Unlock()
	e.once.Do(func() { e.ls, e.err = list(ctx, l) })
	return e.ls, e.err
}
