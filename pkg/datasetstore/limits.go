package datasetstore

import (
	"fmt"
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
