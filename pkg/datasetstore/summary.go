package datasetstore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lethe-erasure/lethe/pkg/datasetstore/rows"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Summaries (WithSummaries) let an erasure skip the objects and versions of an S3 location
// that do not hold the subject.
//
// For each version of a dataset object (identified by its version id and ETag) a summary
// holds three sets of keyed pseudonyms, never a raw value: of every value the subject
// columns hold (subject.Key.Pseudonym of the tenant and the value), of every value the
// session columns hold (SessionPseudonym), and of every mention candidate of the object's
// strings (Pseudonym; see mentionTokens). Each pseudonym is kept as its first 8 bytes: two
// values that share them only cost a read. The sets are built by the mention scanner in
// counting mode with a matcher and a finder that collect instead of compare, so they see
// exactly the values the row erasure and the mention scan compare.
//
// A version is skipped (not read) only when its summary is valid — same version id, same
// ETag, built for the same tenant, columns and key (the scope) — and holds none of the
// request's pseudonyms. Anything else is read in full: a missing, unreadable, stale or
// foreign summary, a summary of another format version, an object too large or too
// malformed to summarise (it is read every time). Reading a version without a valid
// summary builds one from the same bytes (a read while this process rewrites the object
// from another version waits for the rewrite's summary instead); a rewrite builds the
// summary of the version it writes from what it uploads (for CSV and TSV, from the rows
// its filter keeps, collected as they are written; else by scanning the bytes), computing
// keyed hashes only for values the process has not summarised lately (prefixMemo).
// Version content never changes under a version id and ETag, so a summary is either valid
// for exactly those bytes or ignored. Only erasures store summaries; Verify, Count and Find
// keep what they build in the process cache, so checking a store never writes to it. Two deleters writing the summary of one object at
// once can lose each other's entries, which only costs a read.
//
// The summaries of a bucket live in the same bucket under summaryRoot, one object per
// dataset object, named by a keyed hash of its key (so the name reveals no key); listings
// of dataset locations never include them. Each stored summary carries an HMAC-SHA-256
// (summaryMAC) under a key derived from the pseudonym key (subject.Key.Derive, label
// summaryLabel; never stored), over the dataset object's key and every field of the
// summary: a summary whose MAC does not verify (forged, altered, moved to another object,
// made under another key, or of the format version before MACs) is treated as missing, so
// its object is read, never trusted. A summary larger than maxSummaryBytes is ignored too. A summary keeps only the entries of versions
// that still exist; in a versioned bucket its own older versions are deleted after each
// write, so no pseudonym of a deleted row outlives the erasure in a summary.
//
// Mentions: an identifier holding white space or one of the delimiters ( " ' ( ) [ ] { }
// < > , ; = ) cannot be told absent by the token sets, so a mention scan for such a
// subject reads every object, as without summaries.
// summaryRoot is the key prefix of the summaries in each bucket.
const summaryRoot = ".lethe/summary/"

// Format of a summary object (version 2: authenticated).
const (
	summaryFormat  = "lethe.dataset-summary"
	summaryVersion = 2
	summaryLabel   = "lethe-dataset-summary-v1" // derives the summaries' MAC key
)

// maxSummaryBytes bounds what reading one stored summary holds.
const maxSummaryBytes = 64 << 20

// Bounds: an object with more distinct values than maxSummaryValues is not summarised;
// a summary keeps at most maxSummaryEntries versions.
const (
	maxSummaryValues  = 1 << 21
	maxSummaryEntries = 64
)

// Option configures a Store.
type Option func(*Store)

// WithKey makes the Store's reports name objects by references keyed by key
// (deletion.ItemNames); without it they name objects by their shape alone.
func WithKey(key subject.Key) Option {
	return func(s *Store) { s.names = deletion.NewItemNames(key) }
}

// WithSummaries makes the Store keep per-object summaries of keyed pseudonyms (made with
// key) beside S3 datasets and skip the objects and versions whose summary shows they do
// not hold the subject. Directory locations are always read in full. It implies
// WithKey(key).
func WithSummaries(key subject.Key) Option {
	return func(s *Store) {
		s.names = deletion.NewItemNames(key)
		s.sum = &summaries{key: key, mac: key.Derive(summaryLabel), cache: map[string][]entry{}, written: map[string]objectstore.Written{}, rewrites: map[string]*rewriteInProgress{}, memo: newPrefixMemo(), rows: map[string]*rowIndex{}}
	}
}

// summaries is the Store's summary state: the key and an in-process cache of entries.
// Entries are valid for immutable content, so the cache never needs invalidating.
type summaries struct {
	key      subject.Key
	mac      []byte // the key of the stored summaries' MACs
	mu       sync.Mutex
	cache    map[string][]entry // bucket name, NUL, summary name -> entries
	size     int
	written  map[string]objectstore.Written // idem -> the summary version this process wrote last
	rewrites map[string]*rewriteInProgress  // idem -> the rewrite of its object this process is making
	memo     *prefixMemo
	rows     map[string]*rowIndex // idem -> the row index of the version this process wrote last
	indexed  int                  // values held by rows
}

