package aggregator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
)

// restarts is how many times the tests below restart the aggregator.
const restarts = 5

// restart returns a new aggregator over the same audit table and broker, as a process
// restarted after e.agg.
func (e *env) restart() *aggregator.Aggregator {
	a := *e.agg
	return &a
}

// replay hands every record of recs to a, as a restarted aggregator whose offsets were never
// committed re-consumes its topics from the start; it returns the first error.
func replay(a *aggregator.Aggregator, recs []*kgo.Record) error {
	var first error
	for _, r := range recs {
		if err := a.Handle(context.Background(), r); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// publications counts the records on erasure.completed per request, failing on a request
// published with two different receipts.
func publications(t *testing.T, e *env) map[string]int {
	t.Helper()
	n := map[string]int{}
	ids := map[string]string{}
	for _, p := range published(t, e.addrs) {
		n[p.RequestID]++
		if id, ok := ids[p.RequestID]; ok && id != p.ReceiptID {
			t.Errorf("%s published with receipts %s and %s", p.RequestID, id, p.ReceiptID)
		}
		ids[p.RequestID] = p.ReceiptID
	}
	return n
}

// However often the aggregator restarts and re-consumes both topics from the start, each
// receipt is published exactly once.
func TestRestartsPublishEachReceiptOnce(t *testing.T) {
	e := setup(t)
	var ids []string
	for i := range 4 {
		ids = append(ids, fmt.Sprintf("er_%d", i))
	}
	recs := stream(t, "acme", ids...)
	for i := range restarts + 1 {
		if err := replay(e.restart(), recs); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	checkReceipts(t, e, "acme", ids)
	got := publications(t, e)
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("%s: published %d times over %d restarts, want once", id, got[id], restarts)
		}
	}
}

// A crash after the receipt was written and before it was published (here: the broker
// refuses the record, so the offset is not marked) publishes it on the restart, once.
func TestCrashBeforePublishPublishesOnRestart(t *testing.T) {
	e := setup(t)
	recs := stream(t, "acme", "er_1")
	crashed := e.restart()
	crashed.Producer = failingProducer{}
	if err := replay(crashed, recs); err == nil {
		t.Fatal("the run whose publication failed reported no error")
	}
	if _, err := e.store.GetReceipt(context.Background(), "er_1"); err != nil {
		t.Fatalf("receipt not written before the failed publication: %v", err)
	}
	if n := publications(t, e)["er_1"]; n != 0 {
		t.Fatalf("%d publications before the restart", n)
	}
	for i := range restarts {
		if err := replay(e.restart(), recs); err != nil {
			t.Fatalf("restart %d: %v", i, err)
		}
	}
	checkReceipts(t, e, "acme", []string{"er_1"})
	if n := publications(t, e)["er_1"]; n != 1 {
		t.Errorf("published %d times after the crash and %d restarts, want once", n, restarts)
	}
}

// unmarkable is an audit table whose publication marks fail to be written, as when the
// aggregator crashes between the broker's acknowledgement and the mark.
type unmarkable struct{ *auditlog.DirStore }

func (unmarkable) MarkPublished(context.Context, string, string) error {
	return errors.New("audit table unavailable")
}

// The documented window: acknowledged but not marked, the receipt is published again (the
// same receipt_id) when the record is handled again, and never after the mark is written.
func TestCrashBeforeMarkPublishesTwice(t *testing.T) {
	e := setup(t)
	recs := stream(t, "acme", "er_1")
	crashed := e.restart()
	crashed.Store = unmarkable{e.store}
	if err := replay(crashed, recs); err == nil {
		t.Fatal("the run whose mark failed reported no error")
	}
	for i := range restarts {
		if err := replay(e.restart(), recs); err != nil {
			t.Fatalf("restart %d: %v", i, err)
		}
	}
	checkReceipts(t, e, "acme", []string{"er_1"})
	if n := publications(t, e)["er_1"]; n != 2 {
		t.Errorf("published %d times, want 2: once before the failed mark, once more on the restart", n)
	}
	if ok, err := e.store.Published(context.Background(), "er_1"); err != nil || !ok {
		t.Errorf("Published = %v, %v; want the mark written on the restart", ok, err)
	}
}
