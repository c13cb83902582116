package aggregator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// Thresholds are the shares of a request's window, in percent, at which the watchdog
// warns: half the time gone, most of it, and overdue.
var Thresholds = []int{50, 80, 100}

// Watchdog watches the due dates of open requests. Each sweep lists every request without
// a receipt, publishes an erasure.overdue event the first time it crosses each of the
// Thresholds of its legal window (requested to due) and, when Target is set, of the
// internal target (requested to requested + Target, e.g. 5 minutes), counts the crossings
// (lethe_sla_threshold_total) and sets the number of requests past their legal due date
// per tenant (lethe_overdue_requests). Crossings are remembered in memory: after a restart
// a crossing may be announced again (at least once).
type Watchdog struct {
	Store    auditlog.Store
	Producer worker.Producer
	Topic    string        // default event.TopicOverdue
	Interval time.Duration // default 10s
	Target   time.Duration // internal target beside the legal window; 0: none
	Log      *zap.Logger
	Metrics  *metrics.Metrics
	Now      func() time.Time
	// Registry frames the erasure.overdue records as the topic's framing says
	// (schemareg.Codec.EncodeFor); nil: single-object encoding.
	Registry *schemareg.Codec

	mu   sync.Mutex
	sent map[string]int      // request id and window -> highest threshold announced
	done map[string]struct{} // requests known to have a receipt
}

// received returns which of reqs have a receipt: read together where the store can
// (auditlog.ReceiptsReader), else one by one.
func (w *Watchdog) received(ctx context.Context, reqs []auditlog.Request) (map[string]bool, error) {
	out := map[string]bool{}
	if rr, ok := w.Store.(auditlog.ReceiptsReader); ok {
		ids := make([]string, len(reqs))
		for i, r := range reqs {
			ids[i] = r.RequestID
		}
		rs, err := rr.ReceiptsOf(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("watchdog: %w", err)
		}
		for _, r := range rs {
			out[r.RequestID] = true
		}
		return out, nil
	}
	for _, r := range reqs {
		_, err := w.Store.GetReceipt(ctx, r.RequestID)
		switch {
		case err == nil:
			out[r.RequestID] = true
		case !errors.Is(err, auditlog.ErrNotFound):
			return nil, fmt.Errorf("watchdog: %w", err)
		}
	}
	return out, nil
}

// Run sweeps every Interval until ctx is done.
func (w *Watchdog) Run(ctx context.Context) error {
	interval := w.Interval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := w.Sweep(ctx); err != nil && ctx.Err() == nil {
			w.log().Warn("sla sweep failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep checks every open request once.
func (w *Watchdog) Sweep(ctx context.Context) error {
	reqs, err := w.Store.ListRequests(ctx, "")
	if err != nil {
		return fmt.Errorf("watchdog: list requests: %w", err)
	}
	now := w.now()
	m := metrics.Or(w.Metrics)
	overdue := map[string]int{}
	var out []*kgo.Record
	var announce []func()
	open := reqs[:0:0]
	for _, r := range reqs {
		if !w.completed(r.RequestID) {
			open = append(open, r)
		}
	}
	received, err := w.received(ctx, open)
	if err != nil {
		return err
	}
	for _, r := range open {
		if received[r.RequestID] {
			w.finish(r.RequestID)
			continue
		}
		if now.After(r.DueAt) {
			overdue[r.TenantID]++
		}
		windows := []struct {
			name string
			due  time.Time
		}{{event.WindowLegal, r.DueAt}}
		if w.Target > 0 {
			windows = append(windows, struct {
				name string
				due  time.Time
			}{event.WindowTarget, r.RequestedAt.Add(w.Target)})
		}
		for _, win := range windows {
			key := r.RequestID + "\x00" + win.name
			th := crossed(r.RequestedAt, win.due, now, w.announced(key))
			if th == 0 {
				continue
			}
			pending, err := w.pending(ctx, r)
			if err != nil {
				return err
			}
			ev := event.Overdue{RequestID: r.RequestID, TenantID: r.TenantID, SubjectHash: r.SubjectHash, Regulation: r.Regulation,
				RequestedAt: r.RequestedAt, DueAt: win.due, Threshold: th, Window: win.name, PendingStores: pending, At: now}
			topic := or(w.Topic, event.TopicOverdue)
			rec, err := w.Registry.Record(topic, event.Overdues, []byte(r.RequestID), &ev)
			if err != nil {
				return fmt.Errorf("watchdog: encode: %w", err)
			}
			out = append(out, rec)
			announce = append(announce, func() {
				w.remember(key, th)
				m.SLAThreshold.WithLabelValues(strconv.Itoa(th), ev.Window).Inc()
				w.log().Warn("request crossed its sla threshold", zap.String("request_id", ev.RequestID), zap.String("tenant", ev.TenantID),
					zap.Int("threshold", th), zap.String("window", ev.Window), zap.Time("due_at", ev.DueAt), zap.Strings("pending_stores", pending))
			})
		}
	}
	if len(out) > 0 {
		if err := w.Producer.ProduceSync(ctx, out...).FirstErr(); err != nil {
			return fmt.Errorf("watchdog: publish: %w", err)
		}
	}
	for _, f := range announce {
		f()
	}
	m.Overdue.Reset()
	for tenant, n := range overdue {
		m.Overdue.WithLabelValues(tenant).Set(float64(n))
	}
	return nil
}

// crossed returns the highest threshold of the window from start to due crossed at now
// above the one already announced, or 0.
func crossed(start, due, now time.Time, announced int) int {
	window := due.Sub(start)
	if window <= 0 {
		return 0
	}
	pct := float64(now.Sub(start)) / float64(window) * 100
	best := 0
	for _, th := range Thresholds {
		if pct >= float64(th) && th > announced {
			best = th
		}
	}
	return best
}

// pending lists the expected stores of r without a successful report.
func (w *Watchdog) pending(ctx context.Context, r auditlog.Request) ([]string, error) {
	reports, err := w.Store.Reports(ctx, r.RequestID)
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	ok := map[string]bool{}
	for _, d := range reports {
		ok[d.Store] = d.Status.Succeeded() && d.Verification.Clean()
	}
	pending := []string{}
	for _, s := range r.ExpectedStores {
		if !ok[s] {
			pending = append(pending, s)
		}
	}
	return pending, nil
}

func (w *Watchdog) announced(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent[id]
}

func (w *Watchdog) remember(id string, th int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent == nil {
		w.sent = map[string]int{}
	}
	w.sent[id] = th
}

// finish remembers that id has its receipt: receipts are final, so later sweeps skip it.
func (w *Watchdog) finish(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.sent, id+"\x00"+event.WindowLegal)
	delete(w.sent, id+"\x00"+event.WindowTarget)
	if w.done == nil {
		w.done = map[string]struct{}{}
	}
	w.done[id] = struct{}{}
}

func (w *Watchdog) completed(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.done[id]
	return ok
}

func (w *Watchdog) log() *zap.Logger {
	if w.Log == nil {
		return zap.NewNop()
	}
	return w.Log
}

func (w *Watchdog) now() time.Time {
	if w.Now == nil {
		return time.Now().UTC()
	}
	return w.Now()
}
