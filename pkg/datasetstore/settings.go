package datasetstore

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/datasetstore/rows"
	"github.com/lethe-erasure/lethe/pkg/s3env"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Settings declare the dataset deleter's store.
type Settings struct {
	Dir             string `env:"LETHE_DATASET_DIR" doc:"Root for datasets kept in a directory; empty: prefixes that are no s3:// URL are refused (standalone: its data directory's datasets)."`
	Summaries       string `env:"LETHE_DATASET_SUMMARIES" default:"on" doc:"off: read every dataset object and version on every erasure instead of skipping those whose summary shows they do not hold the subject."`
	MaxRecord       Size   `env:"LETHE_DATASET_MAX_RECORD" default:"16MiB" doc:"Bound on one CSV or TSV record, JSONL line, JSON array element or decoded Parquet page: bytes, or with a KiB, MiB or GiB suffix; an object past a bound is unexamined (the store FAILED), never rewritten."`
	MaxDecompressed Size   `env:"LETHE_DATASET_MAX_DECOMPRESSED" default:"4GiB" doc:"Bound on a gzip object once decompressed."`
	MaxParquet      Size   `env:"LETHE_DATASET_MAX_PARQUET" default:"64MiB" doc:"Bound on a Parquet object (read whole) and on the pages one of its row groups holds at once."`
}

// DeleterSettings are the dataset deleter's store settings: its S3 client's and the
// store's.
type DeleterSettings struct {
	S3      s3env.Settings
	Dataset Settings
}

// Validate checks LETHE_DATASET_SUMMARIES.
func (s Settings) Validate() error {
	if s.Summaries != "on" && s.Summaries != "off" {
		return fmt.Errorf("LETHE_DATASET_SUMMARIES %q: want on or off", s.Summaries)
	}
	return nil
}

// Limits are the bounds s declares.
func (s Settings) Limits() Limits {
	return Limits{Record: int64(s.MaxRecord), Decompressed: int64(s.MaxDecompressed), Parquet: int64(s.MaxParquet)}.WithDefaults()
}

// Store returns the Store s declares over client, its reports keyed by key: with s's
// limits, and with summaries unless they are off.
func (s Settings) Store(client *s3.Client, key subject.Key) *Store {
	opts := []Option{WithKey(key), WithLimits(s.Limits())}
	if s.Summaries != "off" {
		opts = append(opts, WithSummaries(key))
	}
	return New(client, s.Dir, opts...)
}

// Size is a size in bytes, written with an optional KiB, MiB or GiB suffix.
type Size int64

// UnmarshalText reads a positive size.
func (z *Size) UnmarshalText(b []byte) error {
	n, err := parseSize(string(b))
	if err != nil {
		return err
	}
	*z = Size(n)
	return nil
}

// MarshalText writes z in the largest binary unit that divides it, as UnmarshalText reads
// it.
func (z Size) MarshalText() ([]byte, error) {
	s := strings.TrimSuffix(rows.SizeString(int64(z)), " bytes")
	return []byte(strings.ReplaceAll(s, " ", "")), nil
}
