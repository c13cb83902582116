// Package coalesce carries the operations of concurrent callers in shared calls to a
// backend (group commit): one batch read or write where each caller would have made its
// own, each caller still getting its own result.
package coalesce

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Calls gathers the operations of concurrent callers into calls of Do. An operation
// submitted while fewer than Running calls are in flight starts a call at once; otherwise
// it waits, and the next call to start carries it with every operation waiting then, Max
// at most. An operation never joins a call that has started, so a call reads what was
// stored before each of its operations was submitted, and Submit returns only once the
// call carrying its operation returned: a write is done (or failed) by then.
//
// A call's context keeps the values of its first operation's and is cancelled once every
// caller of its operations has given up. Calls is safe for concurrent use; set Do before
// the first Submit and change nothing afterwards.
type Calls[In, Out any] struct {
	// Do performs ops in one call and returns one output per operation, in order, or an
	// error that every operation of the call gets.
	Do func(ctx context.Context, ops []In) ([]Out, error)
	// Max is the most operations one call carries; 0: no limit.
	Max int
	// Running is how many calls may be in flight at once; below 1: one.
	Running int

	mu      sync.Mutex
	running int
	waiting []*op[In, Out]
}

// op is one caller's operation.
type op[In, Out any] struct {
	ctx  context.Context
	in   In
	out  Out
	err  error
	done chan struct{} // closed once out and err are set
}

// Submit performs in, in a call shared with the operations of other callers, and returns
// its output. When ctx is done first it returns ctx's error: an operation that had not
// started is dropped; one in flight may still take effect.
func (c *Calls[In, Out]) Submit(ctx context.Context, in In) (Out, error) {
	o := &op[In, Out]{ctx: ctx, in: in, done: make(chan struct{})}
	c.mu.Lock()
	if c.running < max(c.Running, 1) { // then none waits: o's call starts now, on this goroutine
		c.running++
		c.mu.Unlock()
		c.run([]*op[In, Out]{o})
		return o.out, o.err
	}
	c.waiting = append(c.waiting, o)
	c.mu.Unlock()
	select {
	case <-o.done:
		return o.out, o.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if i := slices.Index(c.waiting, o); i >= 0 {
		c.waiting = slices.Delete(c.waiting, i, i+1)
	}
	c.mu.Unlock()
	select {
	case <-o.done: // it finished meanwhile: its outcome is known
		return o.out, o.err
	default:
		var zero Out
		return zero, ctx.Err()
	}
}

// Waiting is how many operations wait for a call to start.
func (c *Calls[In, Out]) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiting)
}

// startLocked starts calls for the waiting operations while fewer than Running are in
// flight, each on a goroutine of its own; c.mu is held.
func (c *Calls[In, Out]) startLocked() {
	for c.running < max(c.Running, 1) && len(c.waiting) > 0 {
		n := len(c.waiting)
		if c.Max > 0 {
			n = min(n, c.Max)
		}
		ops := slices.Clone(c.waiting[:n])
		c.waiting = slices.Delete(c.waiting, 0, n)
		c.running++
		go c.run(ops)
	}
}

// run performs one call for ops and starts the next.
func (c *Calls[In, Out]) run(ops []*op[In, Out]) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ops[0].ctx))
	var live atomic.Int64
	live.Store(int64(len(ops)))
	ins := make([]In, len(ops))
	stops := make([]func() bool, len(ops))
	for i, o := range ops {
		ins[i] = o.in
		stops[i] = context.AfterFunc(o.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
	}
	outs, err := c.Do(ctx, ins)
	if err == nil && len(outs) != len(ops) {
		err = fmt.Errorf("coalesce: %d outputs for %d operations", len(outs), len(ops))
	}
	for i, o := range ops {
		stops[i]()
		if err != nil {
			o.err = err
		} else {
			o.out = outs[i]
		}
		close(o.done)
	}
	cancel()
	c.mu.Lock()
	c.running--
	c.startLocked()
	c.mu.Unlock()
}
