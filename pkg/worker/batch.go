package worker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
)

// Batching configures how the worker gathers the erasures pending on its partitions for a
// store that is a deletion.BatchStore: a batch is handed over when it holds Max subjects or
// Wait after its first subject arrived, whichever comes first, and only while fewer than
// Running batches of the same store and operation run (below 1: 1): while the store is
// busy, arriving subjects keep joining the waiting batch, so a burst becomes a few full
// batches rather than many small ones queued behind each other. Max below 2 turns
// batching off. One running batch is the default: a store groups a batch's subjects by
// object or collection and works on the groups side by side, so a second batch mostly
// splits the same work in two, each half rewriting the same objects (at 200 req/s on the
// embedded stack, 2 gave a p99 latency 1.6 to 1.8 times that of 1, make bench); more let a
// slow group (a large object of one tenant) hold back fewer of the others. Each request
// of a batch keeps its own report, counts, verification and retries, and its offset is
// still marked only after its own reports were acknowledged: batching changes how many
// store calls there are, not what is reported or when a record is done.
type Batching struct {
	Max     int
	Wait    time.Duration
	Running int
}

// DefaultBatching is what service.Deleter uses unless configured otherwise.
var DefaultBatching = Batching{Max: 128, Wait: 2 * time.Millisecond, Running: 1}

// DefaultInFlight is how many requests of one partition a deleter handles at once unless
// configured otherwise: with a topic's partitions spread over its instances, it is what
// lets a batch fill (a partition handled one record at a time gives a batch at most one
// subject per partition) and what lets instances add throughput when stores are slow.
const DefaultInFlight = 64

type batchOp int

const (
	opErase batchOp = iota
	opVerify
	opFind
	opOpen // read the data keys of sealed identifiers (keyed by no store)
)

// String is op's label in lethe_store_batch_subjects.
func (op batchOp) String() string {
	return [...]string{opErase: "erase", opVerify: "verify", opFind: "find", opOpen: "open"}[op]
}

type batchKey struct {
	store string
	op    batchOp
}

// batch is the subjects gathered for one store and operation (for opOpen, the requests),
// and, once run, their outcomes.
type batch struct {
	st       inventory.Entry
	subjects []deletion.Subject
	reqs     []*event.Requested
	ctxs     []context.Context
	full     chan struct{} // closed when the batch reached Max
	done     chan struct{} // closed when the outcomes are set
	results  []deletion.Result
	vers     []event.Verification
	found    [][]event.LocationCount
	ids      []event.Identifiers
	errs     []error
}

// batcher gathers concurrent erasures of one store into batches.
type batcher struct {
	mu      sync.Mutex
	pending map[batchKey]*batch
	slots   map[batchKey]chan struct{} // one token per running batch
}

// errBatchShape is a BatchStore that returned the wrong number of outcomes.
var errBatchShape = errors.New("worker: batch store returned outcomes for a different number of subjects")

// batched submits subj to the pending batch of (st, op), starting one if none is pending,
// and waits for the batch: its outcome for subj is at index i of b's slices for op.
func (w *Worker) batched(ctx context.Context, op batchOp, impl any, st inventory.Entry, subj deletion.Subject) (b *batch, i int, err error) {
	b, i = w.batches.join(batchKey{st.Name, op}, ctx, w.Batching, func(b *batch) {
		b.st = st
		b.subjects = append(b.subjects, subj)
	}, func(b *batch) {
		metrics.Or(w.Metrics).StoreBatch.WithLabelValues(st.Name, op.String()).Observe(float64(len(b.subjects)))
		runBatch(op, impl, b)
	})
	return wait(ctx, b, i)
}

