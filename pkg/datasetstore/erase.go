package datasetstore

import (
	"context"
	"errors"
	"io"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/datasetstore/rows"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/keylock"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
	"github.com/lethe-erasure/lethe/pkg/pii"
)

// counts is what erasing or verifying one location did or found.
type counts struct {
	current    int64    // rows removed or left in current objects (tenant scope: objects)
	old        int64    // older versions deleted (besides those superseded by our rewrites)
	versioned  bool     // the location keeps versions
	unexamined []string // "name: reason" of each object or version that could not be read
	excluded   []string // names of the objects the inventory excludes
}

// of reports current and old under location name, as Erase and Find report them: the
// rows of current objects, and where c's location keeps versions, the older versions.
func (c counts) of(name string, current, old int64) []event.LocationCount {
	out := []event.LocationCount{{Location: name, Deleted: current}}
	if c.versioned {
		out = append(out, event.LocationCount{Location: name + oldVersions, Deleted: old})
	}
	return out
}

// errUnchanged aborts a rewrite that would remove nothing.
var errUnchanged = errors.New("nothing to remove")

// inventoryOf lists the objects of l: for a versioned bucket every version and delete
// marker grouped by key (so objects whose current version is a delete marker are still
// found), otherwise the current objects with no versions. Objects the inventory excludes
// are only named; summaries (summaryRoot) are never listed.
func inventoryOf(ctx context.Context, l location) (objectstore.Listing, error) {
	if l.listed != nil {
		return l.listed.of(ctx, l)
	}
	return list(ctx, l)
}

// list is inventoryOf without a shared listing.
func list(ctx context.Context, l location) (objectstore.Listing, error) {
	return objectstore.List(ctx, l.bucket, l.prefix, func(key string) (bool, string) {
		switch {
		case strings.HasPrefix(key, summaryRoot):
			return true, ""
		case l.excludes(key):
			return true, l.display(key)
		}
		return false, ""
	})
}

// eraseRows removes the rows m matches from every dataset of l, then deletes the older
// versions that still hold such rows, working from the listing the find just before it
// took when there is one (handoff). Objects and versions it cannot read are left as they
// are (Verify reports them).
func eraseRows(ctx context.Context, l location, m *matcher) (c counts, err error) {
	ls, handed := l.hand.Take(listingKey(l))
	if !handed {
		ls, err = inventoryOf(ctx, l)
	}
	c.versioned, c.excluded = ls.Versioned != nil, ls.Excluded
	if err != nil || m.empty() {
		return c, err
	}
	sv := l.index(m, nil, false)
	p := objectPass{m: m, index: true,
		apply: func(key string, r io.Reader, w io.Writer, m *matcher) (int, error) {
			return rewrite(key, r, w, m, l.lim)
		},
		holds: func(v objectstore.Version) (bool, error) {
			n, err := countVersion(ctx, ls.Versioned, v, m, sv, l.lim)
			return n > 0, err
		}}
	c.current, c.old, err = p.run(ctx, l, ls, sv)
	return c, err
}

// objectPass is one erasure pass over the objects of a location: the row erasure or the
// mention handling.
type objectPass struct {
	m        *matcher
	mentions bool // the summaries tell by their mention tokens which versions to skip
	index    bool // a rewrite keeps the row index of what it writes (view.indexing)
	// apply copies the dataset key from r to w (nil: it only counts) with the pass applied
	// and returns the rows it removed or changed.
	apply func(key string, r io.Reader, w io.Writer, m *matcher) (int, error)
	// holds reports whether an older version still holds what the pass removes.
	holds func(v objectstore.Version) (bool, error)
}

