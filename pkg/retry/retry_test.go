package retry_test

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/retry"
)

type selfClassified bool

func (s selfClassified) Error() string   { return "self" }
func (s selfClassified) Permanent() bool { return bool(s) }

func TestPermanentClassification(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", io.ErrUnexpectedEOF, false},
		{"marked", retry.Permanent(io.ErrUnexpectedEOF), true},
		{"marked then wrapped", fmt.Errorf("store x: %w", retry.Permanent(io.EOF)), true},
		{"joined with a marked one", errors.Join(io.EOF, retry.Permanent(io.ErrClosedPipe)), true},
		{"says it is permanent", fmt.Errorf("w: %w", selfClassified(true)), true},
		{"says it is transient", selfClassified(false), false},
	} {
		if got := retry.IsPermanent(tc.err); got != tc.want {
			t.Errorf("%s: IsPermanent = %v, want %v", tc.name, got, tc.want)
		}
	}
	if retry.Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
	err := retry.Permanent(io.ErrUnexpectedEOF)
	if !errors.Is(err, io.ErrUnexpectedEOF) || err.Error() != io.ErrUnexpectedEOF.Error() {
		t.Errorf("marked error %v does not wrap its cause", err)
	}
}

func TestContendedClassification(t *testing.T) {
	err := fmt.Errorf("bucket b: %w", retry.Contended(io.ErrUnexpectedEOF))
	if !retry.IsContended(err) || retry.IsPermanent(err) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("wrapped contended error %v: contended %v, permanent %v", err, retry.IsContended(err), retry.IsPermanent(err))
	}
	if retry.IsContended(io.EOF) || retry.IsContended(nil) || retry.Contended(nil) != nil {
		t.Error("an unmarked or nil error is contended")
	}
}

func TestBackoffIsCappedAndJittered(t *testing.T) {
	b := retry.Backoff{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	for n, want := range map[int]time.Duration{0: 10 * time.Millisecond, 1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 4: 80 * time.Millisecond, 5: 100 * time.Millisecond, 50: 100 * time.Millisecond} {
		if got := b.Cap(n); got != want {
			t.Errorf("Cap(%d) = %v, want %v", n, got, want)
		}
		seen := map[time.Duration]bool{}
		for range 200 {
			d := b.Delay(n)
			if d < want/2 || d > want {
				t.Fatalf("Delay(%d) = %v, outside [%v, %v]", n, d, want/2, want)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("Delay(%d) took only %d distinct values in 200 draws: not jittered", n, len(seen))
		}
	}
	if d := (retry.Backoff{}).Delay(3); d != 0 {
		t.Errorf("zero Backoff waits %v", d)
	}
}
