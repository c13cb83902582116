package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
)

// receipts follows erasure.completed and records when each request's receipt arrived,
// and erasure.store.done for how long each store's erasure took (from its report's start
// to its finish: find, erase and verification, queueing behind batches included).
type receipts struct {
	cl  *kgo.Client
	reg *schemareg.Codec

	mu       sync.Mutex
	arrived  map[string]time.Time
	sent     map[string]time.Time
	latency  Durations
	stores   map[string]Durations // store name -> durations of its reports since reset
	bad      int                  // receipts that are not COMPLETE
	changed  chan struct{}
	consumed int
}

// watchReceipts starts consuming erasure.completed from its start; reg reads the
// registry framing (nil: single-object encoding only).
func watchReceipts(cfg broker.Config, reg *schemareg.Codec) (*receipts, error) {
	cl, err := kgo.NewClient(append(cfg.Options(),
		kgo.ConsumeTopics(event.TopicCompleted, event.TopicStoreDone),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(10*time.Millisecond),
	)...)
	if err != nil {
		return nil, fmt.Errorf("receipt consumer: %w", err)
	}
	r := &receipts{cl: cl, reg: reg, arrived: map[string]time.Time{}, sent: map[string]time.Time{}, stores: map[string]Durations{}, changed: make(chan struct{}, 1)}
	go r.run()
	return r, nil
}

func (r *receipts) run() {
	for {
		fs := r.cl.PollFetches(context.Background())
		if fs.IsClientClosed() {
			return
		}
		now := time.Now()
		fs.EachRecord(func(rec *kgo.Record) {
			if rec.Topic == event.TopicStoreDone {
				var d event.StoreDone
				if r.reg.Decode(context.Background(), event.Done, rec.Value, &d) == nil && !d.FinishedAt.IsZero() {
					r.mu.Lock()
					r.stores[d.Store] = append(r.stores[d.Store], d.FinishedAt.Sub(d.StartedAt))
					r.mu.Unlock()
				}
				return
			}
			var rc event.Receipt
			ok := r.reg.Decode(context.Background(), event.Completed, rec.Value, &rc) == nil && rc.Status == "COMPLETE"
			r.mu.Lock()
			if !ok {
				r.bad++
			}
			id := string(rec.Key)
			if _, dup := r.arrived[id]; !dup {
				r.arrived[id] = now
				r.consumed++
				if s, ok := r.sent[id]; ok {
					r.latency = append(r.latency, now.Sub(s))
				}
			}
			r.mu.Unlock()
		})
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
}

// sentAt records that request id was submitted at t (before its 202 came back).
func (r *receipts) sentAt(id string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent[id] = t
	if a, ok := r.arrived[id]; ok {
		r.latency = append(r.latency, a.Sub(t))
	}
}

// count is how many distinct receipts arrived so far.
func (r *receipts) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.consumed
}

// waitFor blocks until n receipts arrived or timeout passed; it reports whether they did.
func (r *receipts) waitFor(n int, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for r.count() < n {
		select {
		case <-r.changed:
		case <-deadline.C:
			return r.count() >= n
		}
	}
	return true
}

// reset forgets the latencies and store durations measured so far (arrivals stay known)
// and returns them.
func (r *receipts) reset() (Durations, map[string]Durations) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, st := r.latency, r.stores
	r.latency, r.stores = nil, map[string]Durations{}
	return l, st
}

// badCount is how many receipts were not COMPLETE.
func (r *receipts) badCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}

func (r *receipts) close() { r.cl.Close() }