// run rewrites every current object of ls, listed in l, that p changes and deletes every
// older version that still holds what p removes. It returns the rows p handled in current
// objects and the older versions it deleted besides those its own rewrites superseded
// (whose rows are counted). Objects and versions it cannot read are left as they are.
func (p objectPass) run(ctx context.Context, l location, ls objectstore.Listing, sv summaryIndex) (handled, old int64, err error) {
	for _, key := range ls.Keys {
		if err := ctx.Err(); err != nil {
			return handled, old, err
		}
		var n int
		var superseded string
		var wr objectstore.Written
		if !sv.skip(ctx, key, ls.Current(key), p.mentions) {
			unlock := objectLocks.Lock(objectName(l, key))
			p.m.begin()
			n, superseded, wr, err = p.rewriteCurrent(ctx, l.bucket, key, sv)
			unlock()
			if err != nil && !errors.Is(err, rows.ErrMalformed) {
				return handled, old, err
			}
			if err == nil {
				p.m.keep(false)
			}
		}
		handled += int64(n)
		err := dropHeldVersions(ctx, ls, key, superseded, wr, sv,
			func(v objectstore.Version) bool { return v.ID != superseded && sv.skip(ctx, key, v, p.mentions) },
			func(v objectstore.Version) (bool, error) {
				p.m.begin()
				return p.holds(v)
			},
			func(v objectstore.Version) {
				if v.ID != superseded {
					old++
					p.m.keep(true)
				}
			})
		if err != nil {
			return handled, old, err
		}
	}
	return handled, old, nil
}

// dropHeldVersions goes through the older versions of key once its current object was
// handled (superseded: the version a rewrite of it replaced, "" when nothing was written;
// wr: what was written). In a bucket that keeps versions it deletes each older version that
// holds reports as still holding data, calling deleted for it, and keeps delete markers, the
// current version, those skip rules out and those it cannot read (Verify reports them).
// The version superseded is held without asking holds (the rewrite removed what it held)
// and deleted while key's summary is stored for the versions that remain.
func dropHeldVersions(ctx context.Context, ls objectstore.Listing, key, superseded string, wr objectstore.Written, sv summaryIndex,
	skip func(objectstore.Version) bool, holds func(objectstore.Version) (bool, error), deleted func(objectstore.Version)) error {
	if ls.Versioned == nil {
		live := ls.Live(key)
		if superseded != "" {
			live = []objectstore.Version{{Key: key, Latest: true, Token: wr.Token}}
		}
		return sv.flush(ctx, key, live)
	}
	candidates := ls.Versions[key]
	switch {
	case superseded != "" && superseded == ls.Current(key).ID:
		// Our rewrite replaced the version listed as current, so no version was written
		// between the listing and the rewrite: the listed versions, the one superseded now
		// non-current, and ours are all there is to go through (a version written after
		// ours is current, and current versions are kept).
		candidates = make([]objectstore.Version, 0, len(ls.Versions[key])+1)
		for _, v := range ls.Versions[key] {
			v.Latest = false
			candidates = append(candidates, v)
		}
		candidates = append(candidates, objectstore.Version{Key: key, ID: wr.VersionID, Latest: true, Token: wr.Token})
	case superseded != "":
		// Another version became current between the listing and our rewrite: list again
		// so that it and the version our rewrite superseded are seen as non-current.
		var err error
		if candidates, err = objectstore.VersionsOf(ctx, ls.Versioned, key); err != nil {
			return err
		}
	}
	var live []objectstore.Version
	var prior *objectstore.Version // the version our rewrite superseded: it held what the rewrite removed
	for _, v := range candidates {
		if v.Latest || v.DeleteMarker || skip(v) {
			live = append(live, v)
			continue
		}
		if v.ID == superseded {
			prior = &v
			continue
		}
		held, err := holds(v)
		switch {
		case errors.Is(err, rows.ErrMalformed) || errors.Is(err, objectstore.ErrNotFound):
			live = append(live, v)
			continue
		case err != nil:
			return err
		}
		if !held {
			live = append(live, v)
			continue
		}
		if err := ls.Versioned.DeleteVersion(ctx, key, v.ID); err != nil {
			return err
		}
		deleted(v)
	}
	if prior == nil {
		return sv.flush(ctx, key, live)
	}
	// The summary of what remains is stored while the superseded version is deleted.
	var g errgroup.Group
	g.Go(func() error { return sv.flush(ctx, key, live) })
	err := ls.Versioned.DeleteVersion(ctx, key, prior.ID)
	if ferr := g.Wait(); err == nil {
		err = ferr
	}
	if err == nil {
		deleted(*prior)
	}
	return err
}

// objectName names key as its location and the rest of its key, for locks (never for
// reports or errors: it holds the name).
func objectName(l location, key string) string {
	return l.name + strings.TrimPrefix(key, l.prefix)
}

