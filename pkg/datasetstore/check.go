package datasetstore

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
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
