// Package deletiontest is the conformance suite every deletion.Store passes.
//
// The suite seeds data for several subjects through the fixture (which writes to the real
// store directly, not through the Store under test), erases some of them and checks, again
// through the fixture's own read path, that exactly the erased subjects' data is gone, that
// the counts and the verification are truthful and that erasing is idempotent. Its subject
// pairs include glob metacharacters, key delimiters, prefixes, case and Unicode variants,
// fixed ones (HostilePairs) and random ones drawn from HostileAlphabet (RandomPairs). It
// also erases a whole tenant, erases many subjects at once, calls the store with a
// cancelled context, and checks how errors are classified: a backend that is down gives a
// transient error, an item the store cannot process a permanent one (or an unexamined
// report). What a store cannot be put through (it has no remote backend, no item it could
// fail on, no tenant scope) its fixture says explicitly, with the reason. CrossTenant runs
// erasures of one tenant over a backend tenants share.
package deletiontest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Fixture binds the suite to one store implementation over one real backend.
type Fixture struct {
	Impl  deletion.Store
	Store inventory.Entry // the inventory entry under test
	// Seed writes data of s (n items of each sort the store holds, legacy session-only
	// items included when s has sessions) and returns how many items an erasure of s must
	// remove. Stores that hold no personal data by design return 0.
	Seed func(t *testing.T, s deletion.Subject, n int) int
	// Count counts, without Impl, the items of s that an erasure must remove and that are
	// still present.
	Count func(t *testing.T, s deletion.Subject) int
	// Taint, when set, writes one item of s that the store must never hold (for stores with
	// no personal data by design): Verify must then report it.
	Taint func(t *testing.T, s deletion.Subject)
	// Unreadable, when set, writes one item under the store's locators for s that the
	// store cannot read (a key of the wrong type, an event that does not decode): Verify
	// must then report it as unexamined, or fail, and never call the store clean. Stores
	// that cannot hold such an item leave it nil.
	Unreadable func(t testing.TB, s deletion.Subject)

	// Down returns a Store like Impl, over the same inventory entry, whose backend cannot
	// be reached (a client of a closed port, a stopped server). Its Erase and Verify must
	// fail with an error that is not permanent, so that the runtime retries, and that names
	// no raw identifier (Erase may succeed for a store that erases nothing by design). A store with no remote backend leaves Down nil and says why in
	// NoDown.
	Down   func(t *testing.T) deletion.Store
	NoDown string
	// Malformed writes one item under the store's locators for s that the store cannot
	// process. Erase and Verify of s must then fail with a permanent error (retrying cannot
	// fix it) or report the item unexamined: never a transient error, which would retry
	// forever, and never clean. When Malformed is nil the suite uses Unreadable; a store
	// that can hold no such item leaves both nil and says why in NoMalformed.
	Malformed   func(t testing.TB, s deletion.Subject)
	NoMalformed string
	// NoTenantScope, when set, says why the store refuses tenant-scope erasure of this
	// inventory entry; the suite then expects a permanent error that deletes nothing.
	NoTenantScope string
}