// rewriteCurrent applies p to the current object of key, streaming it once: the rewrite is
// conditional on the version read and is abandoned (nothing written) when p changes no
// row. It returns the rows changed and, when it rewrote the object, the version it
// superseded ("-" when the bucket has no versions) and what it wrote. Rewrites of one
// object within this process take turns, so concurrent erasures of several subjects do not
// abort each other's conditional writes. The summaries of the versions read and written go
// to sv.
func (p objectPass) rewriteCurrent(ctx context.Context, b objectstore.Bucket, key string, sv summaryIndex) (int, string, objectstore.Written, error) {
	obj, err := b.Get(ctx, key)
	if errors.Is(err, objectstore.ErrNotFound) {
		return 0, "", objectstore.Written{}, nil
	}
	if err != nil {
		return 0, "", objectstore.Written{}, err
	}
	defer obj.Body.Close()
	var n int
	m, ix := p.m, (*indexer)(nil)
	if p.index {
		m, ix = sv.indexing(p.m, key)
	}
	wr, err := rewriteObject(ctx, b, key, obj, sv, ix, func(r io.Reader, w io.Writer) (bool, error) {
		var err error
		n, err = p.apply(key, r, w, m)
		return n > 0, err
	})
	if errors.Is(err, errUnchanged) {
		return 0, "", objectstore.Written{}, nil
	}
	if err != nil {
		return 0, "", objectstore.Written{}, err
	}
	superseded := obj.VersionID
	if superseded == "" {
		superseded = "-"
	}
	return n, superseded, wr, nil
}

// rewriteObject replaces obj, the current object of key, with what fn writes while it
// reads obj's content, conditionally on obj's version; fn reports whether it changed
// anything, and unchanged content is not written (errUnchanged). The summary of the
// version read (when it had none) and of the version written are recorded in sv; ix, when
// fn's filter records into it, collects the written version's values (view.writer).
func rewriteObject(ctx context.Context, b objectstore.Bucket, key string, obj *objectstore.Object, sv summaryIndex, ix *indexer, fn func(r io.Reader, w io.Writer) (bool, error)) (objectstore.Written, error) {
	body, readDone := sv.reader(key, obj)
	var writeDone func(error, objectstore.Written)
	read := false
	wr, err := objectstore.Write(ctx, b, key, obj, func(w io.Writer) error {
		w, writeDone = sv.writer(key, obj, w, ix)
		changed, err := fn(body, w)
		read = true
		readDone(err)
		if err == nil && !changed {
			return errUnchanged
		}
		return err
	})
	if !read {
		readDone(errors.New("not read"))
	}
	if writeDone != nil {
		writeDone(err, wr)
	}
	return wr, err
}

// countObject counts the rows m matches in the current object of key; with a nil m it
// only settles that the object is a dataset and counts 1. The summary of the version read
// goes to sv.
func countObject(ctx context.Context, b objectstore.Bucket, key string, m *matcher, sv summaryIndex, lim Limits) (int, error) {
	obj, err := b.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	return countRead(key, obj, m, sv, lim)
}

func countRead(key string, obj *objectstore.Object, m *matcher, sv summaryIndex, lim Limits) (int, error) {
	defer obj.Body.Close()
	body, done := sv.reader(key, obj)
	n, err := count(key, body, m, lim)
	done(err)
	return n, err
}

func count(key string, body io.Reader, m *matcher, lim Limits) (int, error) {
	if m == nil {
		return 1, rows.Probe(key, body, lim)
	}
	return rewrite(key, body, nil, m, lim)
}

// countVersion counts the rows m matches in one version (the current one by key, so that
// the "null" version of an unversioned bucket needs no version id).
func countVersion(ctx context.Context, vb objectstore.Versioned, v objectstore.Version, m *matcher, sv summaryIndex, lim Limits) (int, error) {
	if v.Latest {
		return countObject(ctx, vb, v.Key, m, sv, lim)
	}
	obj, err := vb.GetVersion(ctx, v.Key, v.ID)
	if err != nil {
		return 0, err
	}
	return countRead(v.Key, obj, m, sv, lim)
}

// isDataset reports whether key, listed in ls, is a dataset for a tenant erasure: by its
// extension, or else by the content of its newest version that holds data. It returns a
// malformed error when it is not.
func isDataset(ctx context.Context, l location, ls objectstore.Listing, key string) error {
	if rows.KnownExtension(key) {
		return nil
	}
	if ls.Versioned == nil {
		_, err := countObject(ctx, l.bucket, key, nil, noSummaries{}, l.lim)
		return err
	}
	for _, v := range ls.Versions[key] { // newest first
		if !v.DeleteMarker {
			_, err := countVersion(ctx, ls.Versioned, v, nil, noSummaries{}, l.lim)
			return err
		}
	}
	return nil // only delete markers
}

