package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/envelope"
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

// readLog is a key store that records its reads ("Get", or "GetBatch(n)" for n ids) and,
// with entered set, announces each read and waits for release before it.
type readLog struct {
	*envelope.DirKeyStore
	mu      sync.Mutex
	reads   []string
	entered chan string
	release chan struct{}
}

func (k *readLog) read(what string) {
	k.mu.Lock()
	k.reads = append(k.reads, what)
	k.mu.Unlock()
	if k.entered != nil {
		k.entered <- what
		<-k.release
	}
}

func (k *readLog) Get(ctx context.Context, id string) ([]byte, error) {
	k.read("Get")
	return k.DirKeyStore.Get(ctx, id)
}

func (k *readLog) GetBatch(ctx context.Context, ids []string) ([][]byte, []error) {
	k.read(fmt.Sprintf("GetBatch(%d)", len(ids)))
	return k.DirKeyStore.GetBatch(ctx, ids)
}

func (k *readLog) log() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.reads)
}

// The data keys of the sealed requests in hand are read together: a request alone is
// read at once with one Get, and the requests that arrive while a read runs are read in
// one GetBatch after it. Each keeps its own outcome: its own identifiers, a shredded key
// (a replay: no report) or a missing one (every store FAILED).
func TestKeyReadsAreBatched(t *testing.T) {
	const n = 7
	kek := testKEK(t)
	dir, err := envelope.NewDirKeyStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	intake := &envelope.Sealer{KEK: kek, Keys: dir}
	elsewhere, _ := sealedRequest(t, kek) // its key is in another store: missing here
	fs := &batchStore{items: map[string]int64{}}
	for i := 0; i <= n; i++ {
		fs.items[fmt.Sprintf("cust-%d", i)] = int64(i + 1)
	}
	w, addrs := setup(t, map[string]deletion.Store{"redis": fs})
	keys := &readLog{DirKeyStore: dir, entered: make(chan string, 1), release: make(chan struct{})}
	w.Sealer = &envelope.Sealer{KEK: kek, Keys: keys}
	w.Batching = worker.Batching{Max: 64, Wait: time.Millisecond, Running: 1}
	var wg sync.WaitGroup
	handle := func(i int) {
		req := request([]string{"redis"}, nil, 1)
		req.RequestID = fmt.Sprintf("er_%d", i)
		switch i {
		case 2:
			req.Sealed = elsewhere.Sealed
		default:
			sealed, err := intake.SealIdentifiers(t.Context(), req.RequestID, event.Identifiers{SubjectID: fmt.Sprintf("cust-%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			req.Sealed = sealed
		}
		req.Identifiers = event.Identifiers{SessionIDs: []string{}}
		if i == 5 {
			if err := intake.Shred(t.Context(), req.RequestID); err != nil {
				t.Fatal(err)
			}
		}
		wg.Go(func() {
			if err := w.Handle(context.Background(), record(t, req)); err != nil {
				t.Error(err)
			}
		})
	}
	handle(0)
	if what := <-keys.entered; what != "Get" {
		t.Fatalf("a request alone read its key with %s, want Get", what)
	}
	for i := 1; i <= n; i++ {
		handle(i)
	}
	time.Sleep(300 * time.Millisecond) // far beyond Wait: the next read is still gathering
	select {
	case what := <-keys.entered:
		t.Fatalf("%s started while the first read ran", what)
	default:
	}
	keys.release <- struct{}{}
	if what := <-keys.entered; what != fmt.Sprintf("GetBatch(%d)", n) {
		t.Errorf("the requests that arrived during the first read were read with %s, want GetBatch(%d)", what, n)
	}
	keys.release <- struct{}{}
	wg.Wait()
	if got := keys.log(); len(got) != 2 {
		t.Errorf("key reads %v, want one Get and one GetBatch", got)
	}
	got := map[string]event.StoreDone{}
	for _, r := range testenv.ReadTopic(t, addrs, event.TopicStoreDone) {
		var d event.StoreDone
		if err := event.Done.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		got[d.RequestID] = d
	}
	for i := 0; i <= n; i++ {
		d, ok := got[fmt.Sprintf("er_%d", i)]
		switch {
		case i == 2 && (d.Status != event.StatusFailed || d.Error != worker.ReasonMissingKey):
			t.Errorf("request with a missing key: %s %q, want FAILED %q", d.Status, d.Error, worker.ReasonMissingKey)
		case i == 5 && ok:
			t.Errorf("request with a shredded key reported %s, want no report", d.Status)
		case i != 2 && i != 5 && (d.Status != event.StatusDeleted || d.Deleted() != int64(i+1)):
			t.Errorf("request %d: %s deleted %d, want DELETED %d (its own subject)", i, d.Status, d.Deleted(), i+1)
		}
	}
}

// A sealed request alone reads its key at once, with one Get, however long store
// batches wait.
func TestKeyReadAloneIsNotDelayed(t *testing.T) {
	kek := testKEK(t)
	req, intake := sealedRequest(t, kek)
	req.ExpectedStores = []string{"redis"}
	keys := &readLog{DirKeyStore: intake.Keys.(*envelope.DirKeyStore)}
	w, addrs := setup(t, map[string]deletion.Store{"redis": newFake(map[string]*behaviour{"redis": {items: 2}})})
	w.Sealer = &envelope.Sealer{KEK: kek, Keys: keys}
	w.Batching = worker.Batching{Max: 64, Wait: time.Hour, Running: 1}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := w.Handle(ctx, record(t, req)); err != nil {
		t.Fatal(err)
	}
	if got := keys.log(); !slices.Equal(got, []string{"Get"}) {
		t.Errorf("key reads %v, want one Get", got)
	}
	if d := reports(t, addrs)["redis"]; d.Status != event.StatusDeleted || d.Deleted() != 2 {
		t.Errorf("report %s deleted %d, want DELETED 2", d.Status, d.Deleted())
	}
}
