// Package awsclient holds what Lethe's AWS SDK clients (DynamoDB, S3) share: an HTTP
// client that keeps enough idle connections for the calls a service makes at once, and
// the count of those calls.
package awsclient

import (
	"context"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/middleware"
)

// IdleConns is how many idle connections to one endpoint an HTTP client keeps: as many as
// the records a service handles at once by default (consumer.DefaultMaxInFlight), each
// making one call at a time. The SDK's default keeps 10, so a service with more calls in
// flight closes a connection after most calls and opens a new one for the next (a TCP and,
// against AWS, a TLS handshake each): an aggregator on DynamoDB left about three
// connections per erasure behind in TIME_WAIT.
const IdleConns = 256

// LoadConfig loads the SDK's default configuration (environment, shared files, instance
// role) with HTTPClient and the backend call counter (CountCalls).
func LoadConfig(ctx context.Context) (aws.Config, error) {
	return awsconfig.LoadDefaultConfig(ctx, awsconfig.WithHTTPClient(HTTPClient()),
		awsconfig.WithAPIOptions([]func(*middleware.Stack) error{CountCalls}))
}

// HTTPClient is the SDK's default HTTP client keeping IdleConns idle connections per host.
func HTTPClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = IdleConns
		t.MaxIdleConnsPerHost = IdleConns
	})
}
