package testenv

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// s3Proxy stands between a test and a real S3 (path-style). It renames every bucket the
// test names to name-<suffix>, so tests that use fixed bucket names stay apart on one
// server, signs each request again (SigV4) with the server's credentials, and writes the
// original names back into bucket-level and error responses. It records the buckets
// created through it, so they can be emptied and deleted when the test ends.
type s3Proxy struct {
	upstream *url.URL
	suffix   string // "-" and random hex
	creds    aws.Credentials
	region   string
	signer   *v4.Signer
	hop      *http.Transport
	// noVersions answers every version listing NotImplemented, as gofakes3 without
	// versioning does (S3Options.Unversioned).
	noVersions bool

	// writes, when set, passes one write at a time (see moto).
	writes *sync.Mutex

	mu      sync.Mutex
	created map[string]bool // renamed buckets
}

// hopHeaders are not forwarded; the signature headers are made again.
var hopHeaders = []string{
	"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "Connection", "Keep-Alive",
	"Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Expect", "Accept-Encoding",
}

func (p *s3Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, listing := r.URL.Query()["versions"]; listing && p.noVersions {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusNotImplemented)
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>version listing is off (S3Options.Unversioned)</Message></Error>`)
		return
	}
	if p.writes != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
		p.writes.Lock()
		defer p.writes.Unlock()
	}
	bucket, key, hasKey := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	path := "/"
	if bucket != "" {
		bucket += p.suffix
		path += bucket
		if hasKey {
			path += "/" + key
		}
	}
	hash := r.Header.Get("X-Amz-Content-Sha256")
	if strings.HasPrefix(hash, "STREAMING-AWS4-HMAC-SHA256") {
		http.Error(w, "testenv: chunk-signed uploads cannot be signed again by the proxy", http.StatusNotImplemented)
		return
	}
	if hash == "" {
		hash = "UNSIGNED-PAYLOAD"
	}
	target := *p.upstream
	target.Path, target.RawPath = "", ""
	u, err := url.Parse(target.String() + path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	u.RawQuery = r.URL.RawQuery
	var body io.Reader
	if r.ContentLength != 0 {
		body = r.Body
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out.ContentLength = r.ContentLength
	out.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Header.Set("X-Amz-Content-Sha256", hash)
	if err := p.signer.SignHTTP(r.Context(), p.creds, out, hash, "s3", p.region, time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp, err := p.hop.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if r.Method == http.MethodPut && bucket != "" && (!hasKey || key == "") && r.URL.RawQuery == "" && resp.StatusCode == http.StatusOK {
		p.mu.Lock()
		p.created[bucket] = true
		p.mu.Unlock()
	}
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		resp.Header.Set("Location", strings.ReplaceAll(loc, p.suffix, ""))
	}
	if hasKey && key != "" && resp.StatusCode < 300 {
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body) // the status is sent; a client that went away is no error of ours
		return
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	b = bytes.ReplaceAll(b, []byte(p.suffix), nil)
	copyHeader(w.Header(), resp.Header)
	if resp.Header.Get("Content-Length") != "" {
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(b) // the status is sent; a client that went away is no error of ours
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
}

// externalS3 serves a proxy of the S3 at endpoint, named by EnvS3, for t (see S3With).
func externalS3(t testing.TB, endpoint string, o S3Options, buckets []string) *S3Server {
	t.Helper()
	reachable(t, EnvS3, endpoint)
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if id == "" || secret == "" {
		t.Fatalf("testenv: %s needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", EnvS3)
	}
	region := cmp.Or(os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"), "us-east-1")
	creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN")}
	return proxyS3(t, endpoint, creds, region, nil, o, buckets)
}

// proxyS3 serves a proxy of the S3 at endpoint for t, signing with creds, passing writes
// one at a time under writes when it is set.
func proxyS3(t testing.TB, endpoint string, creds aws.Credentials, region string, writes *sync.Mutex, o S3Options, buckets []string) *S3Server {
	t.Helper()
	up, err := url.Parse(endpoint)
	if err != nil || up.Host == "" {
		t.Fatalf("testenv: S3 endpoint %q is not a URL: %v", endpoint, err)
	}
	p := &s3Proxy{
		upstream: up,
		suffix:   "-" + uniqueSuffix(),
		creds:    creds,
		region:   region,
		signer:   v4.NewSigner(func(so *v4.SignerOptions) { so.DisableURIPathEscaping = true }),
		hop:      &http.Transport{DisableCompression: true, Proxy: nil, MaxIdleConnsPerHost: 16},
		created:  map[string]bool{},
		writes:   writes,

		noVersions: o.Unversioned,
	}
	t.Cleanup(p.hop.CloseIdleConnections)
	direct := s3.New(s3.Options{
		Region:                     region,
		Credentials:                credentials.StaticCredentialsProvider{Value: p.creds},
		BaseEndpoint:               aws.String(endpoint),
		UsePathStyle:               true,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for b := range p.created {
			if err := dropBucket(context.Background(), direct, b); err != nil {
				t.Errorf("testenv: delete bucket %s: %v", b, err)
			}
		}
	})
	s := serveS3(t, p, o)
	createBuckets(t, s.Client, o, buckets)
	return s
}

// dropBucket deletes every version and delete marker in bucket, then the bucket.
func dropBucket(ctx context.Context, c *s3.Client, bucket string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	round := 0
	for {
		out, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
		if err != nil {
			return err
		}
		var ids []types.ObjectIdentifier
		add := func(key, version *string) {
			// Always by version id, "null" included: without one, a versioned bucket
			// would only add a delete marker.
			ids = append(ids, types.ObjectIdentifier{Key: key, VersionId: version})
		}
		for _, v := range out.Versions {
			add(v.Key, v.VersionId)
		}
		for _, m := range out.DeleteMarkers {
			add(m.Key, m.VersionId)
		}
		if len(ids) == 0 {
			break
		}
		if round++; round > 100 {
			return fmt.Errorf("%d versions still listed after %d rounds of deletes", len(ids), round)
		}
		// Versions a test locked lose their legal hold; governance retention is bypassed.
		res, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
			BypassGovernanceRetention: aws.Bool(round > 1)})
		if err != nil {
			return err
		}
		for _, e := range res.Errors {
			if aws.ToString(e.Code) != "AccessDenied" || round > 2 {
				return fmt.Errorf("delete %s: %s", aws.ToString(e.Key), aws.ToString(e.Message))
			}
			_, err := c.PutObjectLegalHold(ctx, &s3.PutObjectLegalHoldInput{Bucket: aws.String(bucket), Key: e.Key, VersionId: e.VersionId,
				LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOff}})
			if err != nil {
				return fmt.Errorf("lift the legal hold of %s: %w", aws.ToString(e.Key), err)
			}
		}
	}
	_, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	return err
}
