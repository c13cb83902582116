package datasetstore

import (
	"strings"
	"sync"
	"time"
)

// handoff passes the listing a find took of a location to the erase that follows it, so
// that an erasure lists each location twice (erase, verify) instead of three times. A
// listing is taken once and only within handoffAge of its making; older ones are dropped.
//
// An erase working from a listing a few milliseconds old leaves nothing behind for good
// that its own listing would have caught: a version that became current in between makes
// the erase's conditional rewrite fail or list the key again (dropHeldVersions), and an
// object written after the listing that holds the subject is reported by the
// verification, which always lists anew, so the erasure is retried.
type handoff struct {
	mu    sync.Mutex
	m     map[string]handed // listingKey → the latest find's listing
	swept time.Time         // when put last dropped the listings past handoffAge
}

type handed struct {
	ls listing
	at time.Time
}

const handoffAge = time.Second

func newHandoff() *handoff { return &handoff{m: map[string]handed{}} }

// listingKey names what a listing of l depends on: its expanded prefix (bucket and key
// prefix) and the objects it excludes.
func listingKey(l location) string {
	return l.name + "\x00" + strings.Join(l.exclude, "\x00")
}

// put hands ls, the listing of l taken at at, to the next erase of l; h may be nil. Once
// per handoffAge it drops the listings no erase took, so none is held much longer than
// twice that.
func (h *handoff) put(l location, ls listing, at time.Time) {
	if h == nil {
		return
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Sub(h.swept) > handoffAge {
		for k, e := range h.m {
			if now.Sub(e.at) > handoffAge {
				delete(h.m, k)
			}
		}
		h.swept = now
	}
	h.m[listingKey(l)] = handed{ls: ls, at: at}
}

// take returns the listing of l a find handed over within handoffAge, at most once.
func (h *handoff) take(l location) (listing, bool) {
	if h == nil {
		return listing{}, false
	}
	k := listingKey(l)
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.m[k]
	delete(h.m, k)
	return e.ls, ok && time.Since(e.at) <= handoffAge
}