// rewriteInProgress is a rewrite of an object in progress: from is the ETag of the version
// it read, done is closed once the summary of the version it writes is cached (or cannot
// be).
type rewriteInProgress struct {
	from string
	done chan struct{}
}

// rewriting records that this process is rewriting the object of summary id from the
// version with ETag from, until the returned function is called.
func (s *summaries) rewriting(id, from string) (end func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rewrites[id] != nil {
		return func() {}
	}
	r := &rewriteInProgress{from: normETag(from), done: make(chan struct{})}
	s.rewrites[id] = r
	return func() {
		s.mu.Lock()
		delete(s.rewrites, id)
		s.mu.Unlock()
		close(r.done)
	}
}

// awaitRewrite waits for the rewrite of the object of summary id this process is making,
// if any, unless it read the version with ETag etag: a version read while its object is
// being rewritten from another one is most likely the version being written, whose
// summary the rewrite is about to cache. It reports whether it waited.
func (s *summaries) awaitRewrite(id, etag string) bool {
	s.mu.Lock()
	r := s.rewrites[id]
	s.mu.Unlock()
	if r == nil || r.from == normETag(etag) {
		return false
	}
	<-r.done
	return true
}

// entry is the summary of one version of an object.
type entry struct {
	VersionID string `json:"version_id"`
	ETag      string `json:"etag"`
	Scope     string `json:"scope"`
	IDs       []byte `json:"ids"`      // sorted 8-byte big-endian pseudonym prefixes
	Sessions  []byte `json:"sessions"` // idem
	Mentions  []byte `json:"mentions"` // idem
}

// summaryDoc is the stored summary of one object.
type summaryDoc struct {
	Format  string  `json:"format"`
	Version int     `json:"version"`
	KeyID   string  `json:"key_id"`
	Entries []entry `json:"entries"`
	MAC     string  `json:"mac"` // hex summaryMAC
}

func (e entry) is(versionID, etag, scope string) bool {
	return e.VersionID == normVersion(versionID) && e.ETag == normETag(etag) && e.Scope == scope
}

// normVersion names the version of an unversioned object "null", as S3 lists it.
func normVersion(id string) string {
	if id == "" {
		return "null"
	}
	return id
}

func normETag(t string) string { return strings.Trim(t, `"`) }

// has reports whether the sorted set holds one of vs.
func has(set []byte, vs []uint64) bool {
	n := len(set) / 8
	for _, v := range vs {
		lo, hi := 0, n
		for lo < hi {
			mid := (lo + hi) / 2
			switch x := binary.BigEndian.Uint64(set[mid*8:]); {
			case x == v:
				return true
			case x < v:
				lo = mid + 1
			default:
				hi = mid
			}
		}
	}
	return false
}

// collector gathers the raw values of one object while its summary is built, each with
// how many times the object's rows hold it (a tally's counts, tally.go); they never leave
// the process (only their pseudonyms are stored).
type collector struct {
	ids, sessions, mentions map[string]int32
	n                       int
	over                    bool
}

func newCollector() *collector {
	return &collector{ids: map[string]int32{}, sessions: map[string]int32{}, mentions: map[string]int32{}}
}

func (c *collector) add(set map[string]int32, v string) {
	if c.over {
		return
	}
	n := set[v]
	if n == 0 {
		if c.n++; c.n > maxSummaryValues {
			c.over = true
		}
	}
	set[v] = n + 1
}

func (c *collector) mention(s string) { rows.MentionTokens(s, func(t string) { c.add(c.mentions, t) }) }

// row collects one CSV row whose subject and session columns are at subj and sess, as
// the mention scanner in counting mode does: every value of those columns, and the mention
// tokens of every other field.
func (c *collector) row(fields []string, subj, sess []int) {
	for _, i := range subj {
		c.add(c.ids, fields[i])
	}
	for _, i := range sess {
		c.add(c.sessions, fields[i])
	}
	for i, v := range fields {
		if !slices.Contains(subj, i) && !slices.Contains(sess, i) {
			c.mention(v)
		}
	}
}

// errTooLarge reports an object with too many distinct values to summarise.
var errTooLarge = errors.New("too many distinct values to summarise")

// scopeOf is the scope of the summaries of tenant under the columns of m: a keyed hash,
// so that a summary built for other columns, another tenant or another key is ignored.
func (s *summaries) scopeOf(tenant string, m *matcher) string {
	return s.key.Fingerprint(tenant, strings.Join(m.subjectCols, "\x00"), strings.Join(m.sessionCols, "\x00"), "dataset-summary/1")[:32]
}

