// Package rows reads and rewrites the rows of one dataset object: CSV with a header row,
// TSV, JSONL, JSON arrays of objects, each possibly gzip-compressed, and Apache Parquet.
// One streaming walker per format asks a policy what to do with each row (keep, drop or
// redact): Rewrite drops the subject's rows, Mentions handles the rows that mention the
// subject's identifiers. Every reader applies the Limits.
package rows

// Match tells which rows belong to the subject: those with a value Subject accepts in one
// of SubjectCols, or a value Session accepts in one of SessionCols, compared after
// decoding. A column named by a dotted path (metadata.customer_id) names a nested field
// in JSON objects and Parquet groups; a flat field of that exact name matches too.
type Match struct {
	SubjectCols, SessionCols []string
	Subject, Session         func(v string) bool
	// Recorder, when set, follows a walk of a CSV or TSV dataset.
	Recorder CSVRecorder
}

// CSVRecorder follows a walk of a CSV or TSV dataset: Claim once its header was read,
// Kept or Dropped for each row, with its cells (valid during the call) and the positions
// of its subject and session columns, and Done once every row was read.
type CSVRecorder interface {
	Claim()
	Kept(fields []string, subj, sess []int)
	Dropped(fields []string, subj, sess []int)
	Done()
}
