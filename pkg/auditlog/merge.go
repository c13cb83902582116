package auditlog

import (
	"context"
	"slices"
	"sort"

	"github.com/lethe-erasure/lethe/pkg/event"
)

// MergeReports returns the report to keep when next arrives for a store that already reported
// prev. A later attempt (a re-drive) replaces prev. Within one attempt a request may run
// more than once (redelivery after a crash or a rebalance): the second run finds what the
// first deleted gone and reports less, or a passing store error. So a successful report
// is not replaced by a failed one, and of two successful ones the one that deleted more
// is kept (of two that deleted as much, next). Either report may be a find
// (aggregator.FoundReport: what a deleter found before it deleted) or carry one merged
// earlier: the kept report's count of each location is the larger of the two (counts are
// never added: the same run may be reported twice), and a successful report that thereby
// counts something is DELETED, not NOTHING_FOUND. That is sound because a successful
// report verified the store clean after the find, so all that was found was deleted
// within the attempt. Whether a find or a report arrives first does not change what is
// kept. The kept report names the found runs of both (StoreDone.FoundRuns).
func MergeReports(prev, next event.StoreDone) event.StoreDone {
	if next.Attempt != prev.Attempt {
		if next.Attempt > prev.Attempt {
			return next
		}
		return prev
	}
	keep, other := next, prev
	switch {
	case IsFound(next) && !IsFound(prev):
		keep, other = prev, next
	case IsFound(prev) || IsFound(next):
	case prev.Status.Succeeded() && !next.Status.Succeeded():
		keep, other = prev, next
	case prev.Status.Succeeded() && next.Status.Succeeded() && prev.Deleted() > next.Deleted():
		keep, other = prev, next
	}
	keep.Locations = event.MaxCounts(keep.Locations, other.Locations)
	keep.FoundRuns = union(keep.FoundRuns, other.FoundRuns)
	if keep.Status == event.StatusNothingFound && keep.Deleted() > 0 {
		keep.Status = event.StatusDeleted
	}
	return keep
}

// IsFound reports whether d is a find (a store's count before it erased, without a
// status) no store report has replaced yet.
func IsFound(d event.StoreDone) bool { return d.Status == "" }

// FoldReports merges the reports of each store (by Store, a find's name included) with
// MergeReports, in the order of ds, and returns one per store, ordered by store name.
func FoldReports(ds []event.StoreDone) []event.StoreDone {
	by := map[string]int{}
	var out []event.StoreDone
	for _, d := range ds {
		if i, ok := by[d.Store]; ok {
			out[i] = MergeReports(out[i], d)
			continue
		}
		by[d.Store] = len(out)
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Store < out[j].Store })
	return out
}

// union returns a followed by the elements of b that a lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// ReportLog is an optional capability of a Store, found by type assertion: a store that
// keeps each report as a record of its own and folds a store's records when it reads them
// (FoldReports in Reports and RequestState), in the order of their seq (the offset of the
// record that carried the report), as a writer merging them as they came would have.
// Appending needs no read and no condition, so concurrent appends can share calls;
// appending the same report with the same seq again changes nothing.
type ReportLog interface {
	AppendReport(ctx context.Context, d event.StoreDone, seq int64) error
}

// ReceiptsReader is an optional capability of a Store, found by type assertion: the
// receipts of several requests read together (DynamoDB: BatchGetItem, 100 a call).
type ReceiptsReader interface {
	// ReceiptsOf returns the stored receipts of requestIDs (no duplicates); requests
	// without a receipt are left out.
	ReceiptsOf(ctx context.Context, requestIDs []string) ([]event.Receipt, error)
}
