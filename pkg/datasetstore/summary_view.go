package datasetstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/pkg/datasetstore/rows"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
)

// view is the summaryIndex of an S3 location with summaries: the request's pseudonyms
// and the summaries loaded so far. A view is used by one goroutine.
type view struct {
	s      *summaries
	b      *objectstore.S3
	tenant string
	m      *matcher
	scope  string

	ids, sessions, mentions []uint64
	mentionsOK              bool // every identifier can be told absent by the token set
	docs                    map[string]*loaded
	lim                     Limits
	readOnly                bool // summaries built are kept in the process only, never stored
}

// loaded is one object's summary as this operation knows it.
type loaded struct {
	entries []entry
	stored  []entry // what the bucket held when fetched
	fetched bool    // read from the bucket (or found missing or unreadable)
	dirty   bool    // to be written
}

// view returns the summary view of l for the row matcher m and, for mention scans, the
// finder f (nil otherwise); nil when l keeps no summaries.
func (l location) view(m *matcher, f *rows.Finder) *view {
	b, ok := l.bucket.(*objectstore.S3)
	if l.sum == nil || m == nil || !ok {
		return nil
	}
	k := l.sum.key
	v := &view{s: l.sum, b: b, tenant: l.tenant, m: m, scope: l.sum.scopeOf(l.tenant, m), docs: map[string]*loaded{}, lim: l.lim}
	if m.batch != nil {
		for id := range m.batch.ids {
			v.ids = append(v.ids, k.PseudonymPrefix(l.tenant, id))
		}
		for s := range m.batch.sessions {
			v.sessions = append(v.sessions, k.SessionPseudonymPrefix(l.tenant, s))
		}
	} else {
		if m.id != "" {
			v.ids = append(v.ids, k.PseudonymPrefix(l.tenant, m.id))
		}
		for s := range m.sessions {
			v.sessions = append(v.sessions, k.SessionPseudonymPrefix(l.tenant, s))
		}
	}
	if f != nil {
		v.mentionsOK = true
		for _, id := range f.IDs {
			if strings.ContainsFunc(id, rows.IsSplit) {
				v.mentionsOK = false
			}
			v.mentions = append(v.mentions, k.PseudonymPrefix(l.tenant, id))
		}
	}
	return v
}

// readView is view for the read-only operations (Verify, Find, Count): what it summarises
// stays in the process's cache, so that checking a store never writes to it.
func (l location) readView(m *matcher, f *rows.Finder) *view {
	v := l.view(m, f)
	if v != nil {
		v.readOnly = true
	}
	return v
}

func (v *view) cacheID(key string) string { return v.b.Name() + "\x00" + v.s.nameOf(key) }

// doc returns what is known of key's summary, from the process cache at first.
func (v *view) doc(key string) *loaded {
	d := v.docs[key]
	if d == nil {
		d = &loaded{entries: v.s.cached(v.cacheID(key))}
		v.docs[key] = d
	}
	return d
}

// find returns the valid entry of one version of key, reading the stored summary once
// when the cache has none. A summary that cannot be read or authenticated is treated as
// missing.
func (v *view) find(ctx context.Context, key, versionID, etag string) (entry, bool) {
	d := v.doc(key)
	look := func() (entry, bool) {
		for _, e := range d.entries {
			if e.is(versionID, etag, v.scope) {
				return e, true
			}
		}
		return entry{}, false
	}
	if e, ok := look(); ok {
		return e, true
	}
	// another view of this process may have summarised the version since d was loaded
	for _, e := range v.s.cached(v.cacheID(key)) {
		d.merge(e)
	}
	if e, ok := look(); ok || d.fetched {
		return e, ok
	}
	v.fetch(ctx, key, d)
	return look()
}

// fetch merges the stored summary of key into d.
func (v *view) fetch(ctx context.Context, key string, d *loaded) {
	d.fetched = true
	obj, err := v.b.Get(ctx, v.s.nameOf(key))
	if err != nil {
		return
	}
	defer obj.Body.Close()
	d.stored = decodeSummary(obj.Body, v.s.mac, key)
	for _, e := range d.stored {
		d.merge(e)
	}
	v.s.remember(v.cacheID(key), d.entries)
}

