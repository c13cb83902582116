package datasetstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

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
	st, _ := inventory.Reference().Store("dataset")
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
