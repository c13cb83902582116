package aggregator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/keylock"
)

// Re-reads of an open request (openView.due).
const (
	// FirstReread is how long after its last record an open request that cannot complete
	// in this process's view is read from the audit table again: another process may have
	// stored records of it since this one first read it.
	FirstReread = 30 * time.Second
	// MaxReread bounds the doubling wait between re-reads of a request still open.
	MaxReread = 10 * time.Minute
	// ForgetOpen is how long an open request without a record is kept in view; a later
	// record brings it back.
	ForgetOpen = time.Hour
	// ForgetPublished is how long a request whose receipt this process published stays in
	// view, so that its records handled again (a redelivery) need no read.
	ForgetPublished = 10 * time.Minute
)

// openView is the aggregator's view of the open requests it handled records of, with
// a store that appends reports (auditlog.ReportLog): each request and its reports as this
// process read them when it first saw the request (what other processes, or this one
// before a restart, stored) and stored them since. With it, a record costs its write and
// no read but the first of its request's: the request is read again (RequestState, in
// complete) only when the view says it may complete (ready), or when it could not for FirstReread
// after its last record (records another process stored meanwhile are then found). Safe
// for concurrent use.
type openView struct {
	heads  auditlog.HeadCache // the chain heads this process linked
	reread time.Duration      // FirstReread unless set
	mu     sync.Mutex
	m      map[string]*viewed
}

type viewed struct {
	published bool                       // its receipt is published: later records change nothing here
	req       *auditlog.Request          // nil: not seen yet
	reports   map[string]event.StoreDone // by stored name (a find under its store's name and FoundSuffix)
	touched   time.Time                  // last record
	next      time.Time                  // next re-read
	backoff   time.Duration              // wait before the re-read after next
}

func (o *openView) entry(id string, now time.Time) *viewed {
	e := o.m[id]
	if !e.published {
		e.touched, e.next, e.backoff = now, now.Add(o.reread), 2*o.reread
	}
	return e
}

// seen reports whether id is in the view.
func (o *openView) seen(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.m[id]
	return ok
}

// load puts requestID in the view as st says (a zero st: nothing stored yet), unless a
// concurrent record put it there first.
func (o *openView) load(requestID string, st auditlog.RequestState, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]*viewed{}
	}
	if _, ok := o.m[requestID]; ok {
		return
	}
	e := &viewed{reports: map[string]event.StoreDone{}, touched: now, next: now.Add(o.reread), backoff: 2 * o.reread}
	if st.Request.RequestID != "" {
		req := st.Request
		e.req = &req
	}
	for _, d := range st.Reports {
		e.reports[d.Store] = d
	}
	o.m[requestID] = e
}

// request notes r and returns whether the request may complete (ready).
func (o *openView) request(r auditlog.Request, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.entry(r.RequestID, now)
	if e.published {
		return false
	}
	if e.req == nil || r.Attempt >= e.req.Attempt {
		e.req = &r
	}
	return e.ready(now)
}

// report folds d into its store's report and returns whether the request may complete
// (ready).
func (o *openView) report(d event.StoreDone, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.entry(d.RequestID, now)
	if e.published {
		return false
	}
	if prev, ok := e.reports[d.Store]; ok {
		d = auditlog.MergeReports(prev, d)
	}
	e.reports[d.Store] = d
	return e.ready(now)
}

// ready reports whether the request may complete: the view builds its receipt, or holds a
// report of every expected store and still does not (a find another process stored may
// be what it lacks), so that the store is worth reading now.
func (e *viewed) ready(now time.Time) bool {
	if e.req == nil || e.published {
		return false
	}
	reports := make([]event.StoreDone, 0, len(e.reports))
	for _, d := range e.reports {
		reports = append(reports, d)
	}
	if _, ok := Build(*e.req, reports, now); ok {
		return true
	}
	for _, name := range e.req.ExpectedStores {
		if d, ok := e.reports[name]; !ok || IsFound(d) {
			return false
		}
	}
	return true
}

