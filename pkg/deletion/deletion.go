// Package deletion is the seam between Lethe's runtime and the stores it erases from.
//
// A Store erases one data subject from one inventory store of its kind and verifies, by
// reading back, what remains. Implementations are safe for concurrent use, idempotent (a
// second Erase finds nothing and returns zero counts), honour ctx, and never touch data of
// any other subject: identifiers are matched exactly, never as patterns. They classify their
// errors once: Permanent for errors that repeating cannot fix (an inventory entry the store
// cannot serve, a refused filter), anything else is transient and the runtime retries it.
// What a store cannot read (a malformed dataset) is no error: Verify reports it unexamined. Every
// implementation passes the conformance suite in deletiontest.
package deletion

import (
	"context"
	"errors"

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
	Erase(ctx context.Context, st inventory.Store, s Subject) (Result, error)
	// Verify reads st back and counts what of s remains (zero after a complete erasure).
	Verify(ctx context.Context, st inventory.Store, s Subject) (event.Verification, error)
}

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks the error for the runtime (consumer.Permanent).
func (p permanent) Permanent() bool { return true }

// Permanent marks err as one that retrying cannot fix. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// Deleted sums the counts of r.
func (r Result) Deleted() int64 {
	var n int64
	for _, l := range r.Locations {
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
