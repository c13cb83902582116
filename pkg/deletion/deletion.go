// Package deletion is the seam between Lethe's runtime and the stores it erases from.
//
// A Store erases one data subject from one inventory store of its kind and verifies, by
// reading back, what remains. Implementations are safe for concurrent use, idempotent (a
// second Erase finds nothing and returns zero counts), honour ctx, and never touch data of
// any other subject: identifiers are matched exactly, never as patterns. Nor of any other
// tenant: every locator holds {tenant} or names a tenant field or column that every query
// requires, and a tenant-scope Erase removes that tenant's data only. They classify their
// errors once, with package retry: retry.Permanent for errors that repeating cannot fix (an
// inventory entry the store cannot serve, a refused filter, a malformed item), anything else
// is transient and the runtime retries it.
// What a store cannot read (a malformed dataset) is no error: Verify reports it unexamined. Every
// implementation passes the conformance suite in deletiontest.
package deletion

import (
	"context"
	"errors"
	"fmt"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// Subject is whom to erase. ID and Sessions are raw identifiers: never log them.
type Subject struct {
	Tenant   string
	ID       string      // customer id in the tenant; unused for ScopeTenant
	Hash     string      // keyed pseudonym of (Tenant, ID)
	Sessions []string    // known session ids, for legacy data that only carries a session
	Scope    event.Scope // ScopeSubject (default when empty) or ScopeTenant
}

// Vars returns the template values of s for one session ("" when none).
func (s Subject) Vars(session string) inventory.Vars {
	return inventory.Vars{Tenant: s.Tenant, Subject: s.ID, SubjectHash: s.Hash, Session: session}
}

// TenantScope reports whether s erases the whole tenant.
func (s Subject) TenantScope() bool { return s.Scope == event.ScopeTenant }

// Result is what Erase did.
type Result struct {
	Locations []event.LocationCount // deleted items per location (no raw identifier in Location)
	// NoPIIByDesign is set by stores that hold only pseudonyms and delete nothing.
	NoPIIByDesign bool
}

// Store erases data subjects from inventory stores of one kind.
type Store interface {
	// Erase deletes every item of s in st and says how many it deleted where.
	Erase(ctx context.Context, st inventory.Entry, s Subject) (Result, error)
	// Verify reads st back and counts what of s remains (zero after a complete erasure).
	Verify(ctx context.Context, st inventory.Entry, s Subject) (event.Verification, error)
}

// Validator is an optional capability of a Store, found by type assertion as in
// database/sql/driver: it checks the locators of one inventory store of its kind (decoding
// them with inventory.Locators.Decode, checking each template with inventory.CheckTemplate,
// refusing any that does not scope to one tenant) and names the field at fault. A deleter validates every store of
// its kind before it consumes anything and refuses to start on an error. Validate touches no
// backend, is cheap and safe for concurrent use.
type Validator interface {
	Validate(st inventory.Entry) error
}

// Counter is an optional capability of a Store. Count counts what Erase would delete of s
// in st now, per location, in Erase's locations and units; it changes nothing. A location
// Erase would report with zero may be left out. Count is safe for concurrent use, honours
// ctx and classifies its errors as Erase does.
//
// The worker records these counts before it erases, so that a receipt counts what was
// deleted even when the deleter dies between its delete and its report. A dry run reports
// them. A store without Counter records nothing and cannot take part in a dry run: it
// reports FAILED with ErrDryRunUnsupported and is never erased.
type Counter interface {
	Count(ctx context.Context, st inventory.Entry, s Subject) ([]event.LocationCount, error)
}

// Deleted sums the counts of r.
func (r Result) Deleted() int64 { return Total(r.Locations) }

// Total sums the counts of locs.
func Total(locs []event.LocationCount) int64 {
	var n int64
	for _, l := range locs {
		n += l.Deleted
	}
	return n
}

// StatusOf decides a store's status from its erasure result and verification.
func StatusOf(r Result, v event.Verification) event.Status {
	switch {
	case !v.Clean():
		return event.StatusFailed
	case r.NoPIIByDesign:
		return event.StatusNoPII
	case r.Deleted() > 0:
		return event.StatusDeleted
	default:
		return event.StatusNothingFound
	}
}

// ValidateStores checks, through s's Validator when it has one, every store of inv whose
// kind is kind, and returns every problem, each naming its store. A Store without a
// Validator accepts every entry.
func ValidateStores(inv *inventory.Inventory, kind string, s Store) error {
	v, ok := s.(Validator)
	if !ok {
		return nil
	}
	var errs []error
	for _, st := range inv.OfKinds(kind) {
		if err := v.Validate(st); err != nil {
			errs = append(errs, fmt.Errorf("inventory store %q of kind %q: %w", st.Name, kind, err))
		}
	}
	return errors.Join(errs...)
}

// PseudonymsOnly is an optional capability of a Store that holds keyed pseudonyms only and
// deletes nothing (its Erase reports NoPIIByDesign): a dry run reports it
// NO_PII_BY_DESIGN, as the erasure would.
type PseudonymsOnly interface {
	PseudonymsOnly()
}

// ErrDryRunUnsupported is the report of a store without Counter in a dry run.
var ErrDryRunUnsupported = errors.New("dry run not supported")

// ItemEraser is an optional capability of a Store: it erases items named by their ids in
// the store (as Verification.Similar lists them), the decision of a person reviewing a
// receipt. EraseItems deletes, in st, the items of items that belong to tenant and returns
// how many it deleted and how many of them a read-back still finds. An id that names no
// item of the tenant deletes nothing; an id that names items in more than one place, or
// that is not an id of the store, is a permanent error and nothing is deleted.
type ItemEraser interface {
	EraseItems(ctx context.Context, st inventory.Entry, tenant string, items []string) (deleted, remaining int64, err error)
}
