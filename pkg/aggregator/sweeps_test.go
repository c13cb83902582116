package aggregator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// countingStore counts the audit store's reads.
type countingStore struct {
	*auditlog.DirStore
	getRequest, getReceipt, reports, requestState, listRequests, receipts, dueCalls, dueTasks, addendaOf atomic.Int64
}

func (s *countingStore) GetRequest(ctx context.Context, id string) (auditlog.Request, error) {
	s.getRequest.Add(1)
	return s.DirStore.GetRequest(ctx, id)
}

func (s *countingStore) GetReceipt(ctx context.Context, id string) (event.Receipt, error) {
	s.getReceipt.Add(1)
	return s.DirStore.GetReceipt(ctx, id)
}

func (s *countingStore) Reports(ctx context.Context, id string) ([]event.StoreDone, error) {
	s.reports.Add(1)
	return s.DirStore.Reports(ctx, id)
}

func (s *countingStore) RequestState(ctx context.Context, id string) (auditlog.RequestState, error) {
	s.requestState.Add(1)
	return s.DirStore.RequestState(ctx, id)
}

func (s *countingStore) ListRequests(ctx context.Context, tenant string) ([]auditlog.Request, error) {
	s.listRequests.Add(1)
	return s.DirStore.ListRequests(ctx, tenant)
}

func (s *countingStore) Receipts(ctx context.Context, tenant string) ([]event.Receipt, error) {
	s.receipts.Add(1)
	return s.DirStore.Receipts(ctx, tenant)
}

func (s *countingStore) Due(ctx context.Context, now time.Time, limit int) ([]auditlog.Task, error) {
	ts, err := s.DirStore.Due(ctx, now, limit)
	s.dueCalls.Add(1)
	s.dueTasks.Add(int64(len(ts)))
	return ts, err
}

func (s *countingStore) AddendaOf(ctx context.Context, id string) ([]auditlog.Addendum, error) {
	s.addendaOf.Add(1)
	return s.DirStore.AddendaOf(ctx, id)
}

// reads is every read of requests, reports and receipts, one per call.
func (s *countingStore) reads() int64 {
	return s.getRequest.Load() + s.getReceipt.Load() + s.reports.Load() + s.requestState.Load() + s.listRequests.Load() + s.receipts.Load() + s.addendaOf.Load()
}

func (s *countingStore) reset() {
	for _, c := range []*atomic.Int64{&s.getRequest, &s.getReceipt, &s.reports, &s.requestState, &s.listRequests, &s.receipts, &s.dueCalls, &s.dueTasks, &s.addendaOf} {
		c.Store(0)
	}
}

func newSealer(t *testing.T) *envelope.Sealer {
	return testenv.Sealer(t)
}

// sealedRequest is request id with its identifiers sealed by s.
func sealedRequest(t *testing.T, s *envelope.Sealer, id, tenant string, stores ...string) event.Requested {
	t.Helper()
	r := request(id, tenant, 1)
	if len(stores) > 0 {
		r.ExpectedStores = stores
	}
	sealed, err := s.SealIdentifiers(context.Background(), id, r.Identifiers)
	if err != nil {
		t.Fatal(err)
	}
	r.Sealed, r.Identifiers = sealed, event.Identifiers{SessionIDs: []string{}}
	return r
}