// merge adds e unless an entry of the same version and scope is there.
func (d *loaded) merge(e entry) bool {
	for _, x := range d.entries {
		if x.is(e.VersionID, e.ETag, e.Scope) {
			return false
		}
	}
	d.entries = append(d.entries, e)
	return true
}

// skip reports whether the version ver of key can be left unread: its summary is valid
// and holds none of the request's pseudonyms (mentions: none of its identifiers as a
// mention candidate).
func (v *view) skip(ctx context.Context, key string, ver objectstore.Version, mentions bool) bool {
	if ver.Token == "" || ver.DeleteMarker || mentions && !v.mentionsOK {
		return false
	}
	e, ok := v.find(ctx, key, ver.ID, ver.Token)
	if !ok {
		return false
	}
	if mentions {
		return !has(e.Mentions, v.mentions)
	}
	return !has(e.IDs, v.ids) && !has(e.Sessions, v.sessions)
}

// add records the entry of a version just read or written.
func (v *view) add(key string, e entry) {
	d := v.doc(key)
	if d.merge(e) {
		d.dirty = true
		v.s.remember(v.cacheID(key), d.entries)
	}
}

// reader returns the body of obj to read and the function to call once it was read (with
// the reader's error, nil on success): when obj's version has no valid summary, the bytes
// read are summarised on the way and the summary recorded.
func (v *view) reader(key string, obj *objectstore.Object) (io.Reader, func(error)) {
	if obj.Token == "" || v.summarised(key, obj) {
		return obj.Body, func(error) {}
	}
	bl := v.start(key)
	return io.TeeReader(obj.Body, bl), func(err error) {
		if err == nil {
			_, err = io.Copy(bl, obj.Body) // what the reader left unread
		}
		if e, err := bl.finish(err); err == nil {
			e.VersionID, e.ETag = normVersion(obj.VersionID), normETag(obj.Token)
			v.add(key, e)
		}
	}
}

// summarised reports whether obj's version has a valid summary in v. While this process
// rewrites key from another version, obj is most likely the version being written: it
// waits for that rewrite's summary rather than building the same one a second time.
func (v *view) summarised(key string, obj *objectstore.Object) bool {
	d := v.doc(key)
	valid := func() bool {
		return slices.ContainsFunc(d.entries, func(e entry) bool { return e.is(obj.VersionID, obj.Token, v.scope) })
	}
	if valid() {
		return true
	}
	if !v.s.awaitRewrite(v.cacheID(key), obj.Token) {
		return false
	}
	for _, e := range v.s.cached(v.cacheID(key)) {
		d.merge(e)
	}
	return valid()
}

// writer returns w teed into a summary builder for a rewrite of from, the current version
// of key, and the function to call once the write is over (with its error and what was
// written): on success the summary of the new version is recorded. With ix, a CSV filter
// may collect the kept rows' values itself (indexer.Claim): the bytes written are then
// not scanned again, and when the process holds the tally of from, only the dropped rows'
// values are collected. After a successful write the row index ix recorded is kept
// (indexed).
func (v *view) writer(key string, from *objectstore.Object, w io.Writer, ix *indexer) (io.Writer, func(error, objectstore.Written)) {
	id := v.cacheID(key)
	end := v.s.rewriting(id, from.Token)
	bl := v.start(key)
	var taken *rowIndex
	if ix != nil {
		ix.sum, bl.ix = newCollector(), ix
		ix.base, taken = v.s.takeTally(id, from, v.scope)
	}
	return io.MultiWriter(w, bl), func(err error, wr objectstore.Written) {
		if err == nil {
			defer v.indexed(key, ix, wr) // once the rewrite ended
		}
		defer end()
		if err == nil && wr.Token == "" {
			err = errors.New("no etag")
		}
		e, err := bl.finish(err)
		switch {
		case err == nil && bl.claimed() && ix.base != nil:
			e, ix.next, err = v.s.entryAfter(ix.base, ix.sum, v.tenant, v.m)
		case err == nil && bl.claimed():
			e, ix.next, err = v.s.entryOf(ix.sum, v.tenant, v.m, true)
		case ix != nil && ix.base != nil: // not spent
			v.s.giveBack(id, taken, ix.base)
		}
		if err == nil {
			e.VersionID, e.ETag = normVersion(wr.VersionID), normETag(wr.Token)
			v.add(key, e)
		}
	}
}