// nameOf is the key of the summary of the object key.
func (s *summaries) nameOf(key string) string {
	return summaryRoot + s.key.Fingerprint("dataset-summary-name", key, "", "")[:40] + ".json"
}

// build summarises the dataset key read from r for the tenant and columns of m, within lim.
func (s *summaries) build(key string, r io.Reader, tenant string, m *matcher, lim Limits) (entry, error) {
	c := newCollector()
	cm := &matcher{subjectCols: m.subjectCols, sessionCols: m.sessionCols, collect: c}
	if _, err := scanMentions(key, r, nil, cm, &rows.Finder{Collect: c.mention}, "", lim); err != nil {
		return entry{}, err
	}
	e, _, err := s.entryOf(c, tenant, m, false)
	return e, err
}

// entryOf is the summary of the values c collected for the tenant and columns of m and,
// with counted, its tally.
func (s *summaries) entryOf(c *collector, tenant string, m *matcher, counted bool) (entry, *tally, error) {
	if c.over {
		return entry{}, nil, errTooLarge
	}
	ps, ns := s.prefixSets(c, tenant)
	var t *tally
	if counted {
		t = &tally{}
		for k := range ps {
			t.counts[k] = make(map[uint64]int32, len(ps[k]))
			for i, p := range ps[k] {
				t.counts[k][p] += ns[k][i]
			}
		}
	}
	var sets [3][]byte
	for k := range ps {
		out := ps[k]
		slices.Sort(out)
		out = slices.Compact(out)
		sets[k] = make([]byte, 8*len(out))
		for i, v := range out {
			binary.BigEndian.PutUint64(sets[k][8*i:], v)
		}
	}
	if t != nil {
		t.sets = sets
	}
	return s.entryWith(tenant, m, sets), t, nil
}

// entryAfter is the summary, and its tally, of the version a filter of base's version
// wrote, from the values gone collected of the rows it dropped; base is spent.
func (s *summaries) entryAfter(base *tally, gone *collector, tenant string, m *matcher) (entry, *tally, error) {
	if gone.over {
		return entry{}, nil, errTooLarge
	}
	t, err := base.minus(s.prefixSets(gone, tenant))
	if err != nil {
		return entry{}, nil, err
	}
	return s.entryWith(tenant, m, t.sets), t, nil
}

// entryWith is the summary entry of the tenant and columns of m with the sets of a tally's
// order (subject values, session values, mention tokens).
func (s *summaries) entryWith(tenant string, m *matcher, sets [3][]byte) entry {
	return entry{Scope: s.scopeOf(tenant, m), IDs: sets[0], Sessions: sets[1], Mentions: sets[2]}
}

// prefixSets returns the pseudonym prefixes of the values c collected, per set in a
// tally's order, each with the count c holds of its value.
func (s *summaries) prefixSets(c *collector, tenant string) (ps [3][]uint64, ns [3][]int32) {
	vals := [3]map[string]int32{c.ids, c.sessions, c.mentions}
	kinds := [3]byte{'p', 's', 'p'}
	prefix := [3]func(tenant, v string) uint64{s.key.PseudonymPrefix, s.key.SessionPseudonymPrefix, s.key.PseudonymPrefix}
	for k := range vals {
		ps[k], ns[k] = s.memo.prefixes(kinds[k], tenant, vals[k], prefix[k])
	}
	return ps, ns
}

// cached returns the cached entries of one summary.
func (s *summaries) cached(id string) []entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cache[id])
}

// remember adds es to the cached entries of one summary. Views of one object run
// concurrently (batches, Verify), so the cache keeps the union of what they learnt rather
// than the last view's list: the latest maxSummaryEntries entries per object, the whole
// cache dropped when it grows past its bound. Entries of versions deleted since only cost
// memory: a deleted version is never looked up again.
func (s *summaries) remember(id string, es []entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cache[id]
	merged := slices.Clone(old)
	for _, e := range es {
		if !slices.ContainsFunc(old, func(x entry) bool { return x.is(e.VersionID, e.ETag, e.Scope) }) {
			merged = append(merged, e)
		}
	}
	if n := len(merged) - maxSummaryEntries; n > 0 {
		merged = merged[n:]
	}
	s.size += len(merged) - len(old)
	if s.size > 4096 {
		clear(s.cache)
		clear(s.written)
		s.size = len(merged)
	}
	s.cache[id] = merged
}

// forget drops what the process knows of summary id (its object was deleted).
func (s *summaries) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.size -= len(s.cache[id])
	delete(s.cache, id)
	delete(s.written, id)
	s.dropIndex(id)
}

