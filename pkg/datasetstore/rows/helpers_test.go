package rows

import (
	"io"
	"slices"
)

var testLimits = Limits{}.WithDefaults()

// newMatcher is the Match of the subject id and its sessions: exact comparisons, empty
// identifiers matching nothing.
func newMatcher(subjectCols, sessionCols []string, id string, sessions []string) *Match {
	return &Match{SubjectCols: subjectCols, SessionCols: sessionCols,
		Subject: func(v string) bool { return id != "" && v == id },
		Session: func(v string) bool { return v != "" && slices.Contains(sessions, v) }}
}

// filter is Rewrite of the decompressed dataset r of format f.
func filter(f format, r io.Reader, w io.Writer, m *Match, lim Limits) (int, error) {
	var e erasure
	err := walkFormat(f, r, w, m, &e, lim)
	return e.dropped, err
}
