package testenv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// S3Server is an in-memory gofakes3 served over HTTP on a loopback port: the real S3 wire
// protocol, object versions and delete markers included. With EnvS3 set it is a proxy of
// that S3 (see S3).
type S3Server struct {
	URL    string     // endpoint, e.g. http://127.0.0.1:40123
	Client *s3.Client // a client of URL with static credentials, path-style
	srv    *httptest.Server
}

// S3Options configure S3With.
type S3Options struct {
	Unversioned bool                            // leave versioning off (by default it is on in every bucket)
	Wrap        func(http.Handler) http.Handler // a shim in front of gofakes3, such as a fault injector
}

// S3 starts a gofakes3 server with the buckets created and versioning enabled on each. It
// is stopped when t ends.
//
// With EnvS3 set the server is that S3 instead, reached through a loopback proxy that
// gives every bucket the test names a name of its own on the server (name-<random>, in
// requests; responses carry the names the test used), so fixed bucket names do not
// collide; the buckets created through it are emptied and deleted when t ends.
func S3(t testing.TB, buckets ...string) *S3Server {
	t.Helper()
	return S3With(t, S3Options{}, buckets...)
}

// S3With is S3 with options. With EnvS3 set, Wrap stands in front of the proxy, and
// Unversioned leaves versioning off on the buckets created here and has the proxy answer
// version listings NotImplemented, as gofakes3 without versioning does.
func S3With(t testing.TB, o S3Options, buckets ...string) *S3Server {
	t.Helper()
	if ep := os.Getenv(EnvS3); ep != "" {
		return externalS3(t, ep, o, buckets)
	}
	var opts []gofakes3.Option
	if o.Unversioned {
		opts = append(opts, gofakes3.WithoutVersioning())
	}
	s := serveS3(t, gofakes3.New(s3mem.New(), opts...).Server(), o)
	createBuckets(t, s.Client, o, buckets)
	return s
}

// serveS3 serves h, behind o.Wrap, on a loopback port until t ends.
func serveS3(t testing.TB, h http.Handler, o S3Options) *S3Server {
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &S3Server{URL: srv.URL, Client: S3Client(srv.URL), srv: srv}
}

// createBuckets creates buckets through c, versioned unless o says otherwise.
func createBuckets(t testing.TB, c *s3.Client, o S3Options, buckets []string) {
	t.Helper()
	ctx := context.Background()
	for _, b := range buckets {
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatalf("testenv: create bucket %s: %v", b, err)
		}
		if o.Unversioned {
			continue
		}
		_, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
			Bucket:                  aws.String(b),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
		})
		if err != nil {
			t.Fatalf("testenv: versioning of bucket %s: %v", b, err)
		}
	}
}

// Stop stops the server: later requests fail as with an S3 that is down.
func (s *S3Server) Stop() { s.srv.Close() }

// S3Client returns a client of the S3 at endpoint with static test credentials, path-style
// addressing, and checksums only where S3 requires them (what gofakes3 understands).
func S3Client(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region:                     "us-east-1",
		Credentials:                credentials.NewStaticCredentialsProvider("lethe", "lethe-secret", ""),
		BaseEndpoint:               aws.String(endpoint),
		UsePathStyle:               true,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}
