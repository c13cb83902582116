// Package retry is Lethe's one error vocabulary and its backoff: whether repeating an
// operation can succeed, and how long to wait before repeating it.
//
// An error is transient unless it is marked permanent. Store adapters, envelope, auditlog
// and the services classify their errors once, where they know the backend, with Permanent;
// the runtime (consumer, worker) alone decides from IsPermanent whether to retry or to
// dead-letter. Any error type may also say it is permanent itself by implementing
// interface{ Permanent() bool }, as franz-go's kerr errors carry their class. A transient
// error marked Contended is a lost race with a concurrent writer, which the worker retries
// at once instead of backing off.
package retry

import (
	"errors"
	"math/rand/v2"
	"time"
)

type permanent struct{ err error }

func (p permanent) Error() string   { return p.err.Error() }
func (p permanent) Unwrap() error   { return p.err }
func (p permanent) Permanent() bool { return true }

// Permanent marks err as one that repeating cannot fix (an inventory entry a store cannot
// serve, a refused filter, a malformed item). The result wraps err, so errors.Is and
// errors.As still reach it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err, or an error it wraps, says it is permanent: it was
// marked with Permanent or implements interface{ Permanent() bool } returning true. A nil
// error is not permanent.
func IsPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

type contended struct{ err error }

func (c contended) Error() string { return c.err.Error() }
func (c contended) Unwrap() error { return c.err }

// Contended marks err as a lost race with a concurrent writer (a conditional write whose
// precondition another writer's change broke): repeating at once reads the winner's
// result and succeeds unless it loses again, so the runtime retries it after a short
// pause rather than the backoff of a failing backend (ContendedBackoff). The result wraps
// err. Contended(nil) is nil.
func Contended(err error) error {
	if err == nil {
		return nil
	}
	return contended{err}
}

// IsContended reports whether err, or an error it wraps, was marked with Contended.
func IsContended(err error) bool {
	var c contended
	return errors.As(err, &c)
}

// ContendedBackoff is the wait before retrying a Contended error: a few milliseconds,
// growing with each race lost in a row, jittered so that the writers that lost one race
// do not meet again in the next.
var ContendedBackoff = Backoff{Base: 2 * time.Millisecond, Max: 50 * time.Millisecond}

// Backoff is a capped exponential backoff with equal jitter: the wait before retry n is
// drawn uniformly from [d/2, d], where d is Base doubled n-1 times and capped at Max. The
// jitter spreads the retries of many partitions or replicas hitting one recovering backend;
// its lower half bound keeps every wait at least half the nominal one.
type Backoff struct {
	Base, Max time.Duration
}

// Delay is the wait before retry n (n >= 1); n < 1 counts as 1. It is safe for concurrent
// use. A zero Backoff waits 0.
func (b Backoff) Delay(n int) time.Duration {
	d := b.Cap(n)
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// Cap is the nominal wait before retry n without jitter: Base doubled n-1 times, at most
// Max (Base when Max is 0). Delay(n) lies in [Cap(n)/2, Cap(n)].
func (b Backoff) Cap(n int) time.Duration {
	d := b.Base
	limit := b.Max
	if limit == 0 {
		limit = b.Base
	}
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
