package datasetstore

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// puts records the headers of every object PUT, in front of testenv's S3.
type puts struct {
	next http.Handler
	mu   sync.Mutex
	seen []http.Header
}

func (p *puts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut && strings.Count(strings.TrimPrefix(r.URL.Path, "/"), "/") > 0 {
		p.mu.Lock()
		p.seen = append(p.seen, r.Header.Clone())
		p.mu.Unlock()
	}
	p.next.ServeHTTP(w, r)
}

// defaultClient is an S3 client with the SDK's default checksum behaviour: it sends a
// checksum with every upload and validates the checksum of every download that has one.
func defaultClient(endpoint string) *s3.Client {
	return s3ClientAt(endpoint, aws.RequestChecksumCalculationWhenSupported, aws.ResponseChecksumValidationWhenSupported)
}

func s3ClientAt(endpoint string, send aws.RequestChecksumCalculation, validate aws.ResponseChecksumValidation) *s3.Client {
	return s3.New(s3.Options{
		Region:                     "us-east-1",
		Credentials:                credentials.NewStaticCredentialsProvider("lethe", "lethe-secret", ""),
		BaseEndpoint:               aws.String(endpoint),
		UsePathStyle:               true,
		RequestChecksumCalculation: send,
		ResponseChecksumValidation: validate,
	})
}

// TestRewriteLeavesValidObject: an object with a pre-versioning "null" version and a
// checksum-bearing upload by a default client is erased; the store ends clean, no delete
// marker hides the rewritten object, a default client reads it with its checksum
// validated, and its headers and user metadata are kept.
func TestRewriteLeavesValidObject(t *testing.T) {
	testenv.SkipOnStandIns(t, `the "null" version and stored checksums`)
	ctx := context.Background()
	rec := &puts{}
	srv := testenv.S3With(t, testenv.S3Options{Wrap: func(h http.Handler) http.Handler { rec.next = h; return rec }})
	c := defaultClient(srv.URL)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(testBucket)}); err != nil {
		t.Fatal(err)
	}
	const key = "acme/qa.csv"
	victim := deletiontest.NewSubject("acme", "a")
	put := func(rows []row) {
		t.Helper()
		_, err := c.PutObject(ctx, &s3.PutObjectInput{
			Bucket:          aws.String(testBucket),
			Key:             aws.String(key),
			Body:            bytes.NewReader(renderCSV(t, rows)),
			ContentType:     aws.String("text/csv; charset=utf-8"),
			ContentEncoding: aws.String("identity"),
			CacheControl:    aws.String("no-store"),
			Metadata:        map[string]string{"owner": "ml-team"},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put([]row{{Customer: "a", Text: "before versioning"}, {Customer: "b", Text: "kept"}})
	_, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(testBucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(testBucket)})
	if err != nil || len(vs.Versions) != 1 {
		t.Fatalf("versions %+v, %v", vs, err)
	}
	keep := []row{{Customer: "b", Text: "kept, " + trickyText}, {Sessions: []string{"sess-b"}, Text: "legacy kept"}}
	put([]row{keep[0], {Customer: "a", Text: "after"}, keep[1], {Sessions: []string{"sess-a"}, Text: "legacy"}})
	if vs, _ := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(testBucket)}); len(vs.Versions) != 2 || aws.ToString(vs.Versions[1].VersionId) != "null" && aws.ToString(vs.Versions[0].VersionId) != "null" {
		t.Fatal("setup: want a null version and a current one")
	}

	store := New(testenv.S3Client(srv.URL), "") // a client that sends no checksum of its own
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	res, v := eraseAndVerify(t, store, st, victim)
	if got := deletion.StatusOf(res, v); got != event.StatusDeleted {
		t.Errorf("status %s (verification %+v), want %s", got, v, event.StatusDeleted)
	}
	if res.Deleted() != 2+1 {
		t.Errorf("deleted %+v, want 2 rows and the null version", res.Locations)
	}

	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("a default client cannot get the rewritten object: %v", err)
	}
	body, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil {
		t.Fatalf("a default client cannot read the rewritten object: %v", err)
	}
	if out.ChecksumCRC32 == nil {
		t.Error("the rewritten object carries no checksum, so nothing was validated")
	}
	if !bytes.Equal(body, renderCSV(t, keep)) {
		t.Errorf("content %q", body)
	}
	if aws.ToString(out.ContentType) != "text/csv; charset=utf-8" || aws.ToString(out.ContentEncoding) != "identity" ||
		aws.ToString(out.CacheControl) != "no-store" || out.Metadata["owner"] != "ml-team" || len(out.Metadata) != 1 {
		t.Errorf("headers not kept: type %q encoding %q cache %q metadata %v",
			aws.ToString(out.ContentType), aws.ToString(out.ContentEncoding), aws.ToString(out.CacheControl), out.Metadata)
	}
	rec.mu.Lock()
	last := rec.seen[len(rec.seen)-1]
	rec.mu.Unlock()
	if last.Get("X-Amz-Checksum-Crc32") == "" {
		t.Error("the rewrite sent no checksum")
	}
	vs, err = c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(testBucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs.DeleteMarkers) != 0 || len(vs.Versions) != 1 || !aws.ToBool(vs.Versions[0].IsLatest) {
		t.Errorf("left %d versions and %d delete markers, want only the rewritten object", len(vs.Versions), len(vs.DeleteMarkers))
	}
}

// eraseAndVerify erases subj from st and verifies, failing the test on an error.
func eraseAndVerify(t *testing.T, s *Store, st inventory.Entry, subj deletion.Subject) (deletion.Result, event.Verification) {
	t.Helper()
	res, err := s.Erase(context.Background(), st, subj)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Verify(context.Background(), st, subj)
	if err != nil {
		t.Fatal(err)
	}
	return res, v
}