// tenantItems counts the objects and versions of key that hold data, if it is a dataset.
func tenantItems(ctx context.Context, l location, ls objectstore.Listing, key string) (int, error) {
	if err := isDataset(ctx, l, ls, key); err != nil {
		return 0, err
	}
	if ls.Versioned == nil {
		return 1, nil
	}
	n := 0
	for _, v := range ls.Versions[key] {
		if !v.DeleteMarker {
			n++
		}
	}
	return n, nil
}

// tenantData counts every dataset object of l and its older versions and, with drop,
// deletes them, every version and delete marker included. Objects that are no datasets are
// left as they are (Verify reports them).
func tenantData(ctx context.Context, l location, drop bool) (c counts, err error) {
	ls, err := inventoryOf(ctx, l)
	c.versioned, c.excluded = ls.Versioned != nil, ls.Excluded
	if err != nil {
		return c, err
	}
	sv := l.index(&matcher{}, nil, false)
	for _, key := range ls.Keys {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		switch err := isDataset(ctx, l, ls, key); {
		case errors.Is(err, rows.ErrMalformed) || errors.Is(err, objectstore.ErrNotFound):
			continue
		case err != nil:
			return c, err
		}
		if drop {
			if err := sv.dropSummary(ctx, key); err != nil {
				return c, err
			}
		}
		if ls.Versioned == nil {
			if drop {
				if err := l.bucket.Delete(ctx, key); err != nil {
					return c, err
				}
			}
			c.current++
			continue
		}
		for _, v := range ls.Versions[key] {
			if drop {
				if err := ls.Versioned.DeleteVersion(ctx, key, v.ID); err != nil {
					return c, err
				}
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

// remaining counts what of the subject (m) or, with a nil m, of the tenant is left in l,
// and what it could not examine there.
func remaining(ctx context.Context, l location, m *matcher) (c counts, err error) {
	ls, err := inventoryOf(ctx, l)
	c.versioned, c.excluded = ls.Versioned != nil, ls.Excluded
	if err != nil || m != nil && m.empty() {
		return c, err
	}
	check := func(key, what string, read func() (int, error)) error {
		n, err := read()
		switch {
		case errors.Is(err, objectstore.ErrNotFound):
			return nil // gone since the listing
		case errors.Is(err, rows.ErrMalformed):
			c.unexamined = append(c.unexamined, l.display(key)+what+": "+reason(err))
			return nil
		case err != nil:
			return err
		}
		c.current += int64(n)
		return nil
	}
	sv := l.index(m, nil, true)
	for _, key := range ls.Keys {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		if m == nil { // tenant scope: every dataset object or version left counts
			if err := check(key, "", func() (int, error) { return tenantItems(ctx, l, ls, key) }); err != nil {
				return c, err
			}
			continue
		}
		if ls.Versioned == nil {
			if !sv.skip(ctx, key, ls.Current(key), false) {
				if err := check(key, "", func() (int, error) { return countObject(ctx, l.bucket, key, m, sv, l.lim) }); err != nil {
					return c, err
				}
			}
			if err := sv.flush(ctx, key, ls.Live(key)); err != nil {
				return c, err
			}
			continue
		}
		for _, v := range ls.Versions[key] {
			if v.DeleteMarker || sv.skip(ctx, key, v, false) {
				continue
			}
			what := ""
			if !v.Latest {
				what = " (an older version)"
			}
			if err := check(key, what, func() (int, error) { return countVersion(ctx, ls.Versioned, v, m, sv, l.lim) }); err != nil {
				return c, err
			}
		}
		if err := sv.flush(ctx, key, ls.Live(key)); err != nil {
			return c, err
		}
	}
	return c, nil
}

// reason is the part of a malformed error after its sentinel, with anything personal data
// patterns find masked (a decoder's message may quote a value).
func reason(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, rows.ErrMalformed.Error()+": "); i >= 0 {
		msg = msg[i+len(rows.ErrMalformed.Error())+2:]
	}
	return pii.Mask(msg)
}

// objectLocks serialises rewrites of one object within the process.
var objectLocks keylock.Locks
