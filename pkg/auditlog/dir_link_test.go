package auditlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/event"
)

func linkReceipt(i int) event.Receipt {
	return event.Receipt{ReceiptID: fmt.Sprint(i), RequestID: fmt.Sprintf("r-%d", i), TenantID: "acme", Status: "COMPLETE"}
}

// blockedSync makes the store's next fsync wait for release and counts every fsync.
func blockedSync(s *DirStore) (release func(), syncs *atomic.Int32) {
	syncs = &atomic.Int32{}
	gate := make(chan struct{})
	s.log.Sync = func(f *os.File) error {
		if syncs.Add(1) == 1 {
			<-gate
		}
		return f.Sync()
	}
	return sync.OnceFunc(func() { close(gate) }), syncs
}

// applied waits until n receipts are applied in memory (durable or not).
func applied(t *testing.T, s *DirStore, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.mu.RLock()
		got := len(s.receipts)
		s.mu.RUnlock()
		if got >= n {
			return
		}
	}
	t.Fatalf("fewer than %d receipts applied", n)
}

// TestLinksOfOneTenantShareFsyncs: while the fsync of one receipt's link is in flight, nine
// more receipts of the same tenant link behind it and share the next fsync: ten receipts,
// two fsyncs, one intact chain (seq 1 to 10), before and after reopening. Linked by
// conditional writes, each receipt waits for the fsync of the head swap before it.
func TestLinksOfOneTenantShareFsyncs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir)
	release, syncs := blockedSync(s)
	defer release()
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	issue := func(i int) {
		wg.Go(func() {
			if _, err := Issue(ctx, s, linkReceipt(i)); err != nil {
				errs <- err
			}
		})
	}
	issue(0)
	applied(t, s, 1)
	// the first receipt's fsync is in flight (the commit leader yields before it, so being
	// applied is not enough: receipts appended before it would share it)
	for deadline := time.Now().Add(10 * time.Second); syncs.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first receipt's fsync never started")
		}
	}
	for i := 1; i < 10; i++ {
		issue(i)
	}
	applied(t, s, 10)
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := syncs.Load(); n != 2 {
		t.Errorf("10 receipts took %d fsyncs; want 2", n)
	}
	for _, st := range []*DirStore{s, reopen(t, s, dir)} {
		if err := VerifyChain(ctx, st, "acme"); err != nil {
			t.Fatal(err)
		}
		if h, _ := st.Head(ctx, "acme"); h.Seq != 10 {
			t.Fatalf("head seq %d; want 10", h.Seq)
		}
	}
}

func reopen(t *testing.T, s *DirStore, dir string) *DirStore {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return openT(t, dir)
}