// HostilePairs are (erased, bystander) subject ids where a careless pattern or filter built
// from the first would also match the second.
var HostilePairs = [][2]string{
	{"a", "ab"},
	{"ab", "a"},
	{"a*", "ab"},
	{"*", "anyone"},
	{"a?", "ab"},
	{"[ab]", "a"},
	{"a]", "a"},
	{`a\`, `a\b`},
	{`\*`, "x"},
	{"x:y", "x"},
	{"x", "x:y"},
	{"bob", "BOB"},
	{"zoe\u0301", "zo\u00e9"}, // NFD vs NFC: different ids, different data
	{"a b", "a"},
	{"%", "a%"},
	{"a,b", "a"},
	{`a"b`, "a"},
	{"a.*", "a.b"},
}

// Key is the pseudonym key of the suite's subjects.
var Key, _ = subject.NewKey("test", []byte("conformance-suite-key-0123456789abcdef"))

// NewSubject returns a subject of tenant with id, its pseudonym under Key and one session
// derived from the id.
func NewSubject(tenant, id string) deletion.Subject {
	return deletion.Subject{Tenant: tenant, ID: id, Hash: Key.Pseudonym(tenant, id), Sessions: []string{"sess-" + id}, Scope: event.ScopeSubject}
}

// Run runs the suite. newFixture returns a fixture over an empty store.
func Run(t *testing.T, newFixture func(t *testing.T) Fixture) {
	ctx := context.Background()
	t.Run("ErasesOnlyTheSubject", func(t *testing.T) {
		f := newFixture(t)
		victim, bystander := NewSubject("acme", "cust-1"), NewSubject("acme", "cust-2")
		other := NewSubject("globex", "cust-1") // same id, other tenant
		want := f.Seed(t, victim, 3)
		keepB, keepO := f.Seed(t, bystander, 3), f.Seed(t, other, 3)

		v, err := f.Impl.Verify(ctx, f.Store, victim)
		if err != nil {
			t.Fatalf("Verify before erase: %v", err)
		}
		if f.Taint == nil && v.Remaining != int64(want) {
			t.Errorf("Verify before erase: remaining %d, seeded %d", v.Remaining, want)
		}
		res, err := f.Impl.Erase(ctx, f.Store, victim)
		if err != nil {
			t.Fatalf("Erase: %v", err)
		}
		if res.Deleted() != int64(want) {
			t.Errorf("Erase reported %d deleted, seeded %d", res.Deleted(), want)
		}
		checkGone(t, f, victim)
		if got := f.Count(t, bystander); got != keepB {
			t.Errorf("bystander in the same tenant: %d items left of %d", got, keepB)
		}
		if got := f.Count(t, other); got != keepO {
			t.Errorf("same id in another tenant: %d items left of %d", got, keepO)
		}
		for _, l := range res.Locations {
			if containsID(l.Location, victim) {
				t.Errorf("location %q holds a raw identifier", l.Location)
			}
		}
	})

	if isCounter(newFixture(t).Impl) {
		t.Run("CountIsWhatEraseDeletes", func(t *testing.T) { checkCount(t, newFixture(t)) })
	}

	if _, ok := newFixture(t).Impl.(deletion.BatchStore); ok {
		t.Run("BatchErasesEachSubjectExactly", func(t *testing.T) { checkBatch(t, newFixture(t)) })
	}

	t.Run("Idempotent", func(t *testing.T) {
		f := newFixture(t)
		s := NewSubject("acme", "cust-3")
		f.Seed(t, s, 2)
		if _, err := f.Impl.Erase(ctx, f.Store, s); err != nil {
			t.Fatal(err)
		}
		res, err := f.Impl.Erase(ctx, f.Store, s)
		if err != nil {
			t.Fatalf("second Erase: %v", err)
		}
		if res.Deleted() != 0 {
			t.Errorf("second Erase reported %d deleted", res.Deleted())
		}
		checkGone(t, f, s)
	})

	t.Run("NothingFound", func(t *testing.T) {
		f := newFixture(t)
		keep := NewSubject("acme", "present")
		n := f.Seed(t, keep, 2)
		ghost := NewSubject("acme", "never-seen")
		res, err := f.Impl.Erase(ctx, f.Store, ghost)
		if err != nil {
			t.Fatal(err)
		}
		if res.Deleted() != 0 {
			t.Errorf("erasing an unknown subject deleted %d", res.Deleted())
		}
		checkGone(t, f, ghost)
		if got := f.Count(t, keep); got != n {
			t.Errorf("bystander: %d items left of %d", got, n)
		}
	})

	t.Run("HostileIdentifiers", func(t *testing.T) {
		for _, p := range HostilePairs {
			t.Run(fmt.Sprintf("%q_vs_%q", p[0], p[1]), func(t *testing.T) {
				f := newFixture(t)
				victim, bystander := NewSubject("acme", p[0]), NewSubject("acme", p[1])
				want := f.Seed(t, victim, 2)
				keep := f.Seed(t, bystander, 2)
				res, err := f.Impl.Erase(ctx, f.Store, victim)
				if err != nil {
					t.Fatalf("Erase: %v", err)
				}
				if res.Deleted() != int64(want) {
					t.Errorf("deleted %d, seeded %d", res.Deleted(), want)
				}
				checkGone(t, f, victim)
				if got := f.Count(t, bystander); got != keep {
					t.Errorf("bystander %q: %d items left of %d", p[1], got, keep)
				}
			})
		}
	})

	t.Run("RandomHostilePairs", func(t *testing.T) {
		seed, n := propertyParams(t)
		t.Logf("seed %d, %d pairs (replay with LETHE_PROPERTY_SEED=%d LETHE_PROPERTY_N=%d)", seed, n, seed, n)
		for k, p := range RandomPairs(seed, n) {
			t.Run(fmt.Sprintf("%02d_%+q_vs_%+q", k, p[0], p[1]), func(t *testing.T) {
				f := newFixture(t)
				victim, bystander := NewSubject("acme", p[0]), NewSubject("acme", p[1])
				want := f.Seed(t, victim, 2)
				keep := f.Seed(t, bystander, 2)
				if got := f.Count(t, bystander); got != keep {
					t.Fatalf("seed %d pair %d: bystander %+q holds %d items after seeding, seeded %d", seed, k, p[1], got, keep)
				}
				res, err := f.Impl.Erase(ctx, f.Store, victim)
				if err != nil {
					t.Fatalf("seed %d pair %d: Erase %+q: %v", seed, k, p[0], err)
				}
				if res.Deleted() != int64(want) {
					t.Errorf("seed %d pair %d: erasing %+q deleted %d, seeded %d", seed, k, p[0], res.Deleted(), want)
				}
				checkGone(t, f, victim)
				if got := f.Count(t, bystander); got != keep {
					t.Errorf("seed %d pair %d: erasing %+q left bystander %+q with %d items of %d", seed, k, p[0], p[1], got, keep)
				}
			})
		}
	})

	if f := newFixture(t); f.Unreadable != nil {
		t.Run("UnreadableIsNotClean", func(t *testing.T) { checkUnreadable(t, newFixture(t)) })
	}

	t.Run("TenantScope", func(t *testing.T) { checkTenantScope(t, newFixture(t)) })
	t.Run("ConcurrentSubjects", func(t *testing.T) { checkConcurrent(t, newFixture(t)) })
	t.Run("CancelledContext", func(t *testing.T) { checkCancelled(t, newFixture(t)) })
	t.Run("BackendDown", func(t *testing.T) { checkDown(t, newFixture(t)) })
	t.Run("MalformedIsPermanent", func(t *testing.T) { checkMalformed(t, newFixture(t)) })

	if f := newFixture(t); f.Taint != nil {
		t.Run("VerifyReportsTaint", func(t *testing.T) {
			f := newFixture(t)
			s := NewSubject("acme", "tainted")
			f.Seed(t, s, 2)
			f.Taint(t, s)
			v, err := f.Impl.Verify(ctx, f.Store, s)
			if err != nil {
				t.Fatal(err)
			}
			if v.Remaining == 0 {
				t.Error("Verify missed an item that must not be there")
			}
			clean := NewSubject("acme", "clean")
			f.Seed(t, clean, 2)
			if v, err := f.Impl.Verify(ctx, f.Store, clean); err != nil || v.Remaining != 0 {
				t.Errorf("Verify of a clean subject = %+v, %v", v, err)
			}
		})
	}
}

// checkTenantScope erases the whole tenant acme: both of its subjects are gone, the same id
// in another tenant keeps everything, and Verify of the tenant is clean.
// checkCount checks a deletion.Counter: before the erase it counts what was seeded and,
// location by location, what Erase then reports deleted; it changes nothing of the subject
// nor of a bystander; after the erase it counts zero.
func checkCount(t *testing.T, f Fixture) {
	ctx := context.Background()
	victim, bystander := NewSubject("acme", "a"), NewSubject("acme", "ab")
	want := f.Seed(t, victim, 3)
	keep := f.Seed(t, bystander, 2)
	counter := f.Impl.(deletion.Counter)
	found, err := counter.Count(ctx, f.Store, victim)
	if err != nil {
		t.Fatalf("Count: %v", err)
	}
	if n := deletion.Total(found); n != int64(want) {
		t.Errorf("Count says %d would be deleted, seeded %d", n, want)
	}
	if got := f.Count(t, victim); got != want {
		t.Fatalf("Count changed the store: %d items of %d left", got, want)
	}
	if got := f.Count(t, bystander); got != keep {
		t.Errorf("bystander after Count: %d items left of %d", got, keep)
	}
	res, err := f.Impl.Erase(ctx, f.Store, victim)
	if err != nil {
		t.Fatalf("Erase: %v", err)
	}
	if got, want := nonZero(found), nonZero(res.Locations); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Count counted %v, Erase deleted %v", got, want)
	}
	again, err := counter.Count(ctx, f.Store, victim)
	if err != nil {
		t.Fatalf("Count after erase: %v", err)
	}
	if n := nonZero(again); len(n) != 0 {
		t.Errorf("Count after erase counted %v", n)
	}
	if got := f.Count(t, bystander); got != keep {
		t.Errorf("bystander: %d items left of %d", got, keep)
	}
}

