package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// The reference inventory has qdrant (qdrant), redis and langgraph (redis), dataset
// (dataset) and audit_log (audit_log).
var allStores = []string{"qdrant", "redis", "langgraph", "dataset", "audit_log"}

var clock = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// behaviour is how fakeStore behaves for one inventory store.
type behaviour struct {
	items         int64 // the subject's items in the store
	stuck         int64 // items Erase cannot delete: Verify finds them remaining
	noPII         bool  // the store holds pseudonyms only
	eraseFails    int   // the next Erase calls that fail transiently (before deleting)
	races         int   // the next Erase calls that lose a race with another writer (retry.Contended)
	deleteThenErr int   // the next Erase calls that delete and then fail transiently (a lost reply)
	verifyFails   int   // the next Verify calls that fail transiently
	permanent     bool  // Erase fails permanently
	unexamined    int   // items Verify could not read: it reports them unexamined
}

type call struct {
	op, store string
	subj      deletion.Subject
}

// fakeStore is an in-memory deletion.Store that records its calls and fails on demand.
type fakeStore struct {
	mu    sync.Mutex
	by    map[string]*behaviour // by inventory store name
	calls []call
	erase chan struct{} // if set, receives after every Erase call
}

func newFake(by map[string]*behaviour) *fakeStore {
	return &fakeStore{by: by}
}

func (f *fakeStore) Erase(ctx context.Context, st inventory.Entry, s deletion.Subject) (deletion.Result, error) {
	f.mu.Lock()
	defer func() {
		f.mu.Unlock()
		if f.erase != nil {
			f.erase <- struct{}{}
		}
	}()
	f.calls = append(f.calls, call{"erase", st.Name, s})
	b := f.by[st.Name]
	if b == nil {
		return deletion.Result{}, retry.Permanent(fmt.Errorf("fake: no behaviour for %s", st.Name))
	}
	switch {
	case b.permanent:
		return deletion.Result{}, retry.Permanent(errors.New("fake: malformed row"))
	case b.eraseFails > 0:
		b.eraseFails--
		return deletion.Result{}, errors.New("fake: connection refused")
	case b.races > 0:
		b.races--
		return deletion.Result{}, retry.Contended(errors.New("fake: object changed during rewrite"))
	}
	if b.noPII {
		return deletion.Result{NoPIIByDesign: true}, nil
	}
	n := b.items
	b.items = 0
	if b.deleteThenErr > 0 {
		b.deleteThenErr--
		return deletion.Result{}, errors.New("fake: reply lost")
	}
	loc := inventory.Expand("key:{tenant}:{subject}:*", inventory.Vars{Tenant: s.Tenant, Subject: inventory.Subject}, nil)
	return deletion.Result{Locations: []event.LocationCount{{Location: loc, Deleted: n}}}, nil
}

func (f *fakeStore) Verify(ctx context.Context, st inventory.Entry, s deletion.Subject) (event.Verification, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{"verify", st.Name, s})
	b := f.by[st.Name]
	if b.verifyFails > 0 {
		b.verifyFails--
		return event.Verification{}, errors.New("fake: timeout")
	}
	v := event.Verification{Method: "fake read-back", Remaining: b.items + b.stuck, Unexamined: int64(b.unexamined)}
	for i := range b.unexamined {
		v.UnexaminedItems = append(v.UnexaminedItems, fmt.Sprintf("evals/%d.bin: unknown format", i))
	}
	return v, nil
}

// erased returns the stores Erase was called on, sorted, and how often each.
func (f *fakeStore) erased() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, c := range f.calls {
		if c.op == "erase" {
			out[c.store]++
		}
	}
	return out
}

// setup returns a worker serving the kinds in stores with a producer on a fresh kfake
// cluster, and the cluster's addresses.
func setup(t *testing.T, stores map[string]deletion.Store) (*worker.Worker, []string) {
	t.Helper()
	b := testenv.Kafka(t, 3, event.TopicStoreDone, event.TopicStoreFound)
	cl := testenv.Producer(t, b)
	w := &worker.Worker{
		Inventory: inventory.Reference(),
		Stores:    stores,
		Producer:  cl,
		Attempts:  3,
		Backoff:   retry.Backoff{Base: time.Millisecond, Max: 2 * time.Millisecond},
		Now:       func() time.Time { return clock },
	}
	return w, b.Brokers
}

