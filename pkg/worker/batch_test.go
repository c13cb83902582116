package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// batchStore holds items per subject id and records the size of every batch call; the
// subject "poison" fails permanently.
type batchStore struct {
	mu      sync.Mutex
	items   map[string]int64
	erases  []int // subjects per EraseBatch call
	singles int   // Erase calls
	// entered, when set, receives each EraseBatch call's size before the call waits on
	// release.
	entered chan int
	release chan struct{}
}

func (b *batchStore) eraseOne(s deletion.Subject) (deletion.Result, error) {
	if s.ID == "poison" {
		return deletion.Result{}, retry.Permanent(errors.New("fake: malformed row"))
	}
	n := b.items[s.ID]
	delete(b.items, s.ID)
	return deletion.Result{Locations: []event.LocationCount{{Location: "key:acme:{subject}", Deleted: n}}}, nil
}

func (b *batchStore) Erase(ctx context.Context, st inventory.Entry, s deletion.Subject) (deletion.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.singles++
	return b.eraseOne(s)
}

func (b *batchStore) Verify(ctx context.Context, st inventory.Entry, s deletion.Subject) (event.Verification, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return event.Verification{Method: "fake read-back", Remaining: b.items[s.ID]}, nil
}

func (b *batchStore) EraseBatch(ctx context.Context, st inventory.Entry, ss []deletion.Subject) ([]deletion.Result, []error) {
	if b.entered != nil {
		b.entered <- len(ss)
		<-b.release
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.erases = append(b.erases, len(ss))
	res, errs := make([]deletion.Result, len(ss)), make([]error, len(ss))
	for i, s := range ss {
		res[i], errs[i] = b.eraseOne(s)
	}
	return res, errs
}

func (b *batchStore) VerifyBatch(ctx context.Context, st inventory.Entry, ss []deletion.Subject) ([]event.Verification, []error) {
	return deletion.VerifyEach(ctx, b, st, ss)
}

// Erasures pending at the same time reach a BatchStore together; each request keeps its
// own report and counts, and the subject that fails permanently fails only its own.
func TestConcurrentRequestsAreBatched(t *testing.T) {
	const n = 8
	fs := &batchStore{items: map[string]int64{}}
	w, addrs := setup(t, map[string]deletion.Store{"redis": fs})
	w.Batching = worker.Batching{Max: n, Wait: 2 * time.Second} // the erase batch fills long before
	w.Metrics = metrics.New()
	var wg sync.WaitGroup
	for i := range n {
		id := fmt.Sprintf("cust-%d", i)
		if i == 3 {
			id = "poison"
		}
		fs.items[id] = int64(i + 1)
		req := request([]string{"redis"}, nil, 1)
		req.RequestID, req.Identifiers.SubjectID = fmt.Sprintf("er_%d", i), id
		wg.Go(func() {
			if err := w.Handle(context.Background(), record(t, req)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(fs.erases) != 1 || fs.erases[0] != n || fs.singles != 0 {
		t.Errorf("erase calls: batches %v, single %d; want one batch of %d", fs.erases, fs.singles, n)
	}
	// lethe_store_batch_subjects saw that one batch of n (its sum over its count)
	sum, count := batchHistogram(t, w.Metrics, "redis", "erase")
	if count != 1 || sum != n {
		t.Errorf("lethe_store_batch_subjects{store=redis,op=erase}: %v subjects in %d batches, want %d in 1", sum, count, n)
	}
	got := map[string]event.StoreDone{}
	for _, r := range testenv.ReadTopic(t, addrs, event.TopicStoreDone) {
		var d event.StoreDone
		if err := event.Done.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		got[d.RequestID] = d
	}
	for i := range n {
		d := got[fmt.Sprintf("er_%d", i)]
		switch {
		case i == 3 && d.Status != event.StatusFailed:
			t.Errorf("poisoned request: %s", d.Status)
		case i != 3 && (d.Status != event.StatusDeleted || d.Deleted() != int64(i+1)):
			t.Errorf("request %d: %s deleted %d, want DELETED %d", i, d.Status, d.Deleted(), i+1)
		}
	}
}

// A batch that does not fill is handed over after the wait.
func TestPartialBatchRunsAfterTheWait(t *testing.T) {
	fs := &batchStore{items: map[string]int64{"alice*": 2}}
	w, addrs := setup(t, map[string]deletion.Store{"redis": fs})
	w.Batching = worker.Batching{Max: 64, Wait: time.Millisecond}
	if err := w.Handle(context.Background(), record(t, request([]string{"redis"}, nil, 1))); err != nil {
		t.Fatal(err)
	}
	if len(fs.erases) != 1 || fs.erases[0] != 1 {
		t.Errorf("batches %v, want one of 1", fs.erases)
	}
	if d := reports(t, addrs)["redis"]; d.Deleted() != 2 || d.Status != event.StatusDeleted {
		t.Errorf("report %s deleted %d", d.Status, d.Deleted())
	}
}

// While Running batches of a store run, subjects that arrive keep joining the next batch,
// long after its Wait: a burst behind a slow store becomes one full batch, not a queue of
// small ones.
func TestBatchGathersWhileTheStoreIsBusy(t *testing.T) {
	fs := &batchStore{items: map[string]int64{}, entered: make(chan int, 4), release: make(chan struct{})}
	w, _ := setup(t, map[string]deletion.Store{"redis": fs})
	w.Batching = worker.Batching{Max: 64, Wait: time.Millisecond, Running: 1}
	var wg sync.WaitGroup
	handle := func(i int) {
		req := request([]string{"redis"}, nil, 1)
		req.RequestID, req.Identifiers.SubjectID = fmt.Sprintf("er_%d", i), fmt.Sprintf("cust-%d", i)
		wg.Go(func() {
			if err := w.Handle(context.Background(), record(t, req)); err != nil {
				t.Error(err)
			}
		})
	}
	handle(0)
	if n := <-fs.entered; n != 1 {
		t.Fatalf("first batch of %d, want 1", n)
	}
	for i := 1; i <= 5; i++ {
		handle(i)
	}
	time.Sleep(300 * time.Millisecond) // far beyond Wait: the second batch is still gathering
	select {
	case n := <-fs.entered:
		t.Fatalf("a batch of %d started while the first still ran", n)
	default:
	}
	fs.release <- struct{}{}
	if n := <-fs.entered; n != 5 {
		t.Errorf("second batch of %d, want the 5 that arrived while the store was busy", n)
	}
	fs.release <- struct{}{}
	wg.Wait()
}

// batchCounter is a batchStore that also counts in batches.
type batchCounter struct {
	*batchStore
	finds []int // subjects per CountBatch call
}

func (f *batchCounter) Count(ctx context.Context, st inventory.Entry, s deletion.Subject) ([]event.LocationCount, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []event.LocationCount{{Location: "key:acme:{subject}", Deleted: f.items[s.ID]}}, nil
}

func (f *batchCounter) CountBatch(ctx context.Context, st inventory.Entry, ss []deletion.Subject) ([][]event.LocationCount, []error) {
	f.mu.Lock()
	f.finds = append(f.finds, len(ss))
	f.mu.Unlock()
	out := make([][]event.LocationCount, len(ss))
	for i, s := range ss {
		out[i], _ = f.Count(ctx, st, s)
	}
	return out, make([]error, len(ss))
}

// The finds recorded before erasing go through batches too, and each request's find
// record carries its own counts.
func TestFindsAreBatched(t *testing.T) {
	const n = 6
	fs := &batchCounter{batchStore: &batchStore{items: map[string]int64{}}}
	w, addrs := setup(t, map[string]deletion.Store{"redis": fs})
	w.Batching = worker.Batching{Max: n, Wait: 2 * time.Second}
	var wg sync.WaitGroup
	for i := range n {
		id := fmt.Sprintf("cust-%d", i)
		fs.items[id] = int64(i + 1)
		req := request([]string{"redis"}, nil, 1)
		req.RequestID, req.Identifiers.SubjectID = fmt.Sprintf("er_%d", i), id
		wg.Go(func() {
			if err := w.Handle(context.Background(), record(t, req)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(fs.finds) != 1 || fs.finds[0] != n {
		t.Errorf("CountBatch calls %v, want one of %d", fs.finds, n)
	}
	for _, r := range testenv.ReadTopic(t, addrs, event.TopicStoreFound) {
		var f event.StoreFound
		if err := event.Found.Decode(r.Value, &f); err != nil {
			t.Fatal(err)
		}
		var i int
		fmt.Sscanf(f.RequestID, "er_%d", &i)
		if f.Found() != int64(i+1) {
			t.Errorf("%s found %d, want %d", f.RequestID, f.Found(), i+1)
		}
	}
}

// batchHistogram is the sum and count of lethe_store_batch_subjects{store,op} in m.
func batchHistogram(t *testing.T, m *metrics.Metrics, store, op string) (float64, uint64) {
	t.Helper()
	var out dto.Metric
	if err := m.StoreBatch.WithLabelValues(store, op).(prometheus.Metric).Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram().GetSampleSum(), out.GetHistogram().GetSampleCount()
}