// checkBatch checks a deletion.BatchStore: one batch of subjects with hostile ids (and one
// with no data) erases exactly theirs, counts each subject's own items, leaves the
// bystanders, and VerifyBatch then finds each clean.
func checkBatch(t *testing.T, f Fixture) {
	ctx := context.Background()
	bs := f.Impl.(deletion.BatchStore)
	var batch []deletion.Subject
	var want []int
	for _, id := range []string{"a*", "x:y", "[ab]", `a\`, "zoe\u0301"} {
		s := NewSubject("acme", id)
		batch = append(batch, s)
		want = append(want, f.Seed(t, s, 2+len(batch)%2))
	}
	batch = append(batch, NewSubject("acme", "never-seen"))
	want = append(want, 0)
	keep := map[string]int{}
	for _, id := range []string{"ab", "x", "a", `a\b`, "zo\u00e9"} {
		keep[id] = f.Seed(t, NewSubject("acme", id), 2)
	}
	checkBatchReads(t, f, batch, want)
	res, errs := bs.EraseBatch(ctx, f.Store, batch)
	if len(res) != len(batch) || len(errs) != len(batch) {
		t.Fatalf("EraseBatch of %d subjects returned %d results and %d errors", len(batch), len(res), len(errs))
	}
	for i, s := range batch {
		if errs[i] != nil {
			t.Errorf("subject %d: EraseBatch: %v", i, errs[i])
			continue
		}
		if res[i].Deleted() != int64(want[i]) {
			t.Errorf("subject %d: EraseBatch reported %d deleted, seeded %d", i, res[i].Deleted(), want[i])
		}
		checkGone(t, f, s)
	}
	vs, errs := bs.VerifyBatch(ctx, f.Store, batch)
	if len(vs) != len(batch) || len(errs) != len(batch) {
		t.Fatalf("VerifyBatch of %d subjects returned %d verifications and %d errors", len(batch), len(vs), len(errs))
	}
	for i := range batch {
		if errs[i] != nil || !vs[i].Clean() {
			t.Errorf("subject %d: VerifyBatch %+v, %v", i, vs[i], errs[i])
		}
	}
	checkBatchReads(t, f, batch, make([]int, len(batch)))
	for id, n := range keep {
		if got := f.Count(t, NewSubject("acme", id)); got != n {
			t.Errorf("bystander %q: %d items left of %d", id, got, n)
		}
	}
}

// checkBatchReads checks that VerifyBatch reports for each subject of batch what Verify
// reports for it alone (a subject with want[i] items seeded
// is not clean), and, for a deletion.BatchCounter, that CountBatch counts what Count counts.
func checkBatchReads(t *testing.T, f Fixture, batch []deletion.Subject, want []int) {
	t.Helper()
	ctx := context.Background()
	vs, errs := f.Impl.(deletion.BatchStore).VerifyBatch(ctx, f.Store, batch)
	if len(vs) != len(batch) || len(errs) != len(batch) {
		t.Fatalf("VerifyBatch of %d subjects returned %d verifications and %d errors", len(batch), len(vs), len(errs))
	}
	for i, s := range batch {
		one, err := f.Impl.Verify(ctx, f.Store, s)
		if errs[i] != nil || err != nil {
			t.Errorf("subject %d: VerifyBatch: %v; Verify: %v", i, errs[i], err)
			continue
		}
		if vs[i].Remaining != one.Remaining || vs[i].Unexamined != one.Unexamined || vs[i].Method != one.Method {
			t.Errorf("subject %d: VerifyBatch %+v, Verify alone %+v", i, vs[i], one)
		}
		if want[i] > 0 && vs[i].Clean() {
			t.Errorf("subject %d: VerifyBatch says clean with %d items seeded: %+v", i, want[i], vs[i])
		}
	}
	bc, ok := f.Impl.(deletion.BatchCounter)
	if !ok {
		return
	}
	found, errs := bc.CountBatch(ctx, f.Store, batch)
	if len(found) != len(batch) || len(errs) != len(batch) {
		t.Fatalf("CountBatch of %d subjects returned %d counts and %d errors", len(batch), len(found), len(errs))
	}
	for i, s := range batch {
		one, err := bc.Count(ctx, f.Store, s)
		if errs[i] != nil || err != nil {
			t.Errorf("subject %d: CountBatch: %v; Count: %v", i, errs[i], err)
			continue
		}
		if got, alone := nonZero(found[i]), nonZero(one); !slices.Equal(got, alone) {
			t.Errorf("subject %d: CountBatch counted %v, Count alone %v", i, got, alone)
		}
	}
}

// nonZero is the locations of ls with a count, as "location=count".
func nonZero(ls []event.LocationCount) []string {
	var out []string
	for _, l := range ls {
		if l.Deleted != 0 {
			out = append(out, fmt.Sprintf("%s=%d", l.Location, l.Deleted))
		}
	}
	return out
}

func checkTenantScope(t *testing.T, f Fixture) {
	ctx := context.Background()
	a1, a2, other := NewSubject("acme", "tenant-1"), NewSubject("acme", "tenant-2"), NewSubject("globex", "tenant-1")
	w1, w2 := f.Seed(t, a1, 2), f.Seed(t, a2, 2)
	keep := f.Seed(t, other, 2)
	tenant := deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}
	var counted []event.LocationCount
	if c, ok := f.Impl.(deletion.Counter); ok && f.NoTenantScope == "" {
		var err error
		if counted, err = c.Count(ctx, f.Store, tenant); err != nil {
			t.Fatalf("tenant Count: %v", err)
		}
	}
	res, err := f.Impl.Erase(ctx, f.Store, tenant)
	if f.NoTenantScope != "" {
		t.Logf("no tenant scope: %s", f.NoTenantScope)
		if !retry.IsPermanent(err) {
			t.Errorf("tenant Erase of a store without tenant scope = %v, want a permanent error", err)
		}
		if got := f.Count(t, a1); got != w1 {
			t.Errorf("a refused tenant erasure left %d of %d items", got, w1)
		}
		return
	}
	if err != nil {
		t.Fatalf("tenant Erase: %v (set NoTenantScope if the store refuses it)", err)
	}
	if w1+w2 > 0 && res.Deleted() == 0 {
		t.Errorf("tenant Erase reported nothing deleted, seeded %d items", w1+w2)
	}
	if counted != nil {
		if got, want := nonZero(counted), nonZero(res.Locations); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("tenant Count counted %v, Erase deleted %v", got, want)
		}
	}
	for _, s := range []deletion.Subject{a1, a2} {
		if got := f.Count(t, s); got != 0 {
			t.Errorf("after the tenant erasure %d items of %+q remain", got, s.ID)
		}
	}
	if got := f.Count(t, other); got != keep {
		t.Errorf("other tenant: %d items left of %d", got, keep)
	}
	v, err := f.Impl.Verify(ctx, f.Store, tenant)
	if err != nil || !v.Clean() || v.Method == "" {
		t.Errorf("Verify of the erased tenant = %+v, %v; want clean with a method", v, err)
	}
}

// checkConcurrent erases several subjects of one tenant at once, as the runtime does for
// requests on different partitions: each is gone, none reports fewer items than it had,
// and a bystander keeps everything.
func checkConcurrent(t *testing.T, f Fixture) {
	ctx := context.Background()
	const n = 6
	subs := make([]deletion.Subject, n)
	want := make([]int, n)
	for i := range subs {
		subs[i] = NewSubject("acme", fmt.Sprintf("conc-%d", i))
		want[i] = f.Seed(t, subs[i], 2)
	}
	bystander := NewSubject("acme", "conc")
	keep := f.Seed(t, bystander, 2)
	var wg sync.WaitGroup
	for i, s := range subs {
		wg.Go(func() {
			res, err := f.Impl.Erase(ctx, f.Store, s)
			if err != nil {
				t.Errorf("concurrent Erase %d: %v", i, err)
				return
			}
			// Not fewer than seeded; more is allowed: a store that keeps versions may
			// also delete, and count, copies that the other erasures' rewrites made.
			if res.Deleted() < int64(want[i]) {
				t.Errorf("concurrent Erase %d deleted %d, seeded %d", i, res.Deleted(), want[i])
			}
			if v, err := f.Impl.Verify(ctx, f.Store, s); err != nil || !v.Clean() {
				t.Errorf("concurrent Verify %d = %+v, %v; want clean", i, v, err)
			}
		})
	}
	wg.Wait()
	for _, s := range subs {
		if got := f.Count(t, s); got != 0 {
			t.Errorf("%d items of %+q remain after concurrent erasures", got, s.ID)
		}
	}
	if got := f.Count(t, bystander); got != keep {
		t.Errorf("bystander: %d items left of %d", got, keep)
	}
}

// checkCancelled calls Erase and Verify with a cancelled context: both must fail, with an
// error that is not permanent (the request is not at fault), and the subject must still be
// erasable afterwards.
func checkCancelled(t *testing.T, f Fixture) {
	s := NewSubject("acme", "cancelled")
	f.Seed(t, s, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Impl.Erase(ctx, f.Store, s); err == nil || retry.IsPermanent(err) {
		t.Errorf("Erase with a cancelled context = %v, want a transient error", err)
	}
	if _, err := f.Impl.Verify(ctx, f.Store, s); err == nil || retry.IsPermanent(err) {
		t.Errorf("Verify with a cancelled context = %v, want a transient error", err)
	}
	if _, err := f.Impl.Erase(context.Background(), f.Store, s); err != nil {
		t.Fatalf("Erase after the cancelled one: %v", err)
	}
	checkGone(t, f, s)
}

// checkDown erases and verifies through a store whose backend is unreachable.
func checkDown(t *testing.T, f Fixture) {
	if f.Down == nil {
		if f.NoDown == "" {
			t.Fatal("the fixture says nothing about a backend that is down: set Down, or NoDown with the reason")
		}
		t.Logf("no backend to be down: %s", f.NoDown)
		return
	}
	s := NewSubject("acme", "down-cust-1")
	f.Seed(t, s, 2)
	down := f.Down(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, eraseErr := down.Erase(ctx, f.Store, s)
	_, verifyErr := down.Verify(ctx, f.Store, s)
	for op, err := range map[string]error{"Erase": eraseErr, "Verify": verifyErr} {
		switch {
		case err == nil && op == "Erase" && res.NoPIIByDesign && res.Deleted() == 0:
			// A store with nothing to erase by design need not reach its backend to erase.
		case err == nil:
			t.Errorf("%s with the backend down succeeded", op)
		case retry.IsPermanent(err):
			t.Errorf("%s with the backend down = %v, want a transient error", op, err)
		case containsID(err.Error(), s):
			t.Errorf("%s error names the subject: %v", op, err)
		}
	}
}

// checkMalformed injects an item the store cannot process and checks its classification.
func checkMalformed(t *testing.T, f Fixture) {
	inject := f.Malformed
	if inject == nil {
		inject = f.Unreadable
	}
	if inject == nil {
		if f.NoMalformed == "" {
			t.Fatal("the fixture says nothing about malformed items: set Malformed (or Unreadable), or NoMalformed with the reason")
		}
		t.Logf("no malformed item possible: %s", f.NoMalformed)
		return
	}
	ctx := context.Background()
	s := NewSubject("acme", "malformed")
	f.Seed(t, s, 2)
	inject(t, s)
	_, err := f.Impl.Erase(ctx, f.Store, s)
	if err != nil && !retry.IsPermanent(err) {
		t.Errorf("Erase with a malformed item = %v, want success or a permanent error", err)
	}
	v, err := f.Impl.Verify(ctx, f.Store, s)
	switch {
	case err != nil && !retry.IsPermanent(err):
		t.Errorf("Verify with a malformed item = %v, want a permanent error or an unexamined report", err)
	case err == nil && v.Clean():
		t.Errorf("Verify with a malformed item = %+v: clean, though an item was not processed", v)
	}
}

// checkUnreadable seeds a subject, erases it, injects an item the store cannot read and
// expects Verify to fail or to report the item unexamined; a bystander stays clean.
func checkUnreadable(t *testing.T, f Fixture) {
	ctx := context.Background()
	s := NewSubject("acme", "unreadable")
	f.Seed(t, s, 2)
	if _, err := f.Impl.Erase(ctx, f.Store, s); err != nil {
		t.Fatalf("Erase: %v", err)
	}
	f.Unreadable(t, s)
	// A second erasure meets the unreadable item: it may fail, never delete what it cannot read.
	if _, err := f.Impl.Erase(ctx, f.Store, s); err != nil {
		t.Logf("Erase with an unreadable item: %v", err)
	}
	v, err := f.Impl.Verify(ctx, f.Store, s)
	switch {
	case err != nil:
		t.Logf("Verify with an unreadable item: %v", err)
	case v.Clean():
		t.Errorf("Verify with an unreadable item = %+v, want it unexamined (not clean)", v)
	case v.Unexamined == 0:
		t.Errorf("Verify with an unreadable item = %+v, want unexamined > 0", v)
	case len(v.UnexaminedItems) == 0:
		t.Errorf("Verify with an unreadable item = %+v, want the item named", v)
	}
	for _, it := range v.UnexaminedItems {
		if containsID(it, s) {
			t.Errorf("unexamined item %q holds a raw identifier", it)
		}
	}
	clean := NewSubject("acme", "readable")
	f.Seed(t, clean, 2)
	if _, err := f.Impl.Erase(ctx, f.Store, clean); err != nil {
		t.Fatalf("Erase of a bystander: %v", err)
	}
	if v, err := f.Impl.Verify(ctx, f.Store, clean); err != nil || !v.Clean() {
		t.Errorf("Verify of a bystander next to an unreadable item = %+v, %v; want clean", v, err)
	}
}

func checkGone(t *testing.T, f Fixture, s deletion.Subject) {
	t.Helper()
	v, err := f.Impl.Verify(context.Background(), f.Store, s)
	if err != nil {
		t.Fatalf("Verify of %+q: %v", s.ID, err)
	}
	if !v.Clean() || v.Method == "" {
		t.Errorf("Verify after erasing %+q = %+v, want remaining 0, unexamined 0 and a method", s.ID, v)
	}
	if got := f.Count(t, s); got != 0 {
		t.Errorf("%d items of the erased subject %+q remain", got, s.ID)
	}
}

func containsID(loc string, s deletion.Subject) bool {
	if len(s.ID) > 3 && contains(loc, s.ID) {
		return true
	}
	for _, ses := range s.Sessions {
		if contains(loc, ses) {
			return true
		}
	}
	return false
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// HostileAlphabet is what RandomPairs builds subject ids from: glob and regexp
// metacharacters, key and path delimiters, quotes, a space, letters, é both precomposed
// (NFC) and as e with a combining acute accent (NFD), a CJK character, an emoji and digits.
var HostileAlphabet = []string{
	"*", "?", "[", "]", `\`, ":", "%", "{", "}", "/", ".", ",", `"`, "'", " ",
	"a", "b", "\u00e9", "e\u0301", "\u540d", "\U0001F600", "0", "1", "9",
}

// Defaults of the property test, overridden by $LETHE_PROPERTY_SEED and $LETHE_PROPERTY_N.
const (
	DefaultPropertySeed = 20261201
	DefaultPropertyN    = 25
)

// RandomPairs returns n pairs (erased, bystander) of distinct subject ids of 1 to 6 runes
// drawn from HostileAlphabet, the same for the same seed. In about half of the pairs one id
// is a prefix of the other (cut at any rune, so "e" can stand against "e\u0301"); which of
// the two is erased is drawn too.
func RandomPairs(seed uint64, n int) [][2]string {
	rng := rand.New(rand.NewPCG(seed, 0x6c65746865))
	pairs := make([][2]string, 0, n)
	for len(pairs) < n {
		a, b := randomID(rng), ""
		if rng.IntN(2) == 0 {
			// b is a prefix of a, or a with more runes appended.
			if rs := []rune(a); len(rs) > 1 && rng.IntN(2) == 0 {
				b = string(rs[:1+rng.IntN(len(rs)-1)])
			} else {
				b = a + randomID(rng)
				if utf8.RuneCountInString(b) > 6 {
					b = string([]rune(b)[:6])
				}
			}
		} else {
			b = randomID(rng)
		}
		if a == b {
			continue
		}
		if rng.IntN(2) == 0 {
			a, b = b, a
		}
		pairs = append(pairs, [2]string{a, b})
	}
	return pairs
}

// randomID draws 1 to 6 runes' worth of HostileAlphabet symbols.
func randomID(rng *rand.Rand) string {
	want := 1 + rng.IntN(6)
	var sb strings.Builder
	for n := 0; n < want; {
		sym := HostileAlphabet[rng.IntN(len(HostileAlphabet))]
		if k := utf8.RuneCountInString(sym); n+k <= want {
			sb.WriteString(sym)
			n += k
		}
	}
	return sb.String()
}

// propertyParams reads the seed and the number of pairs of the property test.
func propertyParams(t *testing.T) (uint64, int) {
	t.Helper()
	seed, n := uint64(DefaultPropertySeed), DefaultPropertyN
	if v := os.Getenv("LETHE_PROPERTY_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LETHE_PROPERTY_SEED=%q: want an unsigned integer", v)
		}
		seed = s
	}
	if v := os.Getenv("LETHE_PROPERTY_N"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			t.Fatalf("LETHE_PROPERTY_N=%q: want a positive integer", v)
		}
		n = k
	}
	return seed, n
}

func isCounter(s deletion.Store) bool { _, ok := s.(deletion.Counter); return ok }
