package s3prefixstore

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
)

// Check is the readiness check of the buckets named by the inventory's s3prefix stores:
// each must answer HeadBucket.
func Check(client *s3.Client, inv *inventory.Inventory) metrics.Check {
	buckets := map[string]bool{}
	for _, st := range inv.OfKinds(Kind) {
		ts, _ := templates(st) // an invalid store has no bucket to check; Validate reports it
		for _, t := range ts {
			buckets[t.bucket] = true
		}
	}
	return metrics.Check{Name: "s3", Fn: func(ctx context.Context) error {
		var errs []error
		for b := range buckets {
			if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b)}); err != nil {
				errs = append(errs, wrap("head bucket", b, err))
			}
		}
		return errors.Join(errs...)
	}}
}
