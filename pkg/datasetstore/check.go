package datasetstore

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Check is the readiness check of the S3 buckets named by the inventory's dataset
// prefixes: each must answer HeadBucket.
func Check(client *s3.Client, inv *inventory.Inventory) metrics.Check {
	buckets := map[string]bool{}
	for _, st := range inv.OfKinds(Kind) {
		l, _ := LocatorsOf(st) // an invalid store has no buckets to check; Validate reports it
		for _, p := range l.Prefixes {
			if rest, ok := strings.CutPrefix(p, "s3://"); ok {
				b, _, _ := strings.Cut(rest, "/")
				buckets[b] = true
			}
		}
	}
	return metrics.Check{Name: "s3", Fn: func(ctx context.Context) error {
		var errs []error
		for b := range buckets {
			if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b)}); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}}
}

// OptionsFromEnv returns the Store's options from the environment: WithKey(key),
// WithLimits of LimitsFromEnv, and WithSummaries(key) unless LETHE_DATASET_SUMMARIES is
// "off" (summaries are on by default; off, every erasure reads every object and version).
// A malformed setting is an error.
func OptionsFromEnv(key subject.Key) ([]Option, error) {
	lim, err := LimitsFromEnv()
	if err != nil {
		return nil, err
	}
	opts := []Option{WithKey(key), WithLimits(lim)}
	if os.Getenv("LETHE_DATASET_SUMMARIES") != "off" {
		opts = append(opts, WithSummaries(key))
	}
	return opts, nil
}

// DirFromEnv is the root of directory datasets, LETHE_DATASET_DIR (none by default: prefixes
// that are no s3:// URL are then refused).
func DirFromEnv() string { return os.Getenv("LETHE_DATASET_DIR") }