// With sweeps, 10,000 completed requests and a fake clock: each tick runs exactly the
// tasks due since the last one and reads the store once per task it runs (plus one read
// of the schedule per 500 tasks) — never every request. A tick after a long pause catches
// up everything that fell due meanwhile.
func TestSweepsReadOnlyTheRequestsDue(t *testing.T) {
	b := testenv.Kafka(t, 3, event.TopicRequested, event.TopicStoreDone, event.TopicCompleted, event.TopicSuppressions)
	dir, err := auditlog.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	st := &countingStore{DirStore: dir}
	clk := testenv.NewClock(clock)
	sweeps := []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}
	// Sealed only needs to be present: the tick re-publishes the ciphertext as it is.
	agg := &aggregator.Aggregator{Store: st, Producer: testenv.Producer(t, b), Now: clk.Now, Sealer: newSealer(t),
		Sweeps: sweeps, Retain: 35 * 24 * time.Hour}
	ctx := context.Background()

	const waves, perWave = 10, 1000
	completedAt := make([]time.Time, waves)
	create := func(w int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, perWave)
		sem := make(chan struct{}, 64)
		for i := range perWave {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				id, tenant := fmt.Sprintf("er_%d_%04d", w, i), fmt.Sprintf("t%02d", i%50)
				r := request(id, tenant, 1)
				r.ExpectedStores = []string{"audit_log"}
				r.Sealed = &event.SealedIdentifiers{KEKID: "k", Nonce: []byte("nonce"), Ciphertext: []byte("ciphertext")}
				d := done(id, tenant, "audit_log", event.StatusNoPII, 1)
				for _, rec := range append(doneRecs(t, d), reqRec(t, r)) {
					if err := agg.Handle(ctx, rec); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// due counts the sweeps the model says fall in (from, to].
	due := func(from, to time.Time) int64 {
		var n int64
		for _, c := range completedAt {
			if c.IsZero() {
				continue
			}
			for _, d := range sweeps {
				if at := c.Add(d); at.After(from) && !at.After(to) {
					n += perWave
				}
			}
		}
		return n
	}
	tick := func(from, to time.Time) {
		t.Helper()
		clk.Set(to)
		st.reset()
		ran, err := agg.Tick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := due(from, to)
		calls := st.dueCalls.Load()
		t.Logf("tick at +%v: %d tasks due, ran %d, store reads %d, schedule reads %d", to.Sub(clock), want, ran, st.reads(), calls)
		if int64(ran) != want || st.dueTasks.Load() != want {
			t.Fatalf("tick at +%v ran %d tasks (schedule returned %d), want the %d due", to.Sub(clock), ran, st.dueTasks.Load(), want)
		}
		if st.reads() != want || st.getRequest.Load() != want {
			t.Fatalf("tick at +%v read the store %d times (%d requests), want one read per due sweep: %d", to.Sub(clock), st.reads(), st.getRequest.Load(), want)
		}
		if calls > want/500+1 {
			t.Fatalf("tick read the schedule %d times for %d tasks", calls, want)
		}
	}
	last := clock
	for w := range waves {
		completedAt[w] = clock.Add(time.Duration(w) * time.Hour)
		clk.Set(completedAt[w])
		create(w)
		next := completedAt[w].Add(2 * time.Minute)
		tick(last, next)
		last = next
	}
	all, err := st.DirStore.ListRequests(ctx, "")
	if err != nil || len(all) != waves*perWave {
		t.Fatalf("%d requests stored, %v; want %d", len(all), err, waves*perWave)
	}
	// The aggregator was down for eight days: the next tick catches up what fell due.
	catchUp := last.Add(8 * 24 * time.Hour)
	tick(last, catchUp)
	tick(catchUp, catchUp.Add(time.Hour)) // nothing left but the shredding, 35 days later
	if left, _ := st.DirStore.Due(ctx, catchUp.Add(30*24*time.Hour), 0); len(left) != 0 {
		t.Fatalf("%d tasks due before the retention ends, want none", len(left))
	}
}

// A sweep re-drives the request with its sealed identifiers; reports of the sweep become
// addenda: REAPPEARED (with erasure.reappeared and the metric) where a store deleted
// something, REVERIFIED elsewhere; a redelivered report links nothing new. The key lives
// until the last sweep plus the retention, then is destroyed (SHREDDED), and the physical-
// erasure date of a store that reappeared moves. The chain verifies throughout.
func TestSweepAddendaAndRetention(t *testing.T) {
	b := testenv.Kafka(t, 1, event.TopicRequested, event.TopicStoreDone, event.TopicCompleted, event.TopicReappeared, event.TopicSuppressions)
	st, err := auditlog.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := testenv.NewClock(clock)
	sealer := newSealer(t)
	inv := &inventory.Inventory{Version: "v1", Stores: []inventory.Entry{
		{Name: "qdrant", Kind: "qdrant", PhysicalWithin: 48 * time.Hour},
		{Name: "redis", Kind: "redis", PhysicalWithin: 48 * time.Hour},
		{Name: "audit_log", Kind: "audit_log"},
	}}
	m := metrics.New()
	agg := &aggregator.Aggregator{Store: st, Producer: testenv.Producer(t, b), Now: clk.Now, Sealer: sealer, Inventory: inv,
		Metrics: m, Sweeps: []time.Duration{time.Minute, time.Hour}, Retain: 24 * time.Hour}
	ctx := context.Background()
	e := &env{agg: agg, store: st, addrs: b.Brokers}
	req := sealedRequest(t, sealer, "er_1", "acme")
	e.handle(t, append([]*kgo.Record{reqRec(t, req)}, doneRecs(t, success("er_1", "acme", 1)...)...)...)

	rc, err := st.GetReceipt(ctx, "er_1")
	if err != nil {
		t.Fatal(err)
	}
	if rc.IdentifiersShredAt == nil || !rc.IdentifiersShredAt.Equal(clock.Add(25*time.Hour)) {
		t.Fatalf("identifiers_shred_at %v, want completion + last sweep (1h) + retention (24h)", rc.IdentifiersShredAt)
	}
	if d := rc.Stores[0].PhysicalErasureDue; d == nil || !d.Equal(clock.Add(48*time.Hour)) || rc.Stores[2].PhysicalErasureDue != nil {
		t.Fatalf("physical_erasure_due %v / %v, want completion + 48h for qdrant, none for the audit log", d, rc.Stores[2].PhysicalErasureDue)
	}
	if _, err := sealer.Identifiers(ctx, &req); err != nil {
		t.Fatalf("identifiers after the receipt: %v, want them still sealed and readable", err)
	}

	// The first sweep: a re-drive of every expected store with the same sealed identifiers.
	clk.Set(clock.Add(time.Minute))
	if n, err := agg.Tick(ctx); err != nil || n != 1 {
		t.Fatalf("Tick = %d, %v; want the first sweep", n, err)
	}
	var sweep event.Requested
	recs := testenv.ReadTopic(t, b.Brokers, event.TopicRequested)
	if err := event.Request.Decode(recs[len(recs)-1].Value, &sweep); err != nil {
		t.Fatal(err)
	}
	if sweep.Purpose != event.PurposeSweep || sweep.Pass != "sweep-1" || sweep.Attempt != 1 || len(sweep.ExpectedStores) != 3 ||
		string(sweep.Sealed.Ciphertext) != string(req.Sealed.Ciphertext) {
		t.Fatalf("sweep record %+v, want a SWEEP re-drive of every store with the sealed identifiers", sweep)
	}
	// The aggregator ignores its own re-drive as a request.
	e.handle(t, reqRec(t, sweep))

	pass := func(ds []event.StoreDone) []event.StoreDone {
		for i := range ds {
			ds[i].Purpose, ds[i].Pass = event.PurposeSweep, "sweep-1"
			ds[i].StartedAt, ds[i].FinishedAt = clock.Add(time.Minute), clock.Add(time.Minute+time.Second)
		}
		return ds
	}
	reports := pass([]event.StoreDone{
		done("er_1", "acme", "qdrant", event.StatusNothingFound, 1),
		done("er_1", "acme", "redis", event.StatusDeleted, 1), // a late write came back
		done("er_1", "acme", "audit_log", event.StatusNoPII, 1),
	})
	e.handle(t, doneRecs(t, reports...)...)
	e.handle(t, doneRecs(t, reports[1])...) // redelivered
	ads, err := st.AddendaOf(ctx, "er_1")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, a := range ads {
		types[a.Stores[0].Store] = a.Type
		if a.ReceiptID != rc.ReceiptID || a.Pass != "sweep-1" {
			t.Errorf("addendum %+v does not name the receipt and the pass", a)
		}
	}
	if len(ads) != 3 || types["redis"] != auditlog.AddendumReappeared || types["qdrant"] != auditlog.AddendumReverified || types["audit_log"] != auditlog.AddendumReverified {
		t.Fatalf("addenda %v, want redis REAPPEARED and the others REVERIFIED, once each", types)
	}
	rap := testenv.ReadTopic(t, b.Brokers, event.TopicReappeared)
	if len(rap) != 1 {
		t.Fatalf("%d erasure.reappeared records, want 1", len(rap))
	}
	var ev event.Reappeared
	if err := event.Reappear.Decode(rap[0].Value, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Store != "redis" || ev.Deleted != 5 || ev.RequestID != "er_1" || string(rap[0].Key) != "er_1" {
		t.Fatalf("reappeared %+v, want redis, 5 deleted", ev)
	}
	if got := testutil.ToFloat64(m.Reappeared.WithLabelValues("redis", "redis", event.PurposeSweep)); got != 1 {
		t.Fatalf("lethe_reappeared_total{store=redis} = %v, want 1", got)
	}
	if err := auditlog.VerifyChain(ctx, st, "acme"); err != nil {
		t.Fatal(err)
	}

	// Past the last sweep and the retention: the key is gone, SHREDDED is appended; qdrant
	// is physically erased at its date, redis (reappeared at +1m) only 48h after that.
	clk.Set(clock.Add(48 * time.Hour))
	if _, err := agg.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sealer.Identifiers(ctx, &req); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("identifiers after the retention: %v, want ErrShredded", err)
	}
	ads, _ = st.AddendaOf(ctx, "er_1")
	byType := map[string]int{}
	for _, a := range ads {
		byType[a.Type]++
		if a.Type == auditlog.AddendumPhysical && a.Stores[0].Store != "qdrant" {
			t.Errorf("PHYSICAL for %s, which reappeared 47h59m ago", a.Stores[0].Store)
		}
	}
	if byType[auditlog.AddendumShredded] != 1 || byType[auditlog.AddendumPhysical] != 1 {
		t.Fatalf("addenda %v, want one SHREDDED and one PHYSICAL (qdrant)", byType)
	}
	clk.Set(clock.Add(48*time.Hour + time.Minute + time.Second))
	if _, err := agg.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	ads, _ = st.AddendaOf(ctx, "er_1")
	if last := ads[len(ads)-1]; last.Type != auditlog.AddendumPhysical || last.Stores[0].Store != "redis" {
		t.Fatalf("last addendum %+v, want PHYSICAL for redis once its moved date passed", last)
	}
	if err := auditlog.VerifyChain(ctx, st, "acme"); err != nil {
		t.Fatal(err)
	}
	if left, _ := st.Due(ctx, clock.Add(365*24*time.Hour), 0); len(left) != 0 {
		t.Fatalf("%d tasks left, want none", len(left))
	}
}

// Without sweeps and retention the key is destroyed at the receipt, as before, and the
// receipt keeps hash format 1.
func TestNoSweepsShredsAtReceipt(t *testing.T) {
	e := setup(t)
	sealer := newSealer(t)
	e.agg.Sealer = sealer
	req := sealedRequest(t, sealer, "er_1", "acme")
	e.handle(t, append([]*kgo.Record{reqRec(t, req)}, doneRecs(t, success("er_1", "acme", 1)...)...)...)
	rc, err := e.store.GetReceipt(context.Background(), "er_1")
	if err != nil || rc.IdentifiersShredAt != nil {
		t.Fatalf("receipt %+v, %v; want one without identifiers_shred_at", rc, err)
	}
	if _, err := sealer.Identifiers(context.Background(), &req); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("identifiers after the receipt: %v, want ErrShredded", err)
	}
}

