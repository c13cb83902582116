package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// burstTenant is the one tenant of the burst phase.
const burstTenant = "bench-burst"

// runBurst erases cfg.Burst subjects of one tenant at once, their rows spread through a
// dataset object of cfg.Large.DatasetRows unrelated rows, and measures how many times the
// dataset deleter rewrote that object. It fails unless every receipt is COMPLETE, every
// row of the erased subjects is gone from the object (and from every version left of it),
// and every other row is byte-identical to the seeded one, in the same order.
// burstTargetBatch is the subjects per rewrite the burst must reach on average at least.
const burstTargetBatch = 64

func runBurst(ctx context.Context, cfg Config, key subject.Key, res *Results, logf func(string, ...any)) error {
	n := cfg.Burst
	logf("burst: %d erasures of one tenant at once, a %d-row dataset object", n, cfg.Large.DatasetRows)
	srv, err := startCountingS3(ctx, "/"+embedded.DatasetBucket+"/"+DatasetKey(burstTenant))
	if err != nil {
		return err
	}
	defer srv.close()
	sz := cfg.E2E
	sz.Name, sz.DatasetRows = "burst", cfg.Large.DatasetRows
	sys, err := startSystemWith(ctx, key, 1, sz, n, burstTenant, embedded.External{S3: srv.client(), S3Endpoint: srv.url}, logf)
	if err != nil {
		return err
	}
	defer sys.stop()
	check := srv.client() // a client of its own, not the one the deleter uses
	before, err := getObject(ctx, check, DatasetKey(burstTenant), "")
	if err != nil {
		return err
	}
	seeded := srv.puts.count()
	stopProgress := progress(10*time.Second, func() {
		logf("  %d/%d receipts, %d rewrites of the dataset object so far", sys.receipts.count(), n, srv.puts.count()-seeded)
	})
	rate, done, _, err := sys.throughput(ctx, n, cfg.BurstDrain)
	stopProgress()
	if err != nil {
		return err
	}
	if done < n {
		return fmt.Errorf("burst: %d of %d receipts within %s", done, n, cfg.BurstDrain)
	}
	if bad := sys.receipts.badCount(); bad > 0 {
		return fmt.Errorf("burst: %d receipts were not COMPLETE", bad)
	}
	after, err := getObject(ctx, check, DatasetKey(burstTenant), "")
	if err != nil {
		return err
	}
	erased := burstTargets(n)
	rows, err := checkBurst(before, after, erased)
	if err != nil {
		return fmt.Errorf("burst: the dataset object after the erasures: %w", err)
	}
	left, err := checkVersions(ctx, check, DatasetKey(burstTenant), erased)
	if err != nil {
		return err
	}
	sizes := srv.puts.since(seeded - 1) // the seeded object's size, then each rewrite's
	rewrites := len(sizes) - 1
	per := subjectsPerRewrite(sizes, int64(len(before)-len(after))/int64(max(n, 1)))
	target := float64(n) / burstTargetBatch
	res.Add("burst/erasures_per_s", rate, "erasures/s", fmt.Sprintf("%d erasures of one tenant submitted at once by 32 clients, one instance per deleter; all %d receipts COMPLETE", n, done))
	res.Add("burst/dataset_rewrites", float64(rewrites), "rewrites", fmt.Sprintf("target <= %d/%d = %.1f; batches of at most %d; %d version(s) of the object left, none holding an erased row", n, burstTargetBatch, target, worker.DefaultBatching.Max, left))
	res.Add("burst/subjects_per_rewrite_mean", float64(n)/float64(max(rewrites, 1)), "subjects", fmt.Sprintf("rows removed by each rewrite, in order: %v", per))
	res.Add("burst/rows_checked", float64(rows), "rows", fmt.Sprintf("%d rows of the erased subjects gone, the other %d byte-identical in order", n, rows-n))
	logf("  %.1f erasures/s; %d rewrites of the dataset object (target <= %.1f), subjects per rewrite %v", rate, rewrites, target, per)
	return nil
}

// progress calls report every interval until the returned stop is called.
func progress(interval time.Duration, report func()) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				report()
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}

// burstTargets are the customers the burst erases (those startSystemWith seeds).
func burstTargets(n int) []Customer {
	cs := make([]Customer, n)
	for i := range cs {
		cs[i] = NewCustomer(burstTenant, "sub", i)
	}
	return cs
}

// erasedRows recognises the rows of a set of customers in the benchmark's CSV dataset:
// by id in the first column or session in the second.
type erasedRows struct{ ids, sessions map[string]bool }

func newErasedRows(cs []Customer) erasedRows {
	e := erasedRows{ids: map[string]bool{}, sessions: map[string]bool{}}
	for _, c := range cs {
		e.ids[c.ID] = true
		for _, s := range c.Sessions {
			e.sessions[s] = true
		}
	}
	return e
}

func (e erasedRows) holds(row []byte) bool {
	id, rest, _ := bytes.Cut(row, []byte(","))
	ses, _, _ := bytes.Cut(rest, []byte(","))
	return e.ids[string(id)] || e.sessions[string(ses)]
}

// firstHeld is the number (from 1, the header being row 0) of the first row of rows that
// holds one of the customers; 0 when none does.
func (e erasedRows) firstHeld(rows [][]byte) int {
	for i, row := range rows {
		if i > 0 && e.holds(row) {
			return i
		}
	}
	return 0
}