func request(expected, only []string, attempt int) event.Requested {
	return event.Requested{
		RequestID:        "er_1",
		TenantID:         "acme",
		SubjectHash:      "h-alice",
		KeyID:            "k1",
		Identifiers:      event.Identifiers{SubjectID: "alice*", SessionIDs: []string{"s1", "s2"}},
		Scope:            event.ScopeSubject,
		Regulation:       "GDPR",
		RequestedAt:      clock.Add(-time.Hour),
		DueAt:            clock.Add(30 * 24 * time.Hour),
		InventoryVersion: inventory.Reference().Version,
		ExpectedStores:   expected,
		OnlyStores:       only,
		Attempt:          attempt,
	}
}

func record(t *testing.T, r event.Requested) *kgo.Record {
	t.Helper()
	b, err := event.Request.Encode(&r)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: event.TopicRequested, Key: []byte(r.RequestID), Value: b}
}

// reports reads every record on erasure.store.done (the end offsets say how many there
// are: Handle returned only after they were acknowledged) and decodes them, by store.
func reports(t *testing.T, addrs []string) map[string]event.StoreDone {
	t.Helper()
	out := map[string]event.StoreDone{}
	for _, r := range testenv.ReadTopic(t, addrs, event.TopicStoreDone) {
		var d event.StoreDone
		if err := event.Done.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != d.RequestID {
			t.Errorf("report key %q, want the request id %q", r.Key, d.RequestID)
		}
		if _, dup := out[d.Store]; dup {
			t.Errorf("store %s reported twice", d.Store)
		}
		out[d.Store] = d
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The worker acts on exactly the stores whose kind it serves and that the request expects
// (and, for a re-drive, selects), and reports each once with the request's attempt.
func TestHandleSelectsStores(t *testing.T) {
	for _, tc := range []struct {
		name     string
		expected []string
		only     []string
		attempt  int
		want     []string
	}{
		{"every expected store of a served kind", allStores, nil, 1, []string{"audit_log", "langgraph", "redis"}},
		{"a served store the request does not expect", []string{"qdrant", "redis", "audit_log"}, nil, 1, []string{"audit_log", "redis"}},
		{"re-drive of one store", allStores, []string{"langgraph"}, 2, []string{"langgraph"}},
		{"re-drive of a store of an unserved kind", allStores, []string{"qdrant"}, 2, nil},
		{"re-drive of a store the request does not expect", []string{"redis"}, []string{"langgraph"}, 2, nil},
		{"nothing served expected", []string{"qdrant", "dataset"}, nil, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {}, "audit_log": {noPII: true}})
			w, addrs := setup(t, map[string]deletion.Store{"redis": f, "audit_log": f})
			if err := w.Handle(context.Background(), record(t, request(tc.expected, tc.only, tc.attempt))); err != nil {
				t.Fatal(err)
			}
			if got := keys(f.erased()); !slices.Equal(got, tc.want) {
				t.Errorf("erased %v, want %v", got, tc.want)
			}
			got := reports(t, addrs)
			if !slices.Equal(keys(got), tc.want) {
				t.Errorf("reports from %v, want %v", keys(got), tc.want)
			}
			for _, d := range got {
				if d.Attempt != tc.attempt || d.RequestID != "er_1" || d.TenantID != "acme" {
					t.Errorf("%s: attempt %d request %q tenant %q", d.Store, d.Attempt, d.RequestID, d.TenantID)
				}
			}
		})
	}
}

