package coalesce_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/coalesce"
)

// recorder is a Do that records the operations of each call, doubles them, and blocks
// each call until released (when gate is set).
type recorder struct {
	mu    sync.Mutex
	calls [][]int
	gate  chan struct{} // nil: calls return at once
	ended []error       // each call's context's error as the call ended
}

func (r *recorder) do(ctx context.Context, ops []int) ([]int, error) {
	r.mu.Lock()
	r.calls = append(r.calls, slices.Clone(ops))
	r.mu.Unlock()
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
		}
	}
	r.mu.Lock()
	r.ended = append(r.ended, ctx.Err())
	r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]int, len(ops))
	for i, v := range ops {
		out[i] = 2 * v
	}
	return out, nil
}

func (r *recorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, c := range r.calls {
		out = append(out, len(c))
	}
	return out
}

// waitFor polls cond until it holds, failing t after a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// submitAll submits each of ins from its own goroutine and returns a function that waits
// for them and returns their outputs and errors, in the order of ins.
func submitAll(ctx context.Context, c *coalesce.Calls[int, int], ins ...int) func() ([]int, []error) {
	outs, errs := make([]int, len(ins)), make([]error, len(ins))
	var wg sync.WaitGroup
	for i, v := range ins {
		wg.Go(func() { outs[i], errs[i] = c.Submit(ctx, v) })
	}
	return func() ([]int, []error) { wg.Wait(); return outs, errs }
}

// Alone, an operation is a call of its own, made at once.
func TestAloneCallsAtOnce(t *testing.T) {
	r := &recorder{}
	c := &coalesce.Calls[int, int]{Do: r.do}
	for i := range 3 {
		if out, err := c.Submit(context.Background(), i); err != nil || out != 2*i {
			t.Fatalf("Submit(%d) = %d, %v", i, out, err)
		}
	}
	if got := r.sizes(); !slices.Equal(got, []int{1, 1, 1}) {
		t.Errorf("call sizes %v, want three calls of one", got)
	}
}

// Operations submitted while a call is in flight wait for it and then go together in
// one call, none of them in the call that had started; each gets its own output.
func TestWaitingOperationsShareTheNextCall(t *testing.T) {
	r := &recorder{gate: make(chan struct{})}
	c := &coalesce.Calls[int, int]{Do: r.do}
	ctx := context.Background()
	first := submitAll(ctx, c, 100)
	waitFor(t, "the first call", func() bool { return len(r.sizes()) == 1 })
	rest := submitAll(ctx, c, 1, 2, 3, 4, 5, 6, 7, 8)
	waitFor(t, "8 waiting operations", func() bool { return c.Waiting() == 8 })
	close(r.gate)
	if outs, errs := first(); outs[0] != 200 || errs[0] != nil {
		t.Errorf("first: %v %v", outs, errs)
	}
	outs, errs := rest()
	for i, v := range []int{1, 2, 3, 4, 5, 6, 7, 8} {
		if outs[i] != 2*v || errs[i] != nil {
			t.Errorf("operation %d: %d, %v", v, outs[i], errs[i])
		}
	}
	if got := r.sizes(); !slices.Equal(got, []int{1, 8}) {
		t.Errorf("call sizes %v, want [1 8]", got)
	}
	if !slices.Equal(r.calls[0], []int{100}) {
		t.Errorf("the call that had started carried %v", r.calls[0])
	}
}

// Max bounds the operations of a call, and Running the calls in flight.
func TestMaxAndRunning(t *testing.T) {
	r := &recorder{gate: make(chan struct{})}
	c := &coalesce.Calls[int, int]{Do: r.do, Max: 3, Running: 2}
	ctx := context.Background()
	first := submitAll(ctx, c, 1, 2)
	waitFor(t, "two calls in flight", func() bool { return len(r.sizes()) == 2 })
	rest := submitAll(ctx, c, 3, 4, 5, 6, 7, 8, 9)
	waitFor(t, "7 waiting operations", func() bool { return c.Waiting() == 7 })
	if n := len(r.sizes()); n != 2 {
		t.Fatalf("%d calls started while two were in flight, want 2", n)
	}
	close(r.gate)
	first()
	rest()
	got := r.sizes()
	slices.Sort(got[2:])
	if !slices.Equal(got, []int{1, 1, 1, 3, 3}) {
		t.Errorf("call sizes %v, want two calls of one, then 3, 3 and 1", got)
	}
}

// A call's error is every one of its operations' error.
func TestCallErrorIsEveryOperations(t *testing.T) {
	boom := errors.New("boom")
	gate := make(chan struct{})
	var mu sync.Mutex
	n := 0
	c := &coalesce.Calls[int, int]{Do: func(ctx context.Context, ops []int) ([]int, error) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			<-gate
			return []int{0}, nil
		}
		return nil, boom
	}}
	ctx := context.Background()
	first := submitAll(ctx, c, 1)
	waitFor(t, "the first call", func() bool { mu.Lock(); defer mu.Unlock(); return n == 1 })
	rest := submitAll(ctx, c, 2, 3)
	waitFor(t, "two waiting operations", func() bool { return c.Waiting() == 2 })
	close(gate)
	first()
	if _, errs := rest(); !errors.Is(errs[0], boom) || !errors.Is(errs[1], boom) {
		t.Errorf("errors %v, want boom for both", errs)
	}
	short := &coalesce.Calls[int, int]{Do: func(context.Context, []int) ([]int, error) { return nil, nil }}
	if _, err := short.Submit(ctx, 1); err == nil {
		t.Error("a call without outputs succeeded")
	}
}

// A caller that gives up while waiting is dropped from the next call. A call runs while
// one of its callers waits for it, and is cancelled once every one gave up.
func TestGivingUp(t *testing.T) {
	r := &recorder{gate: make(chan struct{})}
	c := &coalesce.Calls[int, int]{Do: r.do}
	bg := context.Background()
	leave, cancelLeave := context.WithCancel(bg)
	first := submitAll(leave, c, 1)
	waitFor(t, "the first call", func() bool { return len(r.sizes()) == 1 })
	gone, cancelGone := context.WithCancel(bg)
	dropped := submitAll(gone, c, 2)
	kept := submitAll(bg, c, 3)
	waitFor(t, "two waiting operations", func() bool { return c.Waiting() == 2 })
	cancelGone()
	if _, errs := dropped(); !errors.Is(errs[0], context.Canceled) {
		t.Errorf("an operation given up: %v", errs[0])
	}
	if c.Waiting() != 1 {
		t.Errorf("%d waiting, want the one still wanted", c.Waiting())
	}
	cancelLeave() // the first call's only caller gives up: the call is cancelled
	if _, errs := first(); !errors.Is(errs[0], context.Canceled) {
		t.Errorf("first: %v", errs[0])
	}
	waitFor(t, "the next call", func() bool { return len(r.sizes()) == 2 })
	if !errors.Is(r.ended[0], context.Canceled) {
		t.Errorf("a call whose every caller gave up ended with %v, want it cancelled", r.ended[0])
	}
	close(r.gate)
	if outs, errs := kept(); outs[0] != 6 || errs[0] != nil {
		t.Errorf("the operation still wanted: %v %v", outs, errs)
	}
	if !slices.Equal(r.calls[1], []int{3}) {
		t.Errorf("the next call carried %v, want only the operation still wanted", r.calls[1])
	}
	if r.ended[1] != nil {
		t.Errorf("a call with a caller waiting ended with %v", r.ended[1])
	}
}