// checkBurst compares a CSV dataset after erasing the subjects erased with the one before:
// no row names one of them, exactly one row per subject was removed, and every other row
// is byte-identical to before, in the same order. It returns the rows of before it checked
// (the header excluded). Errors name rows by number, never by content.
func checkBurst(before, after []byte, erased []Customer) (int, error) {
	e := newErasedRows(erased)
	afterRows := slices.Collect(bytes.Lines(after))
	if i := e.firstHeld(afterRows); i > 0 {
		return 0, fmt.Errorf("row %d still holds an erased subject", i)
	}
	var want [][]byte
	beforeRows := slices.Collect(bytes.Lines(before))
	for i, row := range beforeRows {
		if i == 0 || !e.holds(row) {
			want = append(want, row)
		}
	}
	if removed := len(beforeRows) - len(want); removed != len(erased) {
		return 0, fmt.Errorf("the seeded object held %d rows of the %d erased subjects, want one each", removed, len(erased))
	}
	for i := range min(len(want), len(afterRows)) {
		if !bytes.Equal(want[i], afterRows[i]) {
			return 0, fmt.Errorf("row %d differs from the row it should be", i)
		}
	}
	if len(want) != len(afterRows) {
		return 0, fmt.Errorf("%d rows left, want %d", len(afterRows)-1, len(want)-1)
	}
	return len(beforeRows) - 1, nil
}

// checkVersions reads every version of key left in the dataset bucket and fails when one
// of them holds a row of the erased subjects. It returns how many versions are left.
func checkVersions(ctx context.Context, c *s3.Client, key string, erased []Customer) (int, error) {
	out, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(embedded.DatasetBucket), Prefix: aws.String(key)})
	if err != nil {
		return 0, fmt.Errorf("burst: list versions: %w", err)
	}
	if aws.ToBool(out.IsTruncated) {
		return 0, errors.New("burst: list versions: more than one page of versions")
	}
	e := newErasedRows(erased)
	left := 0
	for _, v := range out.Versions {
		if aws.ToString(v.Key) != key {
			continue
		}
		left++
		body, err := getObject(ctx, c, key, aws.ToString(v.VersionId))
		if err != nil {
			return 0, err
		}
		if i := e.firstHeld(slices.Collect(bytes.Lines(body))); i > 0 {
			return 0, fmt.Errorf("burst: row %d of a version of the dataset object left holds an erased subject", i)
		}
	}
	return left, nil
}

// getObject reads key (the version id, or the current object when id is "") of the
// dataset bucket.
func getObject(ctx context.Context, c *s3.Client, key, id string) ([]byte, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(embedded.DatasetBucket), Key: aws.String(key)}
	if id != "" {
		in.VersionId = aws.String(id)
	}
	out, err := c.GetObject(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("burst: get object: %w", err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("burst: get object: %w", err)
	}
	return b, nil
}

// subjectsPerRewrite turns the sizes of successive versions of the object (the seeded one
// first) into the rows each rewrite removed, rowLen bytes each.
func subjectsPerRewrite(sizes []int64, rowLen int64) []int64 {
	var out []int64
	for i := 1; i < len(sizes); i++ {
		if rowLen <= 0 || sizes[i] < 0 || sizes[i-1] < 0 {
			return nil // sizes unknown
		}
		out = append(out, (sizes[i-1]-sizes[i])/rowLen)
	}
	return out
}

// countingS3 is gofakes3 over HTTP with a versioned dataset bucket, counting the
// successful PUTs of one object.
type countingS3 struct {
	url  string
	puts *putCounter
	srv  *http.Server
}

func startCountingS3(ctx context.Context, path string) (*countingS3, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("burst: s3: %w", err)
	}
	s := &countingS3{url: "http://" + l.Addr().String(), puts: &putCounter{path: path}}
	s.srv = &http.Server{Handler: s.puts.wrap(gofakes3.New(s3mem.New()).Server()), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	c := s.client()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(embedded.DatasetBucket)}); err != nil {
		s.close()
		return nil, fmt.Errorf("burst: s3: %w", err)
	}
	_, err = c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(embedded.DatasetBucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	if err != nil {
		s.close()
		return nil, fmt.Errorf("burst: s3: %w", err)
	}
	return s, nil
}

// client is a new path-style client of the server.
func (s *countingS3) client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.url),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("lethe", "lethe-local", ""),
		UsePathStyle: true,
	})
}

func (s *countingS3) close() { s.srv.Close() }

// putCounter records the body size of every PUT of path (path-style: /bucket/key) that the
// server answered with a 2xx status, in the order the answers were given; a PUT whose size
// the request does not say records -1.
type putCounter struct {
	path  string
	mu    sync.Mutex
	sizes []int64
}

func (p *putCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.URL.Path != p.path || r.Header.Get("X-Amz-Copy-Source") != "" {
			h.ServeHTTP(w, r)
			return
		}
		size := r.ContentLength
		if d := r.Header.Get("X-Amz-Decoded-Content-Length"); d != "" {
			if size, _ = strconv.ParseInt(d, 10, 64); size == 0 && d != "0" {
				size = -1
			}
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		if sw.status/100 == 2 {
			p.mu.Lock()
			p.sizes = append(p.sizes, size)
			p.mu.Unlock()
		}
	})
}

// count is how many PUTs succeeded so far.
func (p *putCounter) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sizes)
}

// since is the sizes of the PUTs from the i-th (counting from 0) on.
func (p *putCounter) since(i int) []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.sizes[max(i, 0):])
}

// statusWriter remembers the status a handler sent (the first one written; 200 when it
// wrote a body first).
type statusWriter struct {
	http.ResponseWriter
	status int
	sent   bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.sent {
		w.status, w.sent = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.sent = true
	return w.ResponseWriter.Write(b)
}
