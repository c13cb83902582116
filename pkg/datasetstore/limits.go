package datasetstore

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/datasetstore/rows"
)

// Limits bound what reading one dataset object may hold in memory or decompress
// (rows.Limits). A zero field takes its default.
type Limits = rows.Limits

// Default limits.
const (
	DefaultMaxRecord       = rows.DefaultMaxRecord
	DefaultMaxDecompressed = rows.DefaultMaxDecompressed
	DefaultMaxParquet      = rows.DefaultMaxParquet
)

// WithLimits sets the Store's limits (zero fields keep their defaults).
func WithLimits(l Limits) Option {
	return func(s *Store) { s.lim = l.WithDefaults() }
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

// LimitsFromEnv reads the Limits from LETHE_DATASET_MAX_RECORD,
// LETHE_DATASET_MAX_DECOMPRESSED and LETHE_DATASET_MAX_PARQUET (bytes, or with a KiB, MiB
// or GiB suffix); an unset variable keeps its default, a malformed one is an error.
func LimitsFromEnv() (Limits, error) {
	var l Limits
	for _, v := range []struct {
		name string
		dst  *int64
	}{
		{"LETHE_DATASET_MAX_RECORD", &l.Record},
		{"LETHE_DATASET_MAX_DECOMPRESSED", &l.Decompressed},
		{"LETHE_DATASET_MAX_PARQUET", &l.Parquet},
	} {
		s := os.Getenv(v.name)
		if s == "" {
			continue
		}
		n, err := parseSize(s)
		if err != nil {
			return Limits{}, fmt.Errorf("%s: %w", v.name, err)
		}
		*v.dst = n
	}
	return l.WithDefaults(), nil
}
