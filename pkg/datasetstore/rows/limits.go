package rows

import (
	"errors"
	"fmt"
)

// Limits bound what reading one dataset object may hold in memory or decompress. Every
// reader of the package (Rewrite, Mentions, Probe and Sample) applies them. An object past a bound is malformed: unexamined, never
// rewritten, reported with the bound it passed. A zero field takes its default.
type Limits struct {
	// Record bounds one CSV or TSV record, JSONL line or JSON array element, and one
	// Parquet page once decompressed and decoded (hence each Parquet value) and a Parquet
	// footer. Default DefaultMaxRecord.
	Record int64
	// Decompressed bounds a gzip-compressed object once decompressed. Default
	// DefaultMaxDecompressed.
	Decompressed int64
	// Parquet bounds a Parquet object, which is read whole, and the pages its reader
	// holds at once (per row group, the largest page of each column with its dictionary).
	// Default DefaultMaxParquet.
	Parquet int64
}

// Default limits.
const (
	DefaultMaxRecord       = 16 << 20
	DefaultMaxDecompressed = 4 << 30
	DefaultMaxParquet      = 64 << 20
)

// WithDefaults is l with each zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.Record <= 0 {
		l.Record = DefaultMaxRecord
	}
	if l.Decompressed <= 0 {
		l.Decompressed = DefaultMaxDecompressed
	}
	if l.Parquet <= 0 {
		l.Parquet = DefaultMaxParquet
	}
	return l
}

// boundError reports content past one of the Limits. It is malformed content: the object
// is unexamined. Its message names the bound, never the content.
type boundError struct {
	what  string // what passed the bound: "a record", "line 3", "a parquet page"
	bound string // the bound: "16 MiB record"
}

func (e *boundError) Error() string {
	return fmt.Sprintf("%v: %s over the %s bound", ErrMalformed, e.what, e.bound)
}

func (e *boundError) Unwrap() error { return ErrMalformed }

func overRecord(what string, lim Limits) error {
	return &boundError{what: what, bound: SizeString(lim.Record) + " record"}
}

func overDecompressed(lim Limits) error {
	return &boundError{what: "the decompressed content", bound: SizeString(lim.Decompressed) + " decompressed"}
}

func overParquet(what string, lim Limits) error {
	return &boundError{what: what, bound: SizeString(lim.Parquet) + " parquet"}
}

// isBound reports whether err is a boundError.
func isBound(err error) bool {
	var be *boundError
	return errors.As(err, &be)
}

// SizeString writes n bytes in the largest binary unit that divides it.
func SizeString(n int64) string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
