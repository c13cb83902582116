package datasetstore

import (
	"io"

	"github.com/lethe-erasure/lethe/pkg/datasetstore/rows"
	"github.com/lethe-erasure/lethe/pkg/deletion"
)

// matcher decides whether a row belongs to the subject. Values are compared exactly after
// decoding: no substring, no case folding, no normalisation. Empty identifiers match
// nothing.
type matcher struct {
	subjectCols []string
	sessionCols []string
	id          string
	sessions    map[string]bool
	batch       *batchHits // set for a matcher of many subjects (batch.go)
	collect     *collector // set for a matcher that gathers every value to summarise it
	ix          *indexer   // set for a matcher whose questions a CSV filter records (rowindex.go)
}

func newMatcher(subjectCols, sessionCols []string, id string, sessions []string) *matcher {
	m := &matcher{subjectCols: subjectCols, sessionCols: sessionCols, id: id, sessions: map[string]bool{}}
	for _, s := range sessions {
		if s != "" {
			m.sessions[s] = true
		}
	}
	return m
}

// empty reports whether m can match nothing at all.
func (m *matcher) empty() bool {
	if m.batch != nil {
		return m.batch.empty(m)
	}
	return (m.id == "" || len(m.subjectCols) == 0) && (len(m.sessions) == 0 || len(m.sessionCols) == 0)
}

func (m *matcher) subject(v string) bool {
	if m.collect != nil {
		m.collect.add(m.collect.ids, v)
		return false
	}
	if m.ix != nil {
		m.ix.ask(false, v)
	}
	if m.batch != nil {
		return m.batch.hit(m.batch.ids, v)
	}
	return m.id != "" && v == m.id
}

func (m *matcher) session(v string) bool {
	if m.collect != nil {
		m.collect.add(m.collect.sessions, v)
		return false
	}
	if m.ix != nil {
		m.ix.ask(true, v)
	}
	if m.batch != nil {
		return m.batch.hit(m.batch.sessions, v)
	}
	return v != "" && m.sessions[v]
}

// rows is m as the row walkers ask it: its columns and its comparisons, and its indexer
// following a CSV or TSV walk.
func (m *matcher) rows() *rows.Match {
	r := &rows.Match{SubjectCols: m.subjectCols, SessionCols: m.sessionCols, Subject: m.subject, Session: m.session}
	if m.ix != nil {
		r.Recorder = m.ix
	}
	return r
}

// rewrite copies the dataset key, read from body, to w without the rows m matches and
// returns how many rows it dropped (rows.Rewrite).
func rewrite(key string, body io.Reader, w io.Writer, m *matcher, lim Limits) (int, error) {
	return rows.Rewrite(key, body, w, m.rows(), lim)
}

// scanMentions counts or, with a w, handles by policy the rows of the dataset key that
// mention f's identifiers (rows.Mentions).
func scanMentions(key string, body io.Reader, w io.Writer, m *matcher, f *rows.Finder, policy string, lim Limits) (rows.MentionScan, error) {
	return rows.Mentions(key, body, w, m.rows(), f, policy == MentionsErase, lim)
}

// newFinder returns the finder of the raw identifiers of subj.
func newFinder(subj deletion.Subject) *rows.Finder {
	return rows.NewFinder(append([]string{subj.ID}, subj.Sessions...)...)
}
