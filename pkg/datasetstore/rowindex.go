package datasetstore

import (
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/pkg/objectstore"
)

// A row index lets Find count the rows of a version this process wrote without reading
// it. While a rewrite filters a CSV or TSV object, it records, for every row it keeps, the
// values it asked the matcher about, in order (the subject columns', then the session
// columns'): since none of them matched, that is every question a filter of the written
// version would ask of any matcher. Replaying them against a matcher therefore answers as
// filtering the written bytes would: the same rows, attributed to the same subjects of a
// batch. The index is kept in the process only, for the latest version of each object the
// process wrote, under the version id, the ETag and the scope (tenant and columns) of the
// summary of that version. The next rewrite of the object by this process replaces it, and
// a find that lists another version as current drops it, so the raw values it holds live
// in memory only until the process next rewrites or finds in the object after another
// process erased from it (a listing made before the index was kept does not drop it: it
// may predate the version the index describes).

// Bounds: an object with more values than maxIndexValues, or more than maxIndexBytes of
// them, is not indexed; the indexes of a Store hold at most maxIndexedValues values (about
// 80 MB of 30-byte identifiers), all dropped when a new one would pass it.
const (
	maxIndexValues   = 1 << 20
	maxIndexBytes    = 64 << 20
	maxIndexedValues = 1 << 21
)

// rowIndex is the matcher questions of every row of one version.
type rowIndex struct {
	versionID, etag, scope string
	at                     time.Time // when it was kept

	arena   string   // the values, back to back
	ends    []uint32 // per value, its end in arena
	session []bool   // per value, whether it was asked as a session value
	rows    []uint32 // per row, the end of its values in ends

	tally   *tally // of the version's summary, nil when a rewrite took it (tally.go)
	tallied int    // the tally's size when x was made
}

// values is how many values and prefixes x holds.
func (x *rowIndex) values() int { return len(x.ends) + x.tallied }

func (x *rowIndex) value(v int) string {
	start := uint32(0)
	if v > 0 {
		start = x.ends[v-1]
	}
	return x.arena[start:x.ends[v]]
}

// count replays every row of x against m and returns the rows m matches, as filter would.
func (x *rowIndex) count(m *matcher) int {
	n, first := 0, 0
	for _, end := range x.rows {
		for v := first; v < int(end); v++ {
			if s := x.value(v); x.session[v] && m.session(s) || !x.session[v] && m.subject(s) {
				n++
				break
			}
		}
		first = int(end)
	}
	return n
}

// indexer records, while a CSV or TSV filter rewrites an object, what the process keeps
// of the version it writes: the questions the filter asks of the matcher about each row it
// keeps (the row index) and, with sum set, the values of those rows for the version's
// summary, so that the summary need not parse the written bytes again (view.writer). With
// base, the tally of the version filtered, sum collects the values of the rows dropped
// instead, and the summary is base without them.
type indexer struct {
	sum     *collector      // the kept rows' values (with base: the dropped rows'), as the summary's scan collects them
	base    *tally          // the version filtered's, taken from its row index
	next    *tally          // the written version's, once its summary was made
	csv     bool            // a CSV or TSV filter records into it (other formats' filters ask too, unrecorded)
	claimed bool            // the filter collects into sum: the written bytes need no scan
	arena   strings.Builder // String does not copy: the row index keeps it as is
	ends    []uint32
	session []bool
	rows    []uint32
	pending []string // the values asked about the row in progress
	sess    []bool   // idem, whether each was a session value
	over    bool     // too many values: no index
	done    bool     // the filter went through the whole object
}

// newIndexer returns an indexer sized for an object like like (nil: no hint), such as the
// row index of the version a rewrite is about to filter, so that recording the written
// version, which is about as large, does not grow its buffers step by step.
func newIndexer(like *rowIndex) *indexer {
	ix := &indexer{}
	if like != nil {
		ix.arena.Grow(len(like.arena))
		ix.ends = make([]uint32, 0, len(like.ends))
		ix.session = make([]bool, 0, len(like.session))
		ix.rows = make([]uint32, 0, len(like.rows))
	}
	return ix
}

func (ix *indexer) ask(session bool, v string) {
	if ix.csv {
		ix.pending, ix.sess = append(ix.pending, v), append(ix.sess, session)
	}
}

// Claim reports that a CSV or TSV filter records its rows and collects the summary's
// values of every row it keeps (called before it writes anything).
func (ix *indexer) Claim() { ix.csv, ix.claimed = true, ix.sum != nil }

// Kept ends a row the filter kept, recording its questions and, when claimed without a
// base, collecting its values as the summary's scan of the written row would
// (summaries.build): the subject columns' values, the session columns' values, and the
// mention tokens of every other field. Dropped ends a row it removed (whose questions
// stopped at the first that matched), collecting its values when claimed with a base.
func (ix *indexer) Kept(fields []string, subj, sess []int) {
	if ix.claimed && ix.base == nil {
		ix.sum.row(fields, subj, sess)
	}
	if len(ix.ends)+len(ix.pending) > maxIndexValues || ix.arena.Len() > maxIndexBytes {
		ix.over = true
	}
	if !ix.over {
		for i, v := range ix.pending {
			ix.arena.WriteString(v)
			ix.ends = append(ix.ends, uint32(ix.arena.Len()))
			ix.session = append(ix.session, ix.sess[i])
		}
		ix.rows = append(ix.rows, uint32(len(ix.ends)))
	}
	ix.reset()
}

func (ix *indexer) Dropped(fields []string, subj, sess []int) {
	if ix.claimed && ix.base != nil {
		ix.sum.row(fields, subj, sess)
	}
	ix.reset()
}

// Done reports that the filter went through the whole object.
func (ix *indexer) Done() { ix.done = true }

func (ix *indexer) reset() { ix.pending, ix.sess = ix.pending[:0], ix.sess[:0] }

// index returns what ix recorded as the index of the version w, or nil when the filter
// did not go through a whole object.
func (ix *indexer) index(w objectstore.Written, scope string) *rowIndex {
	if ix == nil || !ix.done || ix.over {
		return nil
	}
	return &rowIndex{versionID: normVersion(w.VersionID), etag: normETag(w.Token), scope: scope,
		arena: ix.arena.String(), ends: ix.ends, session: ix.session, rows: ix.rows, tally: ix.next, tallied: ix.next.size()}
}
