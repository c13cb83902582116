package datasetstore

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// Erasing several subjects of one dataset at once succeeds for every one on the first try:
// rewrites of one object take turns instead of aborting each other's conditional writes.
func TestConcurrentErasuresOfOneObject(t *testing.T) {
	c := newS3Client(t)
	w := s3World{c}
	var b strings.Builder
	b.WriteString("customer_id,session_id,question\n")
	const n = 8
	for i := range n {
		fmt.Fprintf(&b, "cust-%d,sess-cust-%d,q%d\n", i, i, i)
	}
	b.WriteString("keeper,sess-keeper,stays\n")
	w.put(t, "acme/eval.csv", []byte(b.String()))
	st, _ := inventory.Reference().Entry("dataset")
	store := New(c, "")
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := store.Erase(context.Background(), st, deletiontest.NewSubject("acme", fmt.Sprintf("cust-%d", i)))
			if err == nil && res.Deleted() == 0 {
				err = fmt.Errorf("deleted nothing")
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("erasing cust-%d: %v", i, err)
		}
	}
	got := string(w.get(t, "acme/eval.csv", ""))
	if got != "customer_id,session_id,question\nkeeper,sess-keeper,stays\n" {
		t.Errorf("dataset after the erasures:\n%s", got)
	}
}

// overlapClient holds the first GetObject until a second one is in flight (or a timeout
// passes) and records whether that happened: with it, a test tells concurrent requests from
// sequential ones without timing anything.
type overlapClient struct {
	next     s3.HTTPClient
	mu       sync.Mutex
	inFlight int
	overlap  chan struct{} // closed once two GetObjects were in flight together
}

func (o *overlapClient) Do(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet || r.URL.Query().Has("versions") || r.URL.Query().Has("list-type") {
		return o.next.Do(r)
	}
	o.mu.Lock()
	o.inFlight++
	if o.inFlight == 2 {
		select {
		case <-o.overlap:
		default:
			close(o.overlap)
		}
	}
	o.mu.Unlock()
	select {
	case <-o.overlap:
	case <-time.After(5 * time.Second):
	}
	defer func() { o.mu.Lock(); o.inFlight--; o.mu.Unlock() }()
	return o.next.Do(r)
}

// A batch of subjects of several tenants erases the tenants' datasets side by side, not
// one tenant after the other: under store latency a batch then costs what its slowest
// tenant costs, as the same requests unbatched would.
func TestEraseBatchTenantsConcurrently(t *testing.T) {
	c := newS3Client(t)
	w := s3World{c}
	for _, tenant := range []string{"acme", "globex"} {
		w.put(t, tenant+"/eval.csv", []byte("customer_id,session_id,question\ncust-1,sess-cust-1,q\nkeeper,sess-keeper,stays\n"))
	}
	oc := &overlapClient{overlap: make(chan struct{})}
	watched := s3.New(c.Options(), func(o *s3.Options) { oc.next = o.HTTPClient; o.HTTPClient = oc })
	st, _ := inventory.Reference().Entry("dataset")
	subjects := []deletion.Subject{deletiontest.NewSubject("acme", "cust-1"), deletiontest.NewSubject("globex", "cust-1")}
	results, errs := New(watched, "").EraseBatch(context.Background(), st, subjects)
	for i, err := range errs {
		if err != nil || results[i].Deleted() != 1 {
			t.Errorf("%s: deleted %d, %v", subjects[i].Tenant, results[i].Deleted(), err)
		}
	}
	select {
	case <-oc.overlap:
	default:
		t.Error("the two tenants' datasets were read one after the other")
	}
	for _, tenant := range []string{"acme", "globex"} {
		if got := string(w.get(t, tenant+"/eval.csv", "")); got != "customer_id,session_id,question\nkeeper,sess-keeper,stays\n" {
			t.Errorf("%s dataset after the batch:\n%s", tenant, got)
		}
	}
}