// building summarises the bytes written to it in its own goroutine. Writes never fail, so
// a summary that cannot be built never fails the read or write it follows.
type building struct {
	pw   *io.PipeWriter
	done chan struct{}
	e    entry
	err  error
	ix   *indexer // of a rewrite whose filter may collect the values itself
}

// claimed reports whether the rewrite's filter collected the values itself: the bytes
// written were not scanned (Write dropped them).
func (bl *building) claimed() bool { return bl.ix != nil && bl.ix.claimed }

func (v *view) start(key string) *building {
	pr, pw := io.Pipe()
	bl := &building{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(bl.done)
		bl.e, bl.err = v.s.build(key, pr, v.tenant, v.m, v.lim)
		if n, _ := io.Copy(io.Discard, pr); n > 0 && bl.err == nil {
			bl.err = errors.New("bytes after the dataset")
		}
	}()
	return bl
}

func (bl *building) Write(p []byte) (int, error) {
	if !bl.claimed() {
		_, _ = bl.pw.Write(p)
	}
	return len(p), nil
}

// finish ends the input (err: it failed) and returns the summary built.
func (bl *building) finish(err error) (entry, error) {
	if err == nil {
		_ = bl.pw.Close()
	} else {
		_ = bl.pw.CloseWithError(err)
	}
	<-bl.done
	switch {
	case err != nil:
		return entry{}, err
	case bl.claimed() && !bl.ix.done:
		return entry{}, errors.New("the filter did not go through the whole object")
	case bl.claimed():
		return entry{}, nil
	}
	return bl.e, bl.err
}

// flush stores key's summary when it changed, keeping the entries of the versions in live
// (those of key that exist now). A summary left with no entry is deleted.
func (v *view) flush(ctx context.Context, key string, live []objectstore.Version) error {
	if v.docs[key] == nil {
		return nil
	}
	d := v.docs[key]
	alive := func(e entry) bool {
		for _, l := range live {
			if !l.DeleteMarker && e.VersionID == normVersion(l.ID) && e.ETag == normETag(l.Token) {
				return true
			}
		}
		return false
	}
	prune := func() {
		kept := d.entries[:0]
		for _, e := range d.entries {
			if alive(e) {
				kept = append(kept, e)
			} else {
				d.dirty = true
			}
		}
		d.entries = kept
	}
	prune()
	if !d.dirty {
		return nil
	}
	d.dirty = false
	if v.readOnly { // what it learnt stays in the process cache
		v.s.remember(v.cacheID(key), d.entries)
		return nil
	}
	id, name := v.cacheID(key), v.s.nameOf(key)
	write := func(w io.Writer) error { return encodeSummary(w, v.s.mac, key, v.s.key.ID(), d.entries) }
	if last, ok := v.s.lastWrite(id); ok && !d.fetched && len(d.entries) > 0 {
		// This process wrote the stored summary last, so the cache holds what it holds:
		// replace it on that condition, and delete the version it supersedes by id. Should
		// another process have written it since, merge what it holds, as below.
		v.capEntries(d)
		v.s.remember(id, d.entries)
		wr, err := v.b.Write(ctx, name, &objectstore.Object{Token: last.Token}, write)
		if err == nil {
			v.s.wrote(id, wr)
			d.stored = slices.Clone(d.entries)
			return v.dropVersion(ctx, name, last.VersionID)
		}
		if !errors.Is(err, objectstore.ErrConflict) && !errors.Is(err, objectstore.ErrNotFound) {
			return fmt.Errorf("summary: %w", err)
		}
	}
	if !d.fetched {
		v.fetch(ctx, key, d)
		prune()
	}
	v.capEntries(d)
	v.s.remember(id, d.entries)
	if len(d.entries) > 0 && sameEntries(d.entries, d.stored) { // the view only pruned entries the bucket no longer holds
		return nil
	}
	d.stored = slices.Clone(d.entries)
	if len(d.entries) == 0 {
		v.s.wrote(id, objectstore.Written{})
		return v.drop(ctx, name)
	}
	wr, err := v.b.Write(ctx, name, nil, write)
	if err != nil {
		v.s.wrote(id, objectstore.Written{})
		return fmt.Errorf("summary: %w", err)
	}
	v.s.wrote(id, wr)
	return v.pruneVersions(ctx, name, false)
}

