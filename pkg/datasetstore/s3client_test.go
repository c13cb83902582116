package datasetstore

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// nullVersions sits in front of gofakes3 and gives it S3's "null" version: gofakes3 names
// an object written before versioning was enabled with a generated id and takes
// versionId=null for "no version" (a plain DELETE, which adds a delete marker). The shim
// shows the registered ids as "null" in listings and response headers and maps
// versionId=null back to them, as S3 does. gofakes3 also drops Cache-Control: the shim
// keeps the last one sent per key and returns it with the object. It records the headers
// of every PUT.
type nullVersions struct {
	next http.Handler
	mu   sync.Mutex
	ids  map[string]string // key -> gofakes3's id of its null version
	cc   map[string]string // key -> Cache-Control
	puts []http.Header
}

func (n *nullVersions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/"+testBucket+"/")
	q := r.URL.Query()
	n.mu.Lock()
	real, isNull := n.ids[key]
	if r.Method == http.MethodPut && key != r.URL.Path {
		n.puts = append(n.puts, r.Header.Clone())
		n.cc[key] = r.Header.Get("Cache-Control")
	}
	cc := n.cc[key]
	nulls := make(map[string]bool, len(n.ids))
	for _, id := range n.ids {
		nulls[id] = true
	}
	n.mu.Unlock()
	if isNull && q.Get("versionId") == "null" {
		q.Set("versionId", real)
		r.URL.RawQuery = q.Encode()
	}
	rec := httptest.NewRecorder()
	n.next.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	if _, listing := q["versions"]; listing {
		for id := range nulls {
			body = bytes.ReplaceAll(body, []byte("<VersionId>"+id+"</VersionId>"), []byte("<VersionId>null</VersionId>"))
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	if r.Method == http.MethodGet && rec.Code == http.StatusOK && cc != "" {
		w.Header().Set("Cache-Control", cc)
	}
	if nulls[w.Header().Get("x-amz-version-id")] {
		w.Header().Set("x-amz-version-id", "null")
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
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
	ctx := context.Background()
	shim := &nullVersions{next: gofakes3.New(s3mem.New()).Server(), ids: map[string]string{}, cc: map[string]string{}}
	srv := httptest.NewServer(shim)
	t.Cleanup(srv.Close)
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
	shim.mu.Lock()
	shim.ids[key] = aws.ToString(vs.Versions[0].VersionId) // gofakes3's name for it
	shim.mu.Unlock()
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
	shim.mu.Lock()
	last := shim.puts[len(shim.puts)-1]
	shim.mu.Unlock()
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
func eraseAndVerify(t *testing.T, s *Store, st inventory.Store, subj deletion.Subject) (deletion.Result, event.Verification) {
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