// Each report carries the store's status, counts, verification and inventory facts, and
// the store received the request's subject.
func TestHandleReports(t *testing.T) {
	f := newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {}, "audit_log": {noPII: true}})
	w, addrs := setup(t, map[string]deletion.Store{"redis": f, "audit_log": f})
	req := request(allStores, nil, 1)
	if err := w.Handle(context.Background(), record(t, req)); err != nil {
		t.Fatal(err)
	}
	got := reports(t, addrs)
	inv := inventory.Reference()
	for name, want := range map[string]struct {
		status  event.Status
		deleted int64
	}{
		"redis":     {event.StatusDeleted, 3},
		"langgraph": {event.StatusNothingFound, 0},
		"audit_log": {event.StatusNoPII, 0},
	} {
		d := got[name]
		st, _ := inv.Entry(name)
		if d.Status != want.status || d.Deleted() != want.deleted || d.Error != "" {
			t.Errorf("%s: status %s deleted %d error %q, want %s %d", name, d.Status, d.Deleted(), d.Error, want.status, want.deleted)
		}
		if d.Kind != st.Kind || d.Physical != st.Physical {
			t.Errorf("%s: kind %q physical %q, want the inventory's", name, d.Kind, d.Physical)
		}
		if v := d.Verification; v.Method != "fake read-back" || !v.Clean() || len(v.UnexaminedItems)+len(v.Excluded) != 0 {
			t.Errorf("%s: verification %+v", name, d.Verification)
		}
		if !d.StartedAt.Equal(clock) || !d.FinishedAt.Equal(clock) {
			t.Errorf("%s: started %v finished %v, want %v", name, d.StartedAt, d.FinishedAt, clock)
		}
		if d.Locations == nil {
			t.Errorf("%s: nil locations", name)
		}
		for _, l := range d.Locations {
			if strings.Contains(l.Location, "alice") {
				t.Errorf("%s: location %q holds the raw subject", name, l.Location)
			}
		}
	}
	if loc := got["redis"].Locations; len(loc) != 1 || loc[0] != (event.LocationCount{Location: "key:acme:{subject}:*", Deleted: 3}) {
		t.Errorf("redis locations %+v", loc)
	}
	want := deletion.Subject{Tenant: "acme", ID: "alice*", Hash: "h-alice", Sessions: []string{"s1", "s2"}, Scope: event.ScopeSubject}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.calls {
		if c.subj.Tenant != want.Tenant || c.subj.ID != want.ID || c.subj.Hash != want.Hash ||
			!slices.Equal(c.subj.Sessions, want.Sessions) || c.subj.Scope != want.Scope {
			t.Errorf("%s %s got subject %+v", c.op, c.store, c.subj)
		}
	}
}

// A sweep's re-drive is erased and verified like the request, and its reports carry the
// purpose and pass back to the aggregator.
func TestSweepReportsCarryThePass(t *testing.T) {
	f := newFake(map[string]*behaviour{"redis": {items: 2}, "langgraph": {}})
	w, addrs := setup(t, map[string]deletion.Store{"redis": f})
	req := request(allStores, nil, 1)
	req.Purpose, req.Pass = event.PurposeSweep, "sweep-3"
	if err := w.Handle(context.Background(), record(t, req)); err != nil {
		t.Fatal(err)
	}
	got := reports(t, addrs)
	if len(got) != 2 {
		t.Fatalf("%d reports, want redis and langgraph", len(got))
	}
	for name, d := range got {
		if d.Purpose != event.PurposeSweep || d.Pass != "sweep-3" {
			t.Errorf("%s: purpose %q pass %q, want the sweep's", name, d.Purpose, d.Pass)
		}
	}
	if r := got["redis"]; r.Deleted() != 2 || r.Status != event.StatusDeleted {
		t.Errorf("redis: %s deleted %d, want what reappeared erased", r.Status, r.Deleted())
	}
}

