package deletion

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// BatchStore is an optional capability of a Store that erases and verifies many subjects
// of one inventory store at once (one filter, one pipeline, one rewrite per object), found
// by type assertion. The runtime hands it the subject-scope requests pending at the same
// time; tenant-scope subjects always go through Erase and Verify.
//
// EraseBatch and VerifyBatch return one result and one error per subject, in the order of
// subjects, with the meaning Erase and Verify give them for that subject alone: the counts
// of a result are that subject's own, never the batch's, and an error (classified with
// package retry) fails only its subject. An error that concerns the whole batch (the
// backend is down) is returned for every subject. Both are idempotent, safe for concurrent
// use and honour ctx; a subject that appears twice in one batch counts its data once.
// Every implementation passes the batch checks of the conformance suite.
type BatchStore interface {
	Store
	EraseBatch(ctx context.Context, st inventory.Entry, subjects []Subject) ([]Result, []error)
	VerifyBatch(ctx context.Context, st inventory.Entry, subjects []Subject) ([]event.Verification, []error)
}

// BatchCounter is an optional capability of a Counter, found by type assertion: it counts
// many subjects of one inventory store at once (one read per object for the whole batch).
// The worker uses it where it batches erasures. CountBatch returns one count list and one
// error per subject, in the order of subjects, each meaning what Count means for that
// subject alone.
type BatchCounter interface {
	Counter
	CountBatch(ctx context.Context, st inventory.Entry, subjects []Subject) ([][]event.LocationCount, []error)
}

// VerifyEach is a VerifyBatch for stores whose verification gains nothing from batching:
// it verifies the subjects with s.Verify, up to verifyEachLimit at a time (Store is safe
// for concurrent use), so a batch's verification takes about as long as its slowest
// subject's, as the unbatched verifications of concurrent requests would, rather than the
// sum of them.
func VerifyEach(ctx context.Context, s Store, st inventory.Entry, subjects []Subject) ([]event.Verification, []error) {
	vs := make([]event.Verification, len(subjects))
	errs := make([]error, len(subjects))
	var g errgroup.Group
	g.SetLimit(verifyEachLimit)
	for i, subj := range subjects {
		g.Go(func() error {
			vs[i], errs[i] = s.Verify(ctx, st, subj)
			return nil
		})
	}
	_ = g.Wait() // every outcome is in errs
	return vs, errs
}

// verifyEachLimit bounds VerifyEach's concurrent verifications.
const verifyEachLimit = 16
