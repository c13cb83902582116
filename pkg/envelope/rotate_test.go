package envelope_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/envelope"
)

// countingLimiter counts its waits and fails once it was waited on stopAfter times.
type countingLimiter struct {
	waits     atomic.Int64
	stopAfter int64
}

func (l *countingLimiter) Wait(ctx context.Context) error {
	if l.waits.Add(1) > l.stopAfter {
		return errors.New("limiter closed")
	}
	return ctx.Err()
}

func TestRewrapAllPacedAndReported(t *testing.T) {
	ctx := t.Context()
	keys := dirStore(t)
	k1, k2 := randKey(t), randKey(t)
	before := &envelope.Sealer{KEK: ring(t, "k1", map[string][]byte{"k1": k1}), Keys: keys}
	for i := range 10 {
		seal(t, before, fmt.Sprintf("er_%d", i), "x")
	}
	rotated := &envelope.Sealer{KEK: ring(t, "k2", map[string][]byte{"k1": k1, "k2": k2}), Keys: keys}

	lim := &countingLimiter{stopAfter: 1 << 30}
	var calls, last int
	got, err := rotated.RewrapAll(ctx, envelope.BulkOptions{Workers: 3, Limiter: lim, Rewrapping: func(c envelope.RewrapCounts) {
		calls++
		if n := c.Rewrapped + c.AlreadyCurrent + c.Shredded + c.Failed; n != last+1 {
			t.Errorf("progress after %d keys reports %d", last, n)
		}
		last++
	}})
	if err != nil || got.Rewrapped != 10 || got.Failed != 0 {
		t.Fatalf("RewrapAll = %+v, %v; want 10 rewrapped", got, err)
	}
	if lim.waits.Load() != 10 || calls != 10 {
		t.Fatalf("limiter waited %d times and progress was called %d times, want 10 each (one per key)", lim.waits.Load(), calls)
	}

	// A limiter that fails stops the run with its error and the counts so far.
	third := &envelope.Sealer{KEK: ring(t, "k3", map[string][]byte{"k2": k2, "k3": randKey(t)}), Keys: keys}
	got, err = third.RewrapAll(ctx, envelope.BulkOptions{Limiter: &countingLimiter{stopAfter: 4}})
	if err == nil || got.Rewrapped != 4 {
		t.Fatalf("RewrapAll with a limiter failing at the 5th key = %+v, %v; want 4 rewrapped and the error", got, err)
	}
	// Running again finishes the rest and nothing else.
	got, err = third.RewrapAll(ctx, envelope.BulkOptions{})
	if err != nil || got.Rewrapped != 6 || got.AlreadyCurrent != 4 {
		t.Fatalf("resumed RewrapAll = %+v, %v; want 6 rewrapped, 4 already current", got, err)
	}

	// A cancelled context ends the run with the context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := third.Census(cctx, envelope.BulkOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Census with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestRewrapAllNeedsListerAndReplacer(t *testing.T) {
	s := &envelope.Sealer{KEK: ring(t, "k1", map[string][]byte{"k1": randKey(t)}), Keys: &countingStore{KeyStore: dirStore(t)}}
	if _, err := s.RewrapAll(t.Context(), envelope.BulkOptions{}); err == nil {
		t.Fatal("RewrapAll on a store that can neither list nor replace succeeded")
	}
	if _, err := s.Census(t.Context(), envelope.BulkOptions{}); err == nil {
		t.Fatal("Census on a store that cannot list succeeded")
	}
}

func TestReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("x: %w", envelope.ErrUnknownKEK), "unknown_kek"},
		{fmt.Errorf("x: %w", envelope.ErrCorrupt), "corrupt"},
		{envelope.ErrMissing, "missing"},
		{envelope.ErrConflict, "conflict"},
		{fmt.Errorf("get: %w", context.DeadlineExceeded), "cancelled"},
		{errors.New("connection reset"), "store"},
	} {
		if got := envelope.Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
