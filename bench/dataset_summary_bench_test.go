package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// BenchmarkDatasetSummaries measures one subject's dataset Erase + Verify over 50 CSV
// objects of 2,000 rows (a versioned bucket on moto's server) where only the first
// object holds the subject, with and without per-object summaries. The summaries are
// built before the timer starts. Iteration i erases target i mod 1,000 (1,000 targets sit
// in the first object), so after 1,000 iterations the subject is absent everywhere.
func BenchmarkDatasetSummaries(b *testing.B) {
	key, err := subject.NewKey("bench", bytes.Repeat([]byte("k"), 32))
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name string
		opts []datasetstore.Option
	}{{"full-read", nil}, {"summaries", []datasetstore.Option{datasetstore.WithSummaries(key)}}} {
		b.Run(mode.name, func(b *testing.B) {
			ctx := context.Background()
			const bucket = "bench-datasets"
			c := testenv.S3(b, bucket).Client
			for o := range 50 {
				var sb strings.Builder
				sb.WriteString("customer_id,session_id,question\n")
				for r := range 2000 {
					id := fmt.Sprintf("by-%d-%d", o, r)
					if o == 0 && r < 1000 {
						id = fmt.Sprintf("target-%d", r)
					}
					fmt.Fprintf(&sb, "%s,sess-%s,what is the refund policy for order %d?\n", id, id, r)
				}
				k := fmt.Sprintf("acme/eval/d%02d.csv", o)
				if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: &k, Body: strings.NewReader(sb.String())}); err != nil {
					b.Fatal(err)
				}
			}
			st := inventory.Entry{Name: "datasets", Kind: datasetstore.Kind, Locators: inventory.Locators{
				"prefixes":        []string{"s3://" + bucket + "/{tenant}/eval/"},
				"subject_columns": []string{"customer_id"},
				"session_columns": []string{"session_id"},
			}}
			store := datasetstore.New(c, "", mode.opts...)
			if _, err := store.Count(ctx, st, deletion.Subject{Tenant: "acme", ID: "nobody"}); err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				s := deletion.Subject{Tenant: "acme", ID: fmt.Sprintf("target-%d", i%1000)}
				if _, err := store.Erase(ctx, st, s); err != nil {
					b.Fatal(err)
				}
				v, err := store.Verify(ctx, st, s)
				if err != nil || v.Remaining != 0 {
					b.Fatalf("verify = %+v, %v", v, err)
				}
			}
		})
	}
}