func TestConfig(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		sweeps, retain string
		want           []time.Duration
		wantRetain     time.Duration
		bad            bool
	}{
		{"", "", aggregator.DefaultSweeps, aggregator.DefaultRetain, false},
		{"1m,1h,24h,7d", "35d", []time.Duration{time.Minute, time.Hour, day, 7 * day}, 35 * day, false},
		{"off", "0", nil, 0, false},
		{" 2h , 3d ", "12h", []time.Duration{2 * time.Hour, 3 * day}, 12 * time.Hour, false},
		{"1h,-1h", "", nil, 0, true},
		{"1h,,2h", "", nil, 0, true},
		{"", "soon", nil, 0, true},
		{"", "-1d", nil, 0, true},
	} {
		env := map[string]string{"LETHE_SWEEPS": tc.sweeps, "LETHE_RETAIN": tc.retain}
		var cfg aggregator.Config
		err := envconf.Load(&cfg, func(k string) string { return env[k] })
		if (err != nil) != tc.bad {
			t.Errorf("%q %q: err %v, want error %t", tc.sweeps, tc.retain, err, tc.bad)
			continue
		}
		if !tc.bad && (fmt.Sprint(cfg.Sweeps) != fmt.Sprint(tc.want) || time.Duration(cfg.Retain) != tc.wantRetain) {
			t.Errorf("%q %q: %v %v, want %v %v", tc.sweeps, tc.retain, cfg.Sweeps, cfg.Retain, tc.want, tc.wantRetain)
		}
	}
	// Printed as written, the defaults included.
	var cfg aggregator.Config
	if err := envconf.Defaults(&cfg); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	envconf.Print(&b, cfg)
	if want := "LETHE_SLA_TARGET=0s\nLETHE_SWEEPS=1m,1h,24h,7d\nLETHE_RETAIN=35d\nLETHE_INFLIGHT=64\n"; b.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", b.String(), want)
	}
}