// capEntries keeps the latest maxSummaryEntries entries of d.
func (v *view) capEntries(d *loaded) {
	if n := len(d.entries) - maxSummaryEntries; n > 0 {
		d.entries = d.entries[n:]
	}
}

// dropVersion deletes version id of the summary name, in a bucket that keeps versions.
func (v *view) dropVersion(ctx context.Context, name, id string) error {
	if id == "" || id == "null" {
		return nil
	}
	if err := v.b.DeleteVersion(ctx, name, id); err != nil && !errors.Is(err, objectstore.ErrNotFound) {
		return fmt.Errorf("summary: %w", err)
	}
	return nil
}

// sameEntries reports whether a and b hold the same versions' entries, in any order.
func sameEntries(a, b []entry) bool {
	if len(a) != len(b) {
		return false
	}
	for _, e := range a {
		if !slices.ContainsFunc(b, func(x entry) bool { return x.is(e.VersionID, e.ETag, e.Scope) }) {
			return false
		}
	}
	return true
}

// drop deletes the summary named name, every version included.
func (v *view) drop(ctx context.Context, name string) error {
	if err := v.b.Delete(ctx, name); err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	return v.pruneVersions(ctx, name, true)
}

// pruneVersions deletes the older versions of the summary name (all, with all set) in a
// bucket that keeps versions.
func (v *view) pruneVersions(ctx context.Context, name string, all bool) error {
	vs, err := objectstore.VersionsOf(ctx, v.b, name)
	if errors.Is(err, objectstore.ErrNoVersions) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	for _, ver := range vs {
		if ver.Latest && !all {
			continue
		}
		if err := v.b.DeleteVersion(ctx, name, ver.ID); err != nil {
			return fmt.Errorf("summary: %w", err)
		}
	}
	return nil
}

// dropSummary deletes the summary of key (a tenant erasure deleted the object).
func (v *view) dropSummary(ctx context.Context, key string) error {
	v.s.forget(v.cacheID(key))
	return v.drop(ctx, v.s.nameOf(key))
}

// indexing returns m recording into a new indexer (the written version's row index is
// then kept with indexed). The indexer is sized after the row index the process holds for
// key, if any.
func (v *view) indexing(m *matcher, key string) (*matcher, *indexer) {
	mi := *m
	mi.ix = newIndexer(v.s.heldIndex(v.cacheID(key)))
	return &mi, mi.ix
}

// indexed keeps what ix recorded as the row index of wr, the version of key just written
// (an ix that recorded no whole object drops the index the process held for key).
func (v *view) indexed(key string, ix *indexer, wr objectstore.Written) {
	if ix == nil {
		return
	}
	var x *rowIndex
	if wr.Token != "" {
		x = ix.index(wr, v.scope)
	}
	v.s.keepIndex(v.cacheID(key), x)
}

// countKnown counts the rows m matches in ver, the current version of key as listed at
// listed, from the row index this process keeps of it, reporting false when it keeps none.
func (v *view) countKnown(key string, ver objectstore.Version, listed time.Time, m *matcher) (int, bool) {
	x := v.s.indexOf(v.cacheID(key), ver, v.scope, listed)
	if x == nil {
		return 0, false
	}
	return x.count(m), true
}