// wait waits for b, or for ctx to end, and returns b with the error of its i-th item.
func wait(ctx context.Context, b *batch, i int) (*batch, int, error) {
	select {
	case <-b.done:
		return b, i, b.errs[i]
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

// join adds an item to the pending batch of k (add appends it) and returns the batch with
// the item's index; the first item of a batch starts the goroutine that runs it after
// cfg.Wait or once it is full.
func (bt *batcher) join(k batchKey, ctx context.Context, cfg Batching, add, run func(*batch)) (*batch, int) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.pending == nil {
		bt.pending, bt.slots = map[batchKey]*batch{}, map[batchKey]chan struct{}{}
	}
	b := bt.pending[k]
	if b == nil {
		b = &batch{full: make(chan struct{}), done: make(chan struct{})}
		bt.pending[k] = b
		slots := bt.slots[k]
		if slots == nil {
			slots = make(chan struct{}, max(cfg.Running, 1))
			bt.slots[k] = slots
		}
		go func() {
			t := time.NewTimer(cfg.Wait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-b.full:
			}
			slots <- struct{}{} // wait, still gathering, while Running batches run
			defer func() { <-slots }()
			bt.mu.Lock()
			if bt.pending[k] == b {
				delete(bt.pending, k)
			}
			bt.mu.Unlock()
			run(b)
		}()
	}
	add(b)
	b.ctxs = append(b.ctxs, ctx)
	if len(b.ctxs) >= cfg.Max {
		delete(bt.pending, k)
		close(b.full)
	}
	return b, len(b.ctxs) - 1
}

// batchContext returns a context that ends when every one of b's callers' contexts has
// ended, and the function that releases it.
func batchContext(b *batch) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(b.ctxs[0]))
	left := int64(len(b.ctxs))
	stops := make([]func() bool, len(b.ctxs))
	for i, c := range b.ctxs {
		stops[i] = context.AfterFunc(c, func() {
			if atomic.AddInt64(&left, -1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// runBatch runs b through impl (a deletion.BatchStore, or for opFind a
// deletion.BatchCounter) under a context that ends when every caller's has ended, and
// publishes the outcomes.
func runBatch(op batchOp, impl any, b *batch) {
	defer close(b.done)
	ctx, release := batchContext(b)
	defer release()
	n := len(b.subjects)
	var got int
	switch op {
	case opErase:
		b.results, b.errs = impl.(deletion.BatchStore).EraseBatch(ctx, b.st, b.subjects)
		got = len(b.results)
	case opVerify:
		b.vers, b.errs = impl.(deletion.BatchStore).VerifyBatch(ctx, b.st, b.subjects)
		got = len(b.vers)
	case opFind:
		b.found, b.errs = impl.(deletion.BatchCounter).CountBatch(ctx, b.st, b.subjects)
		got = len(b.found)
	}
	if got != n || len(b.errs) != n {
		b.results, b.vers, b.found = make([]deletion.Result, n), make([]event.Verification, n), make([][]event.LocationCount, n)
		b.errs = fill(n, errBatchShape)
	}
}

func fill(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// eraseOne erases subj from st, through a batch when the store batches.
func (w *Worker) eraseOne(ctx context.Context, impl deletion.Store, st inventory.Entry, subj deletion.Subject) (deletion.Result, error) {
	if _, ok := impl.(deletion.BatchStore); !ok || !w.batching(subj) {
		return impl.Erase(ctx, st, subj)
	}
	b, i, err := w.batched(ctx, opErase, impl, st, subj)
	if err != nil {
		return deletion.Result{}, err
	}
	return b.results[i], nil
}

// verifyOne verifies subj in st, through a batch when the store batches.
func (w *Worker) verifyOne(ctx context.Context, impl deletion.Store, st inventory.Entry, subj deletion.Subject) (event.Verification, error) {
	if _, ok := impl.(deletion.BatchStore); !ok || !w.batching(subj) {
		return impl.Verify(ctx, st, subj)
	}
	b, i, err := w.batched(ctx, opVerify, impl, st, subj)
	if err != nil {
		return event.Verification{}, err
	}
	return b.vers[i], nil
}

// findOne counts what an erase of subj would delete, through a batch when the store
// counts in batches.
func (w *Worker) findOne(ctx context.Context, counter deletion.Counter, st inventory.Entry, subj deletion.Subject) ([]event.LocationCount, error) {
	if _, ok := counter.(deletion.BatchCounter); !ok || !w.batching(subj) {
		return counter.Count(ctx, st, subj)
	}
	b, i, err := w.batched(ctx, opFind, counter, st, subj)
	if err != nil {
		return nil, err
	}
	return b.found[i], nil
}

// batching reports whether subj's erasure goes through batches.
func (w *Worker) batching(subj deletion.Subject) bool {
	return w.Batching.Max > 1 && !subj.TenantScope()
}

// identifiers returns the identifiers of req (envelope.Sealer.Identifiers). With batching
// on, the data keys of the sealed requests in hand are read together: a read starts as
// soon as none is running, so a request alone is read at once, and the requests arriving
// meanwhile join the next read, up to Batching.Max of them (Sealer.IdentifiersBatch).
func (w *Worker) identifiers(ctx context.Context, req *event.Requested) (event.Identifiers, error) {
	if w.Sealer == nil || req.Sealed == nil || w.Batching.Max < 2 {
		return w.Sealer.Identifiers(ctx, req)
	}
	cfg := Batching{Max: w.Batching.Max, Running: 1}
	b, i := w.batches.join(batchKey{op: opOpen}, ctx, cfg, func(b *batch) {
		b.reqs = append(b.reqs, req)
	}, func(b *batch) {
		defer close(b.done)
		ctx, release := batchContext(b)
		defer release()
		b.ids, b.errs = w.Sealer.IdentifiersBatch(ctx, b.reqs)
	})
	b, i, err := wait(ctx, b, i)
	if err != nil {
		return event.Identifiers{}, err
	}
	return b.ids[i], nil
}
