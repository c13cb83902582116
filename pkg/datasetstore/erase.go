package datasetstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/lethe-erasure/lethe/pkg/deletion"
)

// counts is what erasing one location did.
type counts struct {
	current   int64   // rows removed from current objects (tenant scope: objects deleted)
	old       int64   // older versions deleted (besides those superseded by our rewrites)
	versioned bool    // the location keeps versions
	malformed []error // permanent, per object; the objects were left untouched
}

// errUnchanged aborts a rewrite that would remove nothing.
var errUnchanged = errors.New("nothing to remove")

// inventoryOf lists the dataset objects of l: for a versioned bucket every version and
// delete marker grouped by key (so objects whose current version is a delete marker are
// still found), otherwise the current objects with no versions. Keys come sorted.
func inventoryOf(ctx context.Context, l location) (keys []string, vers map[string][]Version, vb Versioned, err error) {
	if v, ok := l.bucket.(Versioned); ok {
		all, err := v.ListVersions(ctx, l.prefix)
		switch {
		case err == nil:
			vers = map[string][]Version{}
			for _, ver := range all {
				if _, ok := formatOf(ver.Key); !ok {
					continue
				}
				if _, seen := vers[ver.Key]; !seen {
					keys = append(keys, ver.Key)
				}
				vers[ver.Key] = append(vers[ver.Key], ver)
			}
			slices.Sort(keys)
			return keys, vers, v, nil
		case !errors.Is(err, errNoVersions):
			return nil, nil, nil, err
		}
	}
	err = l.bucket.List(ctx, l.prefix, func(key string) error {
		if _, ok := formatOf(key); ok {
			keys = append(keys, key)
		}
		return nil
	})
	slices.Sort(keys)
	return keys, nil, nil, err
}

// eraseRows removes the rows m matches from every dataset of l, then deletes the older
// versions that still hold such rows.
func eraseRows(ctx context.Context, l location, m *matcher) (c counts, err error) {
	keys, vers, vb, err := inventoryOf(ctx, l)
	c.versioned = vb != nil
	if err != nil || m.empty() {
		return c, err
	}
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		f, _ := formatOf(key)
		unlock := objectLocks.lock(objectName(l, key))
		rows, superseded, err := eraseCurrent(ctx, l.bucket, key, f, m)
		unlock()
		switch {
		case errors.Is(err, errMalformed):
			c.malformed = append(c.malformed, fmt.Errorf("%s: %w", objectName(l, key), err))
		case err != nil:
			return c, err
		}
		c.current += int64(rows)
		if vb == nil {
			continue
		}
		candidates := vers[key]
		if superseded != "" {
			// Our rewrite made a new current version: list again so that the version it
			// superseded, and any written since the first listing, are seen as non-current.
			if candidates, err = versionsOf(ctx, vb, key); err != nil {
				return c, err
			}
		}
		for _, v := range candidates {
			if v.Latest || v.DeleteMarker {
				continue
			}
			n, err := 1, error(nil) // the version our rewrite superseded held the rows
			if v.ID != superseded {
				n, err = countVersion(ctx, vb, v, f, m)
			}
			switch {
			case errors.Is(err, errMalformed):
				c.malformed = append(c.malformed, fmt.Errorf("%s (an older version): %w", objectName(l, key), err))
				continue
			case errors.Is(err, ErrNotFound):
				continue
			case err != nil:
				return c, err
			}
			if n == 0 {
				continue
			}
			if err := vb.DeleteVersion(ctx, key, v.ID); err != nil {
				return c, err
			}
			if v.ID != superseded {
				c.old++
			}
		}
	}
	return c, nil
}

// objectName names key as its location and the rest of its key, for error messages.
func objectName(l location, key string) string {
	return l.name + strings.TrimPrefix(key, l.prefix)
}

// versionsOf lists the versions of exactly key.
func versionsOf(ctx context.Context, vb Versioned, key string) ([]Version, error) {
	all, err := vb.ListVersions(ctx, key)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(v Version) bool { return v.Key != key }), nil
}

