package s3prefixstore

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// The buckets of the tests, both versioned; uploads has Object Lock enabled, so legal
// holds and retention can be set there (and versioning can never be suspended, so its
// objects have no "null" version: the documents do).
const (
	uploadsBucket = "lethe-uploads"
	docsBucket    = "lethe-docs"
)

// wire records what the store sends to S3, in front of testenv's server: every
// DeleteObjects batch (how many objects, how many without a version id), the
// ListObjectVersions calls, and the deletions by the version id "null".
//
// It also answers GetObjectRetention, which moto does not serve (it answers the object
// instead), from the Object Lock headers moto returns on a HEAD of the version, as S3
// answers it: the mode and date, or NoSuchObjectLockConfiguration.
type wire struct {
	next http.Handler

	mu         sync.Mutex
	batches    [][2]int
	listPages  int
	nullDelete int
}

// newWire serves testenv.S3 with both buckets behind a wire and returns them.
func newWire(t testing.TB) (*wire, *testenv.S3Server) {
	t.Helper()
	testenv.SkipOnStandIns(t, "Object Lock and the null version")
	f := &wire{}
	wrap := func(h http.Handler) http.Handler { f.next = h; return f }
	srv := testenv.S3With(t, testenv.S3Options{ObjectLock: true, Wrap: wrap}, uploadsBucket)
	_, err := srv.Client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(docsBucket)})
	if err != nil {
		t.Fatal(err)
	}
	setVersioning(t, srv.Client, types.BucketVersioningStatusEnabled)
	return f, srv
}

func setVersioning(t testing.TB, c *s3.Client, status types.BucketVersioningStatus) {
	t.Helper()
	_, err := c.PutBucketVersioning(context.Background(), &s3.PutBucketVersioningInput{
		Bucket: aws.String(docsBucket), VersioningConfiguration: &types.VersioningConfiguration{Status: status},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (f *wire) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	switch {
	case key == "" && r.Method == http.MethodGet && q.Has("versions"):
		f.mu.Lock()
		f.listPages++
		f.mu.Unlock()
	case key == "" && r.Method == http.MethodPost && q.Has("delete"):
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var in struct {
			Objects []struct{ Key, VersionId string } `xml:"Object"`
		}
		if err := xml.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b := [2]int{len(in.Objects), 0}
		nulls := 0
		for _, o := range in.Objects {
			switch o.VersionId {
			case "":
				b[1]++
			case "null":
				nulls++
			}
		}
		f.mu.Lock()
		f.batches = append(f.batches, b)
		f.nullDelete += nulls
		f.mu.Unlock()
	case key != "" && r.Method == http.MethodGet && q.Has("retention"):
		f.retention(w, r)
		return
	case key != "" && r.Method == http.MethodDelete && q.Get("versionId") == "null":
		f.mu.Lock()
		f.nullDelete++
		f.mu.Unlock()
	}
	f.next.ServeHTTP(w, r)
}

// retention serves GetObjectRetention from a HEAD of the version.
func (f *wire) retention(w http.ResponseWriter, r *http.Request) {
	head := r.Clone(r.Context())
	head.Method = http.MethodHead
	q := head.URL.Query()
	q.Del("retention")
	head.URL.RawQuery = q.Encode()
	rec := httptest.NewRecorder()
	f.next.ServeHTTP(rec, head)
	mode, until := rec.Header().Get("X-Amz-Object-Lock-Mode"), rec.Header().Get("X-Amz-Object-Lock-Retain-Until-Date")
	w.Header().Set("Content-Type", "application/xml")
	switch {
	case rec.Code != http.StatusOK:
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	case mode == "" || until == "":
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchObjectLockConfiguration</Code><Message>The specified object does not have a ObjectLock configuration</Message></Error>`)
	default:
		_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Retention><Mode>%s</Mode><RetainUntilDate>%s</RetainUntilDate></Retention>`, mode, until)
	}
}
