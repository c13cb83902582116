// Package deletiontest is the conformance suite every deletion.Store passes.
//
// The suite seeds data for several subjects through the fixture (which writes to the real
// store directly, not through the Store under test), erases some of them and checks, again
// through the fixture's own read path, that exactly the erased subjects' data is gone, that
// the counts and the verification are truthful and that erasing is idempotent. Its subject
// pairs include glob metacharacters, key delimiters, prefixes, case and Unicode variants.
package deletiontest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Fixture binds the suite to one store implementation over one real backend.
type Fixture struct {
	Impl  deletion.Store
	Store inventory.Store // the inventory entry under test
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

func checkGone(t *testing.T, f Fixture, s deletion.Subject) {
	t.Helper()
	v, err := f.Impl.Verify(context.Background(), f.Store, s)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if v.Remaining != 0 || v.Method == "" {
		t.Errorf("Verify after erase = %+v, want remaining 0 and a method", v)
	}
	if got := f.Count(t, s); got != 0 {
		t.Errorf("%d items of the erased subject remain", got)
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
