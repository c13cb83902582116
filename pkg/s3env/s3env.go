// Package s3env builds the S3 client of a store that reads S3 (datasets, document
// prefixes), so that only the deleters that use S3 link its SDK. Credentials and region
// come from the AWS default chain (AWS_REGION, AWS_PROFILE, web identity, instance roles);
// with an endpoint the client addresses buckets path-style.
package s3env

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/awsclient"
)

// Settings declare the S3 a deleter reads.
type Settings struct {
	Endpoint string `env:"LETHE_S3_ENDPOINT" doc:"S3-compatible endpoint (MinIO, tests); empty: AWS."`
}

// Client returns the S3 client s describes and logs its endpoint (no credentials) on log,
// which may be nil.
func (s Settings) Client(ctx context.Context, log *zap.Logger) (*s3.Client, error) {
	ac, err := awsclient.LoadConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("s3env: aws: %w", err)
	}
	if log != nil {
		log.Info("s3 client", zap.String("s3_endpoint", or(s.Endpoint, "aws")), zap.String("region", ac.Region))
	}
	return New(ac, s.Endpoint), nil
}

// New returns an S3 client over ac; a non-empty endpoint replaces AWS's and selects
// path-style addressing (MinIO, gofakes3).
func New(ac aws.Config, endpoint string) *s3.Client {
	return s3.NewFromConfig(ac, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
	})
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
