package datasetstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Limits bound what reading one dataset object may hold in memory or decompress. Every
// reader of the package (the row filter, the mention scanner, the summary builder and
// discovery) applies them. An object past a bound is malformed: unexamined, never
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

// WithLimits sets the Store's limits (zero fields keep their defaults).
func WithLimits(l Limits) Option {
	return func(s *Store) { s.lim = l.withDefaults() }
}

func (l Limits) withDefaults() Limits {
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
	return fmt.Sprintf("%v: %s over the %s bound", errMalformed, e.what, e.bound)
}

func (e *boundError) Unwrap() error { return errMalformed }

func overRecord(what string, lim Limits) error {
	return &boundError{what: what, bound: sizeString(lim.Record) + " record"}
}

func overDecompressed(lim Limits) error {
	return &boundError{what: "the decompressed content", bound: sizeString(lim.Decompressed) + " decompressed"}
}

func overParquet(what string, lim Limits) error {
	return &boundError{what: what, bound: sizeString(lim.Parquet) + " parquet"}
}

// isBound reports whether err is a boundError.
func isBound(err error) bool {
	var be *boundError
	return errors.As(err, &be)
}

// sizeString writes n bytes in the largest binary unit that divides it.
func sizeString(n int64) string {
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

// parseSize reads a size in bytes, with an optional KiB, MiB or GiB suffix.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	shift := uint(0)
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, shift = strings.TrimSpace(rest), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("not a positive size in bytes (suffixes KiB, MiB, GiB)")
	}
	return n << shift, nil
}