// Transient errors are retried within the budget; after it, and at once for a permanent
// error or items remaining, the store reports FAILED with the reason.
func TestHandleRetriesAndFailures(t *testing.T) {
	for _, tc := range []struct {
		name      string
		b         behaviour
		status    event.Status
		deleted   int64
		remaining int64
		tries     int
		errText   string
	}{
		{"transient erase errors then success", behaviour{items: 2, eraseFails: 2}, event.StatusDeleted, 2, 0, 3, ""},
		{"transient verify error after the delete", behaviour{items: 2, verifyFails: 1}, event.StatusDeleted, 2, 0, 2, ""},
		// The store's reply was lost: the worker cannot know what the first try deleted.
		{"reply lost after the delete", behaviour{items: 2, deleteThenErr: 1}, event.StatusNothingFound, 0, 0, 2, ""},
		{"transient errors beyond the budget", behaviour{items: 2, eraseFails: 5}, event.StatusFailed, 0, -1, 3, "fake: connection refused"},
		{"permanent error", behaviour{items: 2, permanent: true}, event.StatusFailed, 0, -1, 1, "fake: malformed row"},
		// Lost races are retried at once and spend none of the 3 tries, up to a bound.
		{"lost races then success", behaviour{items: 2, races: 6}, event.StatusDeleted, 2, 0, 7, ""},
		{"lost races beyond their bound", behaviour{items: 2, races: 100}, event.StatusFailed, 0, -1, 16 + 3, "fake: object changed during rewrite"},
		{"items remaining after erase", behaviour{items: 2, stuck: 4}, event.StatusFailed, 2, 4, 1, "verification found 4 items remaining"},
		// What the read-back could not read is unknown, never zero.
		{"items unexamined", behaviour{items: 2, unexamined: 2}, event.StatusFailed, 2, 0, 1,
			"verification found 0 items remaining, 2 unexamined (evals/0.bin: unknown format; evals/1.bin: unknown format)"},
		{"many items unexamined", behaviour{unexamined: 7}, event.StatusFailed, 0, 0, 1,
			"verification found 0 items remaining, 7 unexamined (evals/0.bin: unknown format; evals/1.bin: unknown format; " +
				"evals/2.bin: unknown format; evals/3.bin: unknown format; evals/4.bin: unknown format; and 2 more)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			f := newFake(map[string]*behaviour{"redis": &b})
			w, addrs := setup(t, map[string]deletion.Store{"redis": f})
			if err := w.Handle(context.Background(), record(t, request([]string{"redis"}, nil, 1))); err != nil {
				t.Fatal(err)
			}
			if n := f.erased()["redis"]; n != tc.tries {
				t.Errorf("erase tried %d times, want %d", n, tc.tries)
			}
			d := reports(t, addrs)["redis"]
			if d.Status != tc.status || d.Deleted() != tc.deleted || d.Verification.Remaining != tc.remaining || d.Error != tc.errText {
				t.Errorf("got status %s deleted %d remaining %d error %q, want %s %d %d %q",
					d.Status, d.Deleted(), d.Verification.Remaining, d.Error, tc.status, tc.deleted, tc.remaining, tc.errText)
			}
		})
	}
}

// Records that can never be handled are permanent errors: the consumer dead-letters them.
func TestHandleRejectsUndecodable(t *testing.T) {
	f := newFake(map[string]*behaviour{"redis": {}})
	w, addrs := setup(t, map[string]deletion.Store{"redis": f})
	noID := request(allStores, nil, 1)
	noID.RequestID = ""
	done, err := event.Done.Encode(&event.StoreDone{RequestID: "er_1", Store: "redis", Status: event.StatusDeleted})
	if err != nil {
		t.Fatal(err)
	}
	for name, rec := range map[string]*kgo.Record{
		"garbage":            {Value: []byte("not avro")},
		"empty":              {},
		"another event type": {Value: done},
		"no request id":      record(t, noID),
	} {
		err := w.Handle(context.Background(), rec)
		if err == nil || !retry.IsPermanent(err) {
			t.Errorf("%s: got %v, want a permanent error", name, err)
		}
	}
	if len(f.erased()) != 0 || len(reports(t, addrs)) != 0 {
		t.Error("an undecodable record was acted on")
	}
}

type failingProducer struct{}

func (failingProducer) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	out := make(kgo.ProduceResults, len(rs))
	for i, r := range rs {
		out[i] = kgo.ProduceResult{Record: r, Err: errors.New("broker: not enough replicas")}
	}
	return out
}

// When the reports cannot be published, Handle fails transiently so that the consumer
// retries the request instead of marking it.
func TestHandleFailsWhenReportsAreNotAcknowledged(t *testing.T) {
	t.Run("producer error", func(t *testing.T) {
		f := newFake(map[string]*behaviour{"redis": {items: 1}})
		w, _ := setup(t, map[string]deletion.Store{"redis": f})
		w.Producer = failingProducer{}
		err := w.Handle(context.Background(), record(t, request([]string{"redis"}, nil, 1)))
		if err == nil || retry.IsPermanent(err) || !strings.Contains(err.Error(), "not enough replicas") {
			t.Fatalf("got %v, want a transient publish error", err)
		}
	})
	t.Run("broker down", func(t *testing.T) {
		// Nothing listens where the producer looks for its broker.
		down := broker.Config{Brokers: []string{fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))}}
		cl, err := down.NewProducer(kgo.RecordDeliveryTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		f := newFake(map[string]*behaviour{"redis": {items: 1}})
		w := &worker.Worker{Inventory: inventory.Reference(), Stores: map[string]deletion.Store{"redis": f}, Producer: cl}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = w.Handle(ctx, record(t, request([]string{"redis"}, nil, 1)))
		if err == nil || retry.IsPermanent(err) {
			t.Fatalf("got %v, want a transient publish error", err)
		}
		if ctx.Err() != nil {
			t.Fatal("Handle waited for the test's deadline instead of the delivery timeout")
		}
	})
}