// keepIndex makes x the row index of the object of summary id (nil: none known).
func (s *summaries) keepIndex(id string, x *rowIndex) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropIndex(id)
	if x == nil {
		return
	}
	if s.indexed+x.values() > maxIndexedValues {
		clear(s.rows)
		s.indexed = 0
	}
	x.at = time.Now()
	s.rows[id] = x
	s.indexed += x.values()
}

// heldIndex returns the row index the process holds for summary id, whatever its version
// (a size hint), or nil.
func (s *summaries) heldIndex(id string) *rowIndex {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows[id]
}

// indexOf returns the row index of ver, the current version of the object of summary id
// as listed at listed, when this process holds one for scope. An index of another version
// is dropped when the listing is younger than the index: its version is no longer current.
func (s *summaries) indexOf(id string, ver objectstore.Version, scope string, listed time.Time) *rowIndex {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.rows[id]
	switch {
	case x == nil:
		return nil
	case x.versionID != normVersion(ver.ID) || x.etag != normETag(ver.Token):
		if listed.After(x.at) {
			s.dropIndex(id)
		}
		return nil
	case x.scope != scope:
		return nil
	}
	return x
}

// takeTally returns, for a rewrite of from, the current version of the object of summary
// id, the tally of from's row index under scope, removing it from the index so that no
// other rewrite spends it; nil when the process holds none. A rewrite that does not
// spend it gives it back (giveBack).
func (s *summaries) takeTally(id string, from *objectstore.Object, scope string) (*tally, *rowIndex) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.rows[id]
	if x == nil || x.tally == nil || x.scope != scope || x.versionID != normVersion(from.VersionID) || x.etag != normETag(from.Token) {
		return nil, nil
	}
	t := x.tally
	x.tally = nil
	return t, x
}

// giveBack returns to x, the row index of summary id, the tally taken from it, unless x
// has been replaced since.
func (s *summaries) giveBack(id string, x *rowIndex, t *tally) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows[id] == x && x.tally == nil {
		x.tally = t
	}
}

// dropIndex forgets the row index of summary id; s.mu is held.
func (s *summaries) dropIndex(id string) {
	if x := s.rows[id]; x != nil {
		s.indexed -= x.values()
		delete(s.rows, id)
	}
}

// lastWrite returns the version of summary id this process wrote last, if it knows one.
func (s *summaries) lastWrite(id string) (objectstore.Written, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.written[id]
	return w, ok
}

// wrote records wr as the version of summary id this process wrote last (the zero Written:
// none known).
func (s *summaries) wrote(id string, wr objectstore.Written) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wr.Token == "" {
		delete(s.written, id)
		return
	}
	s.written[id] = wr
}

// decodeSummary reads the stored summary of the dataset object key: its entries when its
// MAC verifies under mac, none otherwise (another format or version, no or a wrong MAC, a
// summary past maxSummaryBytes, entries of malformed sets).
func decodeSummary(r io.Reader, mac []byte, key string) []entry {
	var d summaryDoc
	if err := json.NewDecoder(io.LimitReader(r, maxSummaryBytes)).Decode(&d); err != nil {
		return nil
	}
	if d.Format != summaryFormat || d.Version != summaryVersion {
		return nil
	}
	got, err := hex.DecodeString(d.MAC)
	if err != nil || !hmac.Equal(got, summaryMAC(mac, key, d)) {
		return nil
	}
	return slices.DeleteFunc(d.Entries, func(e entry) bool {
		return len(e.IDs)%8 != 0 || len(e.Sessions)%8 != 0 || len(e.Mentions)%8 != 0
	})
}

// encodeSummary writes the summary of the dataset object key, authenticated under mac.
func encodeSummary(w io.Writer, mac []byte, key, keyID string, es []entry) error {
	d := summaryDoc{Format: summaryFormat, Version: summaryVersion, KeyID: keyID, Entries: es}
	d.MAC = hex.EncodeToString(summaryMAC(mac, key, d))
	return json.NewEncoder(w).Encode(d)
}

// summaryMAC is the HMAC-SHA-256 under mac of the dataset object key and every field of d
// but its MAC, each length-prefixed: format, version, key id, then per entry its version
// id, ETag, scope and three sets.
func summaryMAC(mac []byte, key string, d summaryDoc) []byte {
	h := hmac.New(sha256.New, mac)
	var b []byte
	part := func(p []byte) {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	part([]byte(key))
	part([]byte(d.Format))
	b = binary.AppendUvarint(b, uint64(d.Version))
	part([]byte(d.KeyID))
	b = binary.AppendUvarint(b, uint64(len(d.Entries)))
	for _, e := range d.Entries {
		part([]byte(e.VersionID))
		part([]byte(e.ETag))
		part([]byte(e.Scope))
		part(e.IDs)
		part(e.Sessions)
		part(e.Mentions)
		h.Write(b)
		b = b[:0]
	}
	h.Write(b)
	return h.Sum(nil)
}
