package testenv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// S3Server is an S3 for one test, over HTTP on a loopback port: moto's server behind a
// proxy of the test's own (see S3), or the stand-in.
type S3Server struct {
	URL    string     // endpoint, e.g. http://127.0.0.1:40123
	Client *s3.Client // a client of URL with static credentials, path-style
	srv    *httptest.Server
}

// S3Options configure S3With.
type S3Options struct {
	// Unversioned leaves versioning off and has version listings answered NotImplemented,
	// as a server without versioning does (gofakes3 without versioning, some S3-compatible
	// stores).
	Unversioned bool
	// ObjectLock creates the buckets with Object Lock enabled (and so versioned), so that
	// legal holds and retention can be set on their versions.
	ObjectLock bool
	Wrap       func(http.Handler) http.Handler // a shim in front of the server, such as a fault injector
}

// S3 starts an S3 with the buckets created and versioning enabled on each, for t alone.
//
// It is moto's server (see Moto) reached through a loopback proxy that gives every bucket
// the test names a name of its own on the server (name-<random>, in requests; responses
// carry the names the test used), so fixed bucket names do not collide; the buckets
// created through it are emptied and deleted when t ends. With EnvS3 set the server is
// that S3 instead, through the same proxy. With EnvStandIns it is gofakes3 in process.
// Stop makes it unreachable.
//
// moto serves requests on threads with no lock around its state, so two conditional
// writes (If-Match, If-None-Match) can both pass their check; S3 makes each one atomic.
// The proxy therefore passes a test's writes to moto one at a time.
func S3(t testing.TB, buckets ...string) *S3Server {
	t.Helper()
	return S3With(t, S3Options{}, buckets...)
}

// S3With is S3 with options. Wrap stands in front of the proxy.
func S3With(t testing.TB, o S3Options, buckets ...string) *S3Server {
	t.Helper()
	if ep := os.Getenv(EnvS3); ep != "" {
		return externalS3(t, ep, o, buckets)
	}
	if StandIns() {
		var opts []gofakes3.Option
		if o.Unversioned {
			opts = append(opts, gofakes3.WithoutVersioning())
		}
		s := serveS3(t, gofakes3.New(s3mem.New(), opts...).Server(), o)
		createBuckets(t, s.Client, o, buckets)
		return s
	}
	creds := aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}
	return proxyS3(t, Moto(t), creds, "us-east-1", new(sync.Mutex), o, buckets)
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
		in := &s3.CreateBucketInput{Bucket: aws.String(b)}
		if o.ObjectLock {
			in.ObjectLockEnabledForBucket = aws.Bool(true)
		}
		if _, err := c.CreateBucket(ctx, in); err != nil {
			t.Fatalf("testenv: create bucket %s: %v", b, err)
		}
		if o.Unversioned || o.ObjectLock {
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
// addressing, and the SDK's default checksums (sent with every upload, validated on every
// download that has one), as the services' clients have them.
func S3Client(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("lethe", "lethe-secret", ""),
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
	})
}
