package objectstore

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"time"
)

// Listing is what a bucket holds under one prefix.
type Listing struct {
	Keys      []string             // the objects listed, sorted
	Versions  map[string][]Version // per key every version and delete marker (versioned only)
	Versioned Versioned            // the bucket when it keeps versions, nil otherwise
	Excluded  []string             // the names of the objects the filter excluded, sorted
	Tokens    map[string]string    // per key the listed ETag (no versions, S3 only)
}

// Current is the current version of key as listed (Token "" when the listing gave none).
func (ls Listing) Current(key string) Version {
	for _, v := range ls.Versions[key] {
		if v.Latest {
			return v
		}
	}
	return Version{Key: key, Latest: true, Token: ls.Tokens[key]}
}

// Live is every version of key as listed.
func (ls Listing) Live(key string) []Version {
	if ls.Versioned != nil {
		return ls.Versions[key]
	}
	return []Version{ls.Current(key)}
}

// List lists what b holds under prefix: in a bucket that keeps versions every version and
// delete marker, grouped by key (so objects whose current version is a delete marker are
// still found), otherwise the current objects with no versions. filter says what becomes
// of each key: skip leaves it out, a non-empty excluded leaves it out and names it in
// Excluded; any other key is listed.
func List(ctx context.Context, b Bucket, prefix string, filter func(key string) (skip bool, excluded string)) (ls Listing, err error) {
	add := func(key string) {
		switch skip, name := filter(key); {
		case name != "":
			ls.Excluded = append(ls.Excluded, name)
		case !skip:
			ls.Keys = append(ls.Keys, key)
		}
	}
	defer func() {
		slices.Sort(ls.Keys)
		slices.Sort(ls.Excluded)
	}()
	if v, ok := b.(Versioned); ok {
		all, err := v.ListVersions(ctx, prefix)
		switch {
		case err == nil:
			ls.Versioned, ls.Versions = v, map[string][]Version{}
			for _, ver := range all {
				if _, seen := ls.Versions[ver.Key]; !seen {
					add(ver.Key)
				}
				ls.Versions[ver.Key] = append(ls.Versions[ver.Key], ver)
			}
			return ls, nil
		case !errors.Is(err, ErrNoVersions):
			return ls, err
		}
	}
	if sb, ok := b.(*S3); ok {
		ls.Tokens = map[string]string{}
		err = sb.ListTokens(ctx, prefix, func(key, token string) error {
			add(key)
			ls.Tokens[key] = token
			return nil
		})
		return ls, err
	}
	err = b.List(ctx, prefix, func(key string) error { add(key); return nil })
	return ls, err
}

// VersionsOf lists the versions of exactly key.
func VersionsOf(ctx context.Context, vb Versioned, key string) ([]Version, error) {
	all, err := vb.ListVersions(ctx, key)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(v Version) bool { return v.Key != key }), nil
}

// Write writes through b as Put does, returning what was written when b reports it (S3).
func Write(ctx context.Context, b Bucket, key string, prev *Object, write func(io.Writer) error) (Written, error) {
	if sb, ok := b.(*S3); ok {
		return sb.Write(ctx, key, prev, write)
	}
	return Written{}, b.Put(ctx, key, prev, write)
}

// Handoff passes a listing from one operation to the next, under a key the caller
// chooses: a listing is taken once, and only within HandoffAge of its making; older ones
// are dropped. A nil Handoff hands nothing over. It is safe for concurrent use.
type Handoff struct {
	mu    sync.Mutex
	m     map[string]handed // key → the latest listing put
	swept time.Time         // when Put last dropped the listings past HandoffAge
}

type handed struct {
	ls Listing
	at time.Time
}

// HandoffAge is how long a listing may be handed over after it was made.
const HandoffAge = time.Second

// NewHandoff returns an empty Handoff.
func NewHandoff() *Handoff { return &Handoff{m: map[string]handed{}} }

// Put hands ls, taken at at, to the next Take of key. Once per HandoffAge it drops the
// listings no one took, so none is held much longer than twice that.
func (h *Handoff) Put(key string, ls Listing, at time.Time) {
	if h == nil {
		return
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Sub(h.swept) > HandoffAge {
		for k, e := range h.m {
			if now.Sub(e.at) > HandoffAge {
				delete(h.m, k)
			}
		}
		h.swept = now
	}
	h.m[key] = handed{ls: ls, at: at}
}

// Take returns the listing put under key within HandoffAge, at most once.
func (h *Handoff) Take(key string) (Listing, bool) {
	if h == nil {
		return Listing{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.m[key]
	delete(h.m, key)
	return e.ls, ok && time.Since(e.at) <= HandoffAge
}