// publish marks id published in the view, keeping nothing else of it.
func (o *openView) publish(id string, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]*viewed{}
	}
	o.m[id] = &viewed{published: true, touched: now}
}

// due returns the requests to read again at now, each next due after a wait that doubles
// up to MaxReread; it forgets those without a record for ForgetOpen.
func (o *openView) due(now time.Time) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for id, e := range o.m {
		switch {
		case e.published && now.Sub(e.touched) >= ForgetPublished, now.Sub(e.touched) >= ForgetOpen:
			delete(o.m, id)
		case e.published:
		case !now.Before(e.next):
			out = append(out, id)
			e.next, e.backoff = now.Add(e.backoff), min(2*e.backoff, MaxReread)
		}
	}
	return out
}

// set replaces the view of st.Request's request with st, as read.
func (o *openView) set(st auditlog.RequestState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.m[st.Request.RequestID]
	if !ok || e.published {
		return
	}
	req := st.Request
	e.req, e.reports = &req, map[string]event.StoreDone{}
	for _, d := range st.Reports {
		e.reports[d.Store] = d
	}
}

var (
	viewMu  sync.Mutex
	looking keylock.Locks
)

// view returns a's view of open requests, made on first use.
func (a *Aggregator) view() *openView {
	viewMu.Lock()
	defer viewMu.Unlock()
	if a.open == nil {
		a.open = &openView{reread: cmp.Or(a.Reread, FirstReread)}
	}
	return a.open
}

// look puts requestID in the view, read from the store, unless it is there: what other
// processes stored of it before this one saw it.
func (a *Aggregator) look(ctx context.Context, requestID string) error {
	v := a.view()
	if v.seen(requestID) {
		return nil
	}
	defer looking.Lock(requestID)() // a request's records on other topics wait for one read
	if v.seen(requestID) {
		return nil
	}
	st, err := a.Store.RequestState(ctx, requestID)
	if err != nil && !errors.Is(err, auditlog.ErrNotFound) {
		return fmt.Errorf("aggregator: load request state: %w", err)
	}
	if errors.Is(err, auditlog.ErrNotFound) { // reports may have come before the request
		st = auditlog.RequestState{}
		if st.Reports, err = a.Store.Reports(ctx, requestID); err != nil {
			return fmt.Errorf("aggregator: load reports: %w", err)
		}
	}
	v.load(requestID, st, a.now())
	return nil
}

// published notes in the view that requestID's receipt is published, with a store that
// appends reports.
func (a *Aggregator) published(requestID string) {
	if _, ok := a.Store.(auditlog.ReportLog); ok {
		a.view().publish(requestID, a.now())
	}
}

// lookFirst is look with a store that appends reports, and nothing otherwise.
func (a *Aggregator) lookFirst(ctx context.Context, requestID string) error {
	if _, ok := a.Store.(auditlog.ReportLog); !ok {
		return nil
	}
	return a.look(ctx, requestID)
}

// reread reads the open requests that are due, completes those that can complete, and
// forgets those that are published: the view's way to records it did not see.
func (a *Aggregator) reread(ctx context.Context) {
	for _, id := range a.view().due(a.now()) {
		st, err := a.Store.RequestState(ctx, id)
		if errors.Is(err, auditlog.ErrNotFound) {
			continue // its reports came first; its record, here or elsewhere, completes it
		}
		if err != nil {
			a.log().Warn("re-read of an open request failed", zap.String("request_id", id), zap.Error(err))
			continue
		}
		a.view().set(st)
		if err := a.complete(ctx, id); err != nil && ctx.Err() == nil {
			a.log().Warn("completion after a re-read failed", zap.String("request_id", id), zap.Error(err))
		}
	}
}

// runRereads calls reread every interval until ctx is done.
func (a *Aggregator) runRereads(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.reread(ctx)
		}
	}
}
