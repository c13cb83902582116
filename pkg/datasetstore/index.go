package datasetstore

import (
	"context"
	"io"
	"time"

	"github.com/lethe-erasure/lethe/pkg/datasetstore/rows"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
)

// summaryIndex is what one operation on one location uses of the summaries: which
// versions it may leave unread, and what it learns of the versions it reads and writes.
// It is used by one goroutine.
type summaryIndex interface {
	// skip reports whether the version ver of key cannot hold what is looked for: the
	// subject's rows, or with mentions its identifiers as mentions.
	skip(ctx context.Context, key string, ver objectstore.Version, mentions bool) bool
	// reader returns the body of obj to read and the function to call once it was read,
	// with the reader's error (nil on success).
	reader(key string, obj *objectstore.Object) (io.Reader, func(error))
	// indexing returns the matcher a rewrite of key filters with and the indexer it
	// records into (nil: none).
	indexing(m *matcher, key string) (*matcher, *indexer)
	// writer returns w for a rewrite of from, the current version of key, and the
	// function to call once the write is over, with its error and what was written.
	writer(key string, from *objectstore.Object, w io.Writer, ix *indexer) (io.Writer, func(error, objectstore.Written))
	// countKnown counts the rows m matches in ver, the current version of key as listed at
	// listed, without reading it; false when it cannot.
	countKnown(key string, ver objectstore.Version, listed time.Time, m *matcher) (int, bool)
	// flush stores what was learnt of key, whose versions are now live.
	flush(ctx context.Context, key string, live []objectstore.Version) error
	// dropSummary forgets key, whose object was deleted.
	dropSummary(ctx context.Context, key string) error
}

// index returns the summary index of l for the row matcher m and, for mention scans, the
// finder f: its view when l keeps summaries (readOnly: for Verify, Find and Count),
// noSummaries otherwise.
func (l location) index(m *matcher, f *rows.Finder, readOnly bool) summaryIndex {
	v := l.view(m, f)
	if v == nil {
		return noSummaries{}
	}
	v.readOnly = readOnly
	return v
}

// noSummaries is the index of a location without summaries: it skips nothing and learns
// nothing.
type noSummaries struct{}

func (noSummaries) skip(context.Context, string, objectstore.Version, bool) bool { return false }

func (noSummaries) reader(_ string, obj *objectstore.Object) (io.Reader, func(error)) {
	return obj.Body, func(error) {}
}

func (noSummaries) indexing(m *matcher, _ string) (*matcher, *indexer) { return m, nil }

func (noSummaries) writer(_ string, _ *objectstore.Object, w io.Writer, _ *indexer) (io.Writer, func(error, objectstore.Written)) {
	return w, func(error, objectstore.Written) {}
}

func (noSummaries) countKnown(string, objectstore.Version, time.Time, *matcher) (int, bool) {
	return 0, false
}

func (noSummaries) flush(context.Context, string, []objectstore.Version) error { return nil }

func (noSummaries) dropSummary(context.Context, string) error { return nil }