// eraseCurrent rewrites the current object of key without the rows m matches, streaming it
// once: the rewrite is conditional on the version read and is abandoned (nothing written)
// when no row matches. It returns the rows removed and, when it rewrote the object, the
// version it superseded ("-" when the bucket has no versions). Rewrites of one object
// within this process take turns, so concurrent erasures of several subjects do not
// abort each other's conditional writes.
func eraseCurrent(ctx context.Context, b Bucket, key string, f format, m *matcher) (int, string, error) {
	obj, err := b.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	defer obj.Body.Close()
	var rows int
	err = b.Put(ctx, key, obj, func(w io.Writer) error {
		var err error
		if rows, err = filter(f, obj.Body, w, m); err == nil && rows == 0 {
			err = errUnchanged
		}
		return err
	})
	if errors.Is(err, errUnchanged) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	superseded := obj.VersionID
	if superseded == "" {
		superseded = "-"
	}
	return rows, superseded, nil
}

// countObject counts the rows m matches in the current object of key.
func countObject(ctx context.Context, b Bucket, key string, f format, m *matcher) (int, error) {
	obj, err := b.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	defer obj.Body.Close()
	return filter(f, obj.Body, nil, m)
}

// countVersion counts the rows m matches in one version (the current one by key, so that
// the "null" version of an unversioned bucket needs no version id).
func countVersion(ctx context.Context, vb Versioned, v Version, f format, m *matcher) (int, error) {
	if v.Latest {
		return countObject(ctx, vb, v.Key, f, m)
	}
	obj, err := vb.GetVersion(ctx, v.Key, v.ID)
	if err != nil {
		return 0, err
	}
	defer obj.Body.Close()
	return filter(f, obj.Body, nil, m)
}

// dropAll deletes every dataset object of l, every version and delete marker included.
func dropAll(ctx context.Context, l location) (c counts, err error) {
	keys, vers, vb, err := inventoryOf(ctx, l)
	c.versioned = vb != nil
	if err != nil {
		return c, err
	}
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		if vb == nil {
			if err := l.bucket.Delete(ctx, key); err != nil {
				return c, err
			}
			c.current++
			continue
		}
		for _, v := range vers[key] {
			if err := vb.DeleteVersion(ctx, key, v.ID); err != nil {
				return c, err
			}
			switch {
			case v.DeleteMarker:
			case v.Latest:
				c.current++
			default:
				c.old++
			}
		}
	}
	return c, nil
}

// remaining counts what of the subject (m) or, with a nil m, of the tenant is left in l.
func remaining(ctx context.Context, l location, m *matcher) (int64, error) {
	keys, vers, vb, err := inventoryOf(ctx, l)
	if err != nil || m != nil && m.empty() {
		return 0, err
	}
	var n int64
	add := func(key string, read func(format) (int, error)) error {
		if m == nil {
			n++ // tenant scope: every dataset object or version left counts
			return nil
		}
		f, _ := formatOf(key)
		k, err := read(f)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil // gone since the listing
		case errors.Is(err, errMalformed):
			return deletion.Permanent(fmt.Errorf("%s: %w", objectName(l, key), err))
		}
		n += int64(k)
		return err
	}
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if vb == nil {
			err := add(key, func(f format) (int, error) { return countObject(ctx, l.bucket, key, f, m) })
			if err != nil {
				return n, err
			}
			continue
		}
		for _, v := range vers[key] {
			if v.DeleteMarker {
				continue
			}
			err := add(key, func(f format) (int, error) { return countVersion(ctx, vb, v, f, m) })
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// objectLocks serialises rewrites of one object within the process.
var objectLocks keyedMutex

type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*refMutex
}

type refMutex struct {
	sync.Mutex
	refs int
}

// lock locks the object named id and returns its unlock.
func (k *keyedMutex) lock(id string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*refMutex{}
	}
	m := k.locks[id]
	if m == nil {
		m = &refMutex{}
		k.locks[id] = m
	}
	m.refs++
	k.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		k.mu.Lock()
		if m.refs--; m.refs == 0 {
			delete(k.locks, id)
		}
		k.mu.Unlock()
	}
}
