package envelope

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// BulkOptions tune RewrapAll and Census.
type BulkOptions struct {
	// Workers is how many keys are worked on at once; 0 means 1.
	Workers int
	// Limiter, when set, is waited on before each key, bounding the rate of key store
	// calls (a *rate.Limiter of golang.org/x/time/rate fits).
	Limiter interface {
		Wait(ctx context.Context) error
	}
	// Rewrapping and Counting, when set, are called by RewrapAll and Census after each key
	// with the counts so far, by one goroutine at a time; they must not block for long nor
	// keep the maps they are passed.
	Rewrapping func(RewrapCounts)
	Counting   func(Census)
}

// RewrapCounts is the outcome of RewrapAll: how many listed keys were rewrapped to the
// current KEK, were wrapped by it already, were shredded between listing and rewrapping
// (they stay shredded), and could not be rewrapped. Failed counts the failures by reason
// (see Reason); FirstError is the text of the first failure of reason "store", with the id
// replaced by "<id>". No field holds an id or a key.
type RewrapCounts struct {
	Rewrapped      int            `json:"rewrapped"`
	AlreadyCurrent int            `json:"already_current"`
	Shredded       int            `json:"shredded_meanwhile"`
	Failed         int            `json:"failed"`
	FailedBy       map[string]int `json:"failed_by,omitempty"`
	FirstError     string         `json:"first_error,omitempty"`
}

// Census counts the live keys of a store: ByKEK the keys per id of the KEK that wraps
// them, Shredded those shredded between listing and reading, Unreadable those that could
// not be read or whose wrapping is damaged, by reason (see Reason).
type Census struct {
	ByKEK        map[string]int `json:"by_kek"`
	Shredded     int            `json:"shredded_meanwhile"`
	Unreadable   int            `json:"unreadable"`
	UnreadableBy map[string]int `json:"unreadable_by,omitempty"`
}

// Other returns how many keys are wrapped by a KEK other than current.
func (c Census) Other(current string) int {
	n := 0
	for kid, k := range c.ByKEK {
		if kid != current {
			n += k
		}
	}
	return n
}

// Reason names the class of a per-key error of RewrapAll or Census: "unknown_kek" (the
// key is wrapped by a KEK not in the ring), "corrupt" (the wrapped key is damaged or does
// not authenticate), "missing" (listed but absent), "conflict" (changed concurrently too
// often), "cancelled" (the context ended) and "store" (any other key store error).
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrUnknownKEK):
		return "unknown_kek"
	case errors.Is(err, ErrCorrupt):
		return "corrupt"
	case errors.Is(err, ErrMissing):
		return "missing"
	case errors.Is(err, ErrConflict):
		return "conflict"
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	default:
		return "store"
	}
}

// RewrapAll rewraps every live data key of the store under the current KEK (see Rewrap).
// The store must implement Lister and Replacer. It is idempotent: a key wrapped by the
// current KEK already costs one read and is counted, not written, so running it again
// after an interruption or a failure finishes the work and changes nothing else. A key
// shredded concurrently stays shredded. Per-key failures are counted, not returned; the
// error is that of listing or of ctx, returned with the counts of the keys handled so far.
func (s *Sealer) RewrapAll(ctx context.Context, opt BulkOptions) (RewrapCounts, error) {
	if _, ok := s.Keys.(Replacer); !ok {
		return RewrapCounts{}, fmt.Errorf("envelope: key store %T cannot replace keys", s.Keys)
	}
	var (
		mu sync.Mutex
		c  RewrapCounts
	)
	err := s.each(ctx, opt, func(ctx context.Context, id string) {
		changed, err := s.Rewrap(ctx, id)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil && changed:
			c.Rewrapped++
		case err == nil:
			c.AlreadyCurrent++
		case errors.Is(err, ErrShredded):
			c.Shredded++
		default:
			c.Failed++
			c.FailedBy = count(c.FailedBy, Reason(err))
			if Reason(err) == "store" && c.FirstError == "" {
				c.FirstError = strings.ReplaceAll(err.Error(), id, "<id>")
			}
		}
		if opt.Rewrapping != nil {
			opt.Rewrapping(c)
		}
	})
	return c, err
}

// Census reads every live data key of the store (which must implement Lister) and counts
// them by the KEK that wraps them, without changing anything. The error is that of
// listing or of ctx, returned with the counts so far.
func (s *Sealer) Census(ctx context.Context, opt BulkOptions) (Census, error) {
	var (
		mu sync.Mutex
		c  = Census{ByKEK: map[string]int{}}
	)
	err := s.each(ctx, opt, func(ctx context.Context, id string) {
		kid, err := s.wrappedBy(ctx, id)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			c.ByKEK[kid]++
		case errors.Is(err, ErrShredded):
			c.Shredded++
		default:
			c.Unreadable++
			c.UnreadableBy = count(c.UnreadableBy, Reason(err))
		}
		if opt.Counting != nil {
			opt.Counting(c)
		}
	})
	return c, err
}

// wrappedBy returns the id of the KEK that wraps the stored key of id, after checking that
// the ring can unwrap it.
func (s *Sealer) wrappedBy(ctx context.Context, id string) (string, error) {
	w, err := s.Keys.Get(ctx, id)
	if err != nil {
		return "", err
	}
	kid, err := wrappedKEKID(w)
	if err != nil {
		return "", err
	}
	if _, ok := s.KEK.aeads[kid]; ok {
		dek, err := s.KEK.unwrap(id, w)
		if err != nil {
			return "", err
		}
		clear(dek)
	}
	return kid, nil
}

// each runs fn for every id the store lists, on opt.Workers goroutines, waiting on
// opt.Limiter before each. It returns the error of listing or of ctx.
func (s *Sealer) each(ctx context.Context, opt BulkOptions, fn func(context.Context, string)) error {
	l, ok := s.Keys.(Lister)
	if !ok {
		return fmt.Errorf("envelope: key store %T cannot list its keys", s.Keys)
	}
	workers := max(opt.Workers, 1)
	ids := make(chan string)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for id := range ids {
				fn(ctx, id)
			}
		})
	}
	var err error
	for id, lerr := range l.Live(ctx) {
		if lerr != nil {
			err = fmt.Errorf("envelope: list data keys: %w", lerr)
			break
		}
		if opt.Limiter != nil {
			if err = opt.Limiter.Wait(ctx); err != nil {
				break
			}
		}
		select {
		case ids <- id:
			continue
		case <-ctx.Done():
			err = ctx.Err()
		}
		break
	}
	close(ids)
	wg.Wait()
	if err == nil {
		err = ctx.Err()
	}
	return err
}

func count(m map[string]int, reason string) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[reason]++
	return m
}