// A cancelled context stops the retries and Handle publishes nothing.
func TestHandleStopsOnCancel(t *testing.T) {
	f := newFake(map[string]*behaviour{"redis": {items: 1, eraseFails: 1 << 30}})
	f.erase = make(chan struct{}, 1)
	w, addrs := setup(t, map[string]deletion.Store{"redis": f})
	w.Attempts = 100
	w.Backoff = retry.Backoff{Base: time.Hour, Max: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Handle(ctx, record(t, request([]string{"redis"}, nil, 1))) }()
	<-f.erase
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Handle did not return after cancel")
	}
	if n := len(reports(t, addrs)); n != 0 {
		t.Errorf("%d reports published for a cancelled request", n)
	}
}

// sealedRequest seals the request's identifiers with a sealer on its own directory key
// store, as an intake does, and returns the request and that sealer.
func sealedRequest(t *testing.T, kek *envelope.KEK) (event.Requested, *envelope.Sealer) {
	t.Helper()
	keys, err := envelope.NewDirKeyStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	s := &envelope.Sealer{KEK: kek, Keys: keys}
	req := request(allStores, nil, 1)
	sealed, err := s.SealIdentifiers(t.Context(), req.RequestID, req.Identifiers)
	if err != nil {
		t.Fatal(err)
	}
	req.Sealed, req.Identifiers = sealed, event.Identifiers{SessionIDs: []string{}}
	return req, s
}

func testKEK(t *testing.T) *envelope.KEK {
	t.Helper()
	kek, err := envelope.NewKEK("kek1", map[string][]byte{"kek1": []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	return kek
}

// A request sealed under a key that the worker's key store holds neither as a key nor as a
// tombstone (the intake wrote it to another store) is never taken for complete: every
// store the worker serves reports FAILED with the reason, nothing is erased, and the
// missing-key counter counts it.
func TestMissingDataKeyFailsEveryStore(t *testing.T) {
	kek := testKEK(t)
	req, _ := sealedRequest(t, kek)
	own, err := envelope.NewDirKeyStore(t.TempDir()) // the worker's store: not the intake's
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	fake := newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {items: 2}})
	w, addrs := setup(t, map[string]deletion.Store{"redis": fake})
	w.Sealer = &envelope.Sealer{KEK: kek, Keys: own}
	w.Metrics = metrics.New()
	if err := w.Handle(t.Context(), record(t, req)); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	got := reports(t, addrs)
	if !slices.Equal(keys(got), []string{"langgraph", "redis"}) {
		t.Fatalf("reports for %v, want langgraph and redis", keys(got))
	}
	for name, d := range got {
		if d.Status != event.StatusFailed || d.Error != worker.ReasonMissingKey || d.Verification.Remaining != -1 {
			t.Errorf("%s: status %s, error %q, remaining %d; want FAILED, %q, -1", name, d.Status, d.Error, d.Verification.Remaining, worker.ReasonMissingKey)
		}
	}
	if n := len(fake.erased()); n != 0 {
		t.Errorf("erased %d stores without the identifiers", n)
	}
	if v := testutil.ToFloat64(w.Metrics.MissingDataKeys); v != 1 {
		t.Errorf("lethe_missing_data_keys_total = %v, want 1", v)
	}
}

// A request whose data key was shredded (after its receipt) is an old record replayed: no
// store is touched, nothing is reported, and the missing-key counter stays at zero.
func TestShreddedDataKeyIsAReplay(t *testing.T) {
	kek := testKEK(t)
	req, sealer := sealedRequest(t, kek)
	if err := sealer.Shred(t.Context(), req.RequestID); err != nil {
		t.Fatal(err)
	}
	fake := newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {items: 2}})
	w, addrs := setup(t, map[string]deletion.Store{"redis": fake})
	w.Sealer = sealer
	w.Metrics = metrics.New()
	if err := w.Handle(t.Context(), record(t, req)); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if got := reports(t, addrs); len(got) != 0 {
		t.Errorf("reports for %v after a shredded key, want none", keys(got))
	}
	if n := len(fake.erased()); n != 0 {
		t.Errorf("erased %d stores for a shredded request", n)
	}
	if v := testutil.ToFloat64(w.Metrics.MissingDataKeys); v != 0 {
		t.Errorf("lethe_missing_data_keys_total = %v, want 0", v)
	}
}
