package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// receipts follows erasure.completed and records when each request's receipt arrived.
type receipts struct {
	cl *kgo.Client

	mu       sync.Mutex
	arrived  map[string]time.Time
	sent     map[string]time.Time
	latency  Durations
	bad      int // receipts that are not COMPLETE
	changed  chan struct{}
	consumed int
}

// watchReceipts starts consuming erasure.completed from its start.
func watchReceipts(cfg broker.Config) (*receipts, error) {
	cl, err := kgo.NewClient(append(cfg.Options(),
		kgo.ConsumeTopics(event.TopicCompleted),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(10*time.Millisecond),
	)...)
	if err != nil {
		return nil, fmt.Errorf("receipt consumer: %w", err)
	}
	r := &receipts{cl: cl, arrived: map[string]time.Time{}, sent: map[string]time.Time{}, changed: make(chan struct{}, 1)}
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
			var rc event.Receipt
			ok := event.Completed.Decode(rec.Value, &rc) == nil && rc.Status == "COMPLETE"
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

// reset forgets latencies measured so far (arrivals stay known).
func (r *receipts) reset() Durations {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.latency
	r.latency = nil
	return l
}

// badCount is how many receipts were not COMPLETE.
func (r *receipts) badCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}

func (r *receipts) close() { r.cl.Close() }