// TestReadsWaitForTheLinkToBeDurable: a receipt applied in memory whose fsync has not
// returned is not read — not by GetReceipt, Head, Receipts, nor by a second Issue of the
// same request — until the fsync returns.
func TestReadsWaitForTheLinkToBeDurable(t *testing.T) {
	ctx := context.Background()
	s := openT(t, t.TempDir())
	release, _ := blockedSync(s)
	defer release()
	go Issue(ctx, s, linkReceipt(1))
	applied(t, s, 1)
	reads := map[string]func() (int64, error){
		"GetReceipt": func() (int64, error) { r, err := s.GetReceipt(ctx, "r-1"); return r.Seq, err },
		"Head":       func() (int64, error) { h, err := s.Head(ctx, "acme"); return h.Seq, err },
		"Receipts": func() (int64, error) {
			rs, err := s.Receipts(ctx, "acme")
			return int64(len(rs)), err
		},
		"Issue again": func() (int64, error) { r, err := Issue(ctx, s, linkReceipt(1)); return r.Seq, err },
	}
	done := make(chan string, len(reads))
	got := map[string]int64{}
	var mu sync.Mutex
	for name, read := range reads {
		go func() {
			n, err := read()
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			mu.Lock()
			got[name] = n
			mu.Unlock()
			done <- name
		}()
	}
	select {
	case name := <-done:
		t.Fatalf("%s returned while the link's fsync was in flight", name)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	for range reads {
		<-done
	}
	for name, n := range got {
		if n != 1 {
			t.Errorf("%s after the fsync = %d; want 1", name, n)
		}
	}
}

// TestFailedLinkFsyncStopsTheStore: when the fsync of a link fails, Issue fails, the
// receipt is never read, no later record is accepted (it could build on the lost link),
// and the reopened store holds the chain up to the last durable receipt.
func TestFailedLinkFsyncStopsTheStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir)
	if _, err := Issue(ctx, s, linkReceipt(1)); err != nil {
		t.Fatal(err)
	}
	failing := errors.New("injected fsync failure")
	s.log.Sync = func(*os.File) error { return failing }
	if _, err := Issue(ctx, s, linkReceipt(2)); !errors.Is(err, failing) {
		t.Fatalf("Issue with a failing fsync = %v; want the fsync error", err)
	}
	s.log.Sync = (*os.File).Sync
	if r, err := s.GetReceipt(ctx, "r-2"); err == nil {
		t.Fatalf("the receipt of the failed link was read: %+v", r)
	}
	if _, err := Issue(ctx, s, linkReceipt(3)); err == nil {
		t.Fatal("a link after a failed link fsync succeeded")
	}
	if err := s.PutRequest(ctx, request("r-4")); err == nil {
		t.Fatal("a write after a failed link fsync succeeded")
	}
	r := reopen(t, s, dir)
	if err := VerifyChain(ctx, r, "acme"); err != nil {
		t.Fatal(err)
	}
	if h, _ := r.Head(ctx, "acme"); h.Seq != 1 || h.RequestID != "r-1" {
		t.Fatalf("head after reopen %+v; want r-1 at seq 1", h)
	}
	if _, err := r.GetReceipt(ctx, "r-2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("receipt of the failed link after reopen: %v", err)
	}
	if rc, err := Issue(ctx, r, linkReceipt(2)); err != nil || rc.Seq != 2 {
		t.Fatalf("issue after reopen = %+v, %v", rc, err)
	}
}

// What a write keeps in memory is the value the caller wrote, sharing nothing with it, and
// equal to what reopening the store decodes from the log.
func TestWrittenValuesMatchTheLog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	req := Request{RequestID: "r-1", TenantID: "acme", ExpectedStores: []string{"redis", "qdrant"}, SessionHashes: []string{"s1"},
		Exempt: []event.Exemption{{Store: "qdrant", HoldID: "h-1"}}, RequestedAt: at, Attempt: 1}
	reports := []event.StoreDone{
		{RequestID: "r-1", TenantID: "acme", Store: "redis", Kind: "redis", Status: event.StatusDeleted, Attempt: 1,
			Locations: []event.LocationCount{{Location: "a", Deleted: 2}}, FoundRuns: []string{"run-1"}, StartedAt: at, FinishedAt: at},
		{RequestID: "r-1", TenantID: "acme", Store: "qdrant#found", Kind: "qdrant", Attempt: 1, Locations: []event.LocationCount{}, StartedAt: at, FinishedAt: at},
	}
	if err := s.PutRequest(ctx, req); err != nil {
		t.Fatal(err)
	}
	for _, d := range reports {
		if err := s.PutReport(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	req.ExpectedStores[0], req.Exempt[0].HoldID = "changed", "changed"
	reports[0].Locations[0].Deleted, reports[0].FoundRuns[0] = 99, "changed"
	read := func(s *DirStore) (Request, []event.StoreDone) {
		r, err := s.GetRequest(ctx, "r-1")
		if err != nil {
			t.Fatal(err)
		}
		ds, err := s.Reports(ctx, "r-1")
		if err != nil {
			t.Fatal(err)
		}
		return r, ds
	}
	liveReq, liveReports := read(s)
	if liveReq.ExpectedStores[0] != "redis" || liveReq.Exempt[0].HoldID != "h-1" || liveReports[1].Locations[0].Deleted != 2 || liveReports[1].FoundRuns[0] != "run-1" {
		t.Fatalf("stored values changed with the caller's: %+v %+v", liveReq, liveReports)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	logReq, logReports := read(s2)
	if !reflect.DeepEqual(liveReq, logReq) || !reflect.DeepEqual(liveReports, logReports) {
		t.Errorf("written values differ from the log's:\n%+v\n%+v\n%+v\n%+v", liveReq, logReq, liveReports, logReports)
	}
}
