package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// Watcher follows erasure.store.done and erasure.completed from their start with a plain
// consumer (no group, nothing committed): it sees every report and receipt as soon as it
// is published, whatever is killed. Methods are safe for concurrent use.
type Watcher struct {
	mu        sync.Mutex
	reports   map[string]map[string]event.StoreDone // request id → store → latest report
	arrivals  []arrival
	completed map[string]map[string]bool // request id → receipt ids published
	receipts  map[string]receiptSeen     // request id → its first receipt
	cl        *kgo.Client
	done      chan struct{}
}

type arrival struct {
	at    time.Time
	store string
	id    string // request id
}

type receiptSeen struct {
	at     time.Time
	status string
}

// Watch starts a Watcher; Close stops it.
func Watch(b broker.Config) (*Watcher, error) {
	cl, err := kgo.NewClient(append(b.Options(), kgo.ConsumeTopics(event.TopicStoreDone, event.TopicCompleted),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return nil, err
	}
	w := &Watcher{reports: map[string]map[string]event.StoreDone{}, completed: map[string]map[string]bool{}, receipts: map[string]receiptSeen{}, cl: cl, done: make(chan struct{})}
	go w.run()
	return w, nil
}

func (w *Watcher) run() {
	defer close(w.done)
	for {
		fs := w.cl.PollFetches(context.Background())
		if fs.IsClientClosed() {
			return
		}
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			w.mu.Lock()
			defer w.mu.Unlock()
			switch r.Topic {
			case event.TopicStoreDone:
				var d event.StoreDone
				if event.Done.Decode(r.Value, &d) != nil || event.AfterReceipt(d.Purpose) {
					return // undecodable, or a sweep's report after the receipt
				}
				if w.reports[d.RequestID] == nil {
					w.reports[d.RequestID] = map[string]event.StoreDone{}
				}
				if old, ok := w.reports[d.RequestID][d.Store]; !ok || d.Attempt >= old.Attempt {
					w.reports[d.RequestID][d.Store] = d
				}
				w.arrivals = append(w.arrivals, arrival{now, d.Store, d.RequestID})
			case event.TopicCompleted:
				var rc event.Receipt
				if event.Completed.Decode(r.Value, &rc) != nil {
					return
				}
				if w.completed[rc.RequestID] == nil {
					w.completed[rc.RequestID] = map[string]bool{}
				}
				w.completed[rc.RequestID][rc.ReceiptID] = true
				if _, seen := w.receipts[rc.RequestID]; !seen {
					w.receipts[rc.RequestID] = receiptSeen{now, rc.Status}
				}
			}
		})
	}
}

// Completed reports whether a receipt was published for the request.
func (w *Watcher) Completed(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.completed[id]) > 0
}

// Receipt returns the status of the first receipt published for the request and when the
// watcher saw it; ok is false while there is none.
func (w *Watcher) Receipt(id string) (status string, at time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.receipts[id]
	return r.status, r.at, ok
}

// waitReceipt waits up to d for the receipt of request id and returns its status.
func (w *Watcher) waitReceipt(ctx context.Context, id string, d time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		if status, _, ok := w.Receipt(id); ok {
			return status, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("chaos: no receipt for %s after %s", id, d)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// LastReports returns, for each store, when the watcher saw the last report for any of
// the requests ids.
func (w *Watcher) LastReports(ids map[string]bool) map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]time.Time{}
	for _, a := range w.arrivals {
		if ids[a.id] && a.at.After(out[a.store]) {
			out[a.store] = a.at
		}
	}
	return out
}

// Failed returns the stores whose latest report for the request, of attempt at least
// attempt, is FAILED, with the reasons.
func (w *Watcher) Failed(id string, attempt int) map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]string{}
	for st, d := range w.reports[id] {
		if d.Status == event.StatusFailed && d.Attempt >= attempt {
			out[st] = d.Error
		}
	}
	return out
}

// ReportsBetween counts the reports of each store that arrived in [from, to).
func (w *Watcher) ReportsBetween(from, to time.Time) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, a := range w.arrivals {
		if !a.at.Before(from) && a.at.Before(to) {
			out[a.store]++
		}
	}
	return out
}

// Close stops the watcher.
func (w *Watcher) Close() {
	w.cl.Close()
	<-w.done
}
