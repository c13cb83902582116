package aggregator_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
)

var (
	clock    = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	expected = []string{"qdrant", "redis", "audit_log"}
	kinds    = map[string]string{"qdrant": "qdrant", "redis": "redis", "audit_log": "audit_log"}
)

type env struct {
	agg   *aggregator.Aggregator
	store *auditlog.DirStore
	addrs []string
}

func setup(t *testing.T) *env {
	t.Helper()
	b := testenv.Kafka(t, 3, event.TopicRequested, event.TopicStoreDone, event.TopicCompleted, event.TopicSuppressions)
	cl := testenv.Producer(t, b)
	st, err := auditlog.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &env{
		agg:   &aggregator.Aggregator{Store: st, Producer: cl, Now: func() time.Time { return clock }},
		store: st,
		addrs: b.Brokers,
	}
}

func request(id, tenant string, attempt int, only ...string) event.Requested {
	return event.Requested{
		RequestID:        id,
		TenantID:         tenant,
		SubjectHash:      "hash-of-" + id,
		KeyID:            "k1",
		Identifiers:      event.Identifiers{SubjectID: "alice", SessionIDs: []string{"s1"}},
		Scope:            event.ScopeSubject,
		Regulation:       "GDPR",
		RequestedAt:      clock.Add(-90 * time.Second),
		DueAt:            clock.Add(30 * 24 * time.Hour),
		InventoryVersion: "v1",
		ExpectedStores:   expected,
		OnlyStores:       only,
		Attempt:          attempt,
	}
}

// done is a report of store for id; a successful one deleted n items (audit_log: none).
func done(id, tenant, store string, status event.Status, attempt int) event.StoreDone {
	d := event.StoreDone{
		RequestID: id, TenantID: tenant, Store: store, Kind: kinds[store], Status: status,
		Locations:    []event.LocationCount{},
		Verification: event.Verification{Method: "read-back", Remaining: 0},
		Attempt:      attempt, StartedAt: clock.Add(-time.Minute), FinishedAt: clock,
	}
	switch {
	case status == event.StatusFailed:
		d.Error, d.Verification = "store unavailable", event.Verification{Method: "not verified", Remaining: -1}
	case status == event.StatusDeleted:
		d.Locations = []event.LocationCount{{Location: "a:" + tenant + ":{subject}", Deleted: 2}, {Location: "b:" + tenant + ":{subject}", Deleted: 3}}
	}
	return d
}

// success is the successful report of every expected store.
func success(id, tenant string, attempt int) []event.StoreDone {
	return []event.StoreDone{
		done(id, tenant, "qdrant", event.StatusDeleted, attempt),
		done(id, tenant, "redis", event.StatusNothingFound, attempt),
		done(id, tenant, "audit_log", event.StatusNoPII, attempt),
	}
}

func reqRec(t *testing.T, r event.Requested) *kgo.Record {
	t.Helper()
	b, err := event.Request.Encode(&r)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: event.TopicRequested, Key: []byte(r.RequestID), Value: b}
}

func doneRecs(t *testing.T, ds ...event.StoreDone) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for _, d := range ds {
		b, err := event.Done.Encode(&d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &kgo.Record{Topic: event.TopicStoreDone, Key: []byte(d.RequestID), Value: b})
	}
	return out
}

func (e *env) handle(t *testing.T, recs ...*kgo.Record) {
	t.Helper()
	for _, r := range recs {
		if err := e.agg.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// published reads every receipt on erasure.completed (all of them were acknowledged
// before Handle returned, so the end offsets say how many there are).
func published(t *testing.T, addrs []string) []event.Receipt {
	t.Helper()
	var out []event.Receipt
	for _, r := range testenv.ReadTopic(t, addrs, event.TopicCompleted) {
		var rc event.Receipt
		if err := event.Completed.Decode(r.Value, &rc); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != rc.RequestID {
			t.Errorf("receipt key %q, want its request id %q", r.Key, rc.RequestID)
		}
		out = append(out, rc)
	}
	return out
}

// checkReceipts asserts that the store holds exactly one receipt per request in ids, that
// the tenant's chain verifies, and that every receipt published is the stored one.
func checkReceipts(t *testing.T, e *env, tenant string, ids []string) []event.Receipt {
	t.Helper()
	ctx := context.Background()
	stored, err := e.store.Receipts(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	byID := map[string]event.Receipt{}
	for i, r := range stored {
		got = append(got, r.RequestID)
		byID[r.RequestID] = r
		if r.Seq != int64(i+1) {
			t.Errorf("receipt %d of %s has seq %d", i, tenant, r.Seq)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(ids))
	if !slices.Equal(got, want) {
		t.Errorf("tenant %s: receipts for %v, want exactly one for each of %v", tenant, got, want)
	}
	if err := auditlog.VerifyChain(ctx, e.store, tenant); err != nil {
		t.Errorf("tenant %s: %v", tenant, err)
	}
	for _, p := range published(t, e.addrs) {
		s, ok := byID[p.RequestID]
		if p.TenantID != tenant || !ok {
			continue
		}
		if p.ReceiptID != s.ReceiptID || p.Hash != s.Hash || p.Seq != s.Seq {
			t.Errorf("request %s: published receipt %s (seq %d, hash %.8s), stored %s (seq %d, hash %.8s)",
				p.RequestID, p.ReceiptID, p.Seq, p.Hash, s.ReceiptID, s.Seq, s.Hash)
		}
	}
	return stored
}

// A receipt is issued only when every expected store reported success with nothing
// remaining, whatever its kind.
func TestReceiptOnlyWhenEveryStoreSucceeded(t *testing.T) {
	noKind := done("er_1", "acme", "audit_log", event.StatusNoPII, 1)
	noKind.Kind = ""
	otherKind := done("er_1", "acme", "audit_log", event.StatusDeleted, 1)
	otherKind.Kind = "helpdesk-v2"
	remaining := done("er_1", "acme", "redis", event.StatusNothingFound, 1)
	remaining.Verification.Remaining = 1
	unexamined := done("er_1", "acme", "redis", event.StatusNothingFound, 1)
	unexamined.Verification.Unexamined = 1
	for _, tc := range []struct {
		name    string
		reports []event.StoreDone
		receipt bool
	}{
		{"every store succeeded", success("er_1", "acme", 1), true},
		{"one store failed", []event.StoreDone{
			done("er_1", "acme", "qdrant", event.StatusDeleted, 1),
			done("er_1", "acme", "redis", event.StatusFailed, 1),
			done("er_1", "acme", "audit_log", event.StatusNoPII, 1)}, false},
		{"one store missing", success("er_1", "acme", 1)[:2], false},
		{"an unexpected store instead of an expected one", append(success("er_1", "acme", 1)[:2],
			done("er_1", "acme", "langgraph", event.StatusDeleted, 1)), false},
		{"a report naming no kind", append(success("er_1", "acme", 1)[:2], noKind), false},
		{"a store of a kind no Lethe package defines", append(success("er_1", "acme", 1)[:2], otherKind), true},
		{"items remaining behind a success status", []event.StoreDone{
			done("er_1", "acme", "qdrant", event.StatusDeleted, 1), remaining,
			done("er_1", "acme", "audit_log", event.StatusNoPII, 1)}, false},
		{"items unexamined behind a success status", []event.StoreDone{
			done("er_1", "acme", "qdrant", event.StatusDeleted, 1), unexamined,
			done("er_1", "acme", "audit_log", event.StatusNoPII, 1)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			e.handle(t, reqRec(t, request("er_1", "acme", 1)))
			e.handle(t, doneRecs(t, tc.reports...)...)
			rc, err := e.store.GetReceipt(context.Background(), "er_1")
			if !tc.receipt {
				if !errors.Is(err, auditlog.ErrNotFound) {
					t.Errorf("GetReceipt: %v, want ErrNotFound", err)
				}
				if n := len(published(t, e.addrs)); n != 0 {
					t.Errorf("%d receipts published", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pub := published(t, e.addrs)
			if len(pub) != 1 || pub[0].ReceiptID != rc.ReceiptID || pub[0].Hash != rc.Hash {
				t.Fatalf("published %+v, want the stored receipt once", pub)
			}
			if rc.Seq != 1 || rc.PrevHash != "" || rc.Hash != auditlog.HashReceipt(rc) || rc.Status != event.ReceiptComplete ||
				rc.SubjectHash != "hash-of-er_1" || rc.AuditLogPII || rc.ElapsedMS != 90_000 || !rc.CompletedAt.Equal(clock) {
				t.Errorf("receipt %+v", rc)
			}
			checkReceipts(t, e, "acme", []string{"er_1"})
		})
	}
}

// Reports that arrive before their request are recorded; the request completes it.
func TestReportsBeforeRequest(t *testing.T) {
	e := setup(t)
	e.handle(t, doneRecs(t, success("er_1", "acme", 1)...)...)
	if _, err := e.store.GetReceipt(context.Background(), "er_1"); !errors.Is(err, auditlog.ErrNotFound) {
		t.Fatalf("receipt before the request: %v", err)
	}
	e.handle(t, reqRec(t, request("er_1", "acme", 1)))
	checkReceipts(t, e, "acme", []string{"er_1"})
	if n := len(published(t, e.addrs)); n != 1 {
		t.Errorf("%d receipts published, want 1", n)
	}
}

// stream returns every record of requests ids (request and successful reports) of tenant.
func stream(t *testing.T, tenant string, ids ...string) []*kgo.Record {
	var recs []*kgo.Record
	for _, id := range ids {
		recs = append(recs, reqRec(t, request(id, tenant, 1)))
		recs = append(recs, doneRecs(t, success(id, tenant, 1)...)...)
	}
	return recs
}

// Every record delivered twice, in any order, yields one receipt per request, and every
// publication of a request's receipt is the same receipt.
func TestRedeliveryIssuesOneReceipt(t *testing.T) {
	e := setup(t)
	ids := []string{"er_1", "er_2", "er_3"}
	recs := stream(t, "acme", ids...)
	recs = append(recs, recs...)
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	e.handle(t, recs...)

	checkReceipts(t, e, "acme", ids)
	byReq := map[string][]event.Receipt{}
	for _, p := range published(t, e.addrs) {
		byReq[p.RequestID] = append(byReq[p.RequestID], p)
	}
	for _, id := range ids {
		ps := byReq[id]
		if len(ps) == 0 {
			t.Errorf("%s: no receipt published", id)
		}
		for _, p := range ps {
			if p.ReceiptID != ps[0].ReceiptID || p.Hash != ps[0].Hash {
				t.Errorf("%s: published receipts %s and %s", id, ps[0].ReceiptID, p.ReceiptID)
			}
		}
	}
}

// A store that failed at attempt 1 and succeeded when re-driven completes the request; the
// attempt-1 failure delivered again afterwards changes nothing.
func TestRedrive(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.handle(t, reqRec(t, request("er_1", "acme", 1)))
	failed := done("er_1", "acme", "redis", event.StatusFailed, 1)
	e.handle(t, doneRecs(t, done("er_1", "acme", "qdrant", event.StatusDeleted, 1), failed, done("er_1", "acme", "audit_log", event.StatusNoPII, 1))...)
	if _, err := e.store.GetReceipt(ctx, "er_1"); !errors.Is(err, auditlog.ErrNotFound) {
		t.Fatalf("receipt despite a failed store: %v", err)
	}

	e.handle(t, reqRec(t, request("er_1", "acme", 2, "redis")))
	e.handle(t, doneRecs(t, done("er_1", "acme", "redis", event.StatusDeleted, 2))...)
	first := checkReceipts(t, e, "acme", []string{"er_1"})

	e.handle(t, doneRecs(t, failed)...)
	e.handle(t, reqRec(t, request("er_1", "acme", 1))) // the original request, redelivered
	reports, err := e.store.Reports(ctx, "er_1")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range reports {
		if d.Store == "redis" && (d.Attempt != 2 || d.Status != event.StatusDeleted) {
			t.Errorf("stale report replaced the re-driven one: attempt %d status %s", d.Attempt, d.Status)
		}
	}
	if req, err := e.store.GetRequest(ctx, "er_1"); err != nil || req.Attempt != 2 {
		t.Errorf("stored request attempt %d (%v), want 2", req.Attempt, err)
	}
	again := checkReceipts(t, e, "acme", []string{"er_1"})
	if again[0].ReceiptID != first[0].ReceiptID || again[0].Hash != first[0].Hash {
		t.Errorf("receipt changed from %s to %s", first[0].ReceiptID, again[0].ReceiptID)
	}
	if n := len(published(t, e.addrs)); n != 1 {
		t.Errorf("%d publications, want 1 (redelivered records find the receipt published)", n)
	}
}

// A store EXEMPT under a legal hold at the receipt, and erased by the re-drive that
// follows the hold's release, is recorded as a RELEASED addendum chained after the
// receipt, which stays as issued; a redelivered report links nothing more.
func TestErasureAfterReleaseIsAnAddendum(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.handle(t, reqRec(t, request("er_h", "acme", 1)))
	held := done("er_h", "acme", "redis", event.StatusExempt, 1)
	held.Verification = event.Verification{Method: "legal hold: GDPR Art. 17(3)(e) (hold h1)"}
	e.handle(t, doneRecs(t, done("er_h", "acme", "qdrant", event.StatusDeleted, 1), held, done("er_h", "acme", "audit_log", event.StatusNoPII, 1))...)
	first := checkReceipts(t, e, "acme", []string{"er_h"})
	if first[0].Status != event.ReceiptPartial {
		t.Fatalf("receipt %s, want PARTIAL", first[0].Status)
	}
	e.handle(t, reqRec(t, request("er_h", "acme", 2, "redis")))
	after := done("er_h", "acme", "redis", event.StatusDeleted, 2)
	e.handle(t, doneRecs(t, after, after)...)
	ads, err := e.store.AddendaOf(ctx, "er_h")
	if err != nil {
		t.Fatal(err)
	}
	if len(ads) != 1 || ads[0].Type != auditlog.AddendumReleased || ads[0].ReceiptID != first[0].ReceiptID ||
		len(ads[0].Stores) != 1 || ads[0].Stores[0] != (auditlog.AddendumStore{Store: "redis", Status: "DELETED", Deleted: 5}) {
		t.Fatalf("addenda %+v, want one RELEASED for redis", ads)
	}
	again := checkReceipts(t, e, "acme", []string{"er_h"})
	if again[0].Hash != first[0].Hash {
		t.Error("the receipt changed")
	}
	if err := auditlog.VerifyChain(ctx, e.store, "acme"); err != nil {
		t.Errorf("chain with the addendum: %v", err)
	}
}

// A store that found the subject outside the inventory, or could not read a location
// there, holds the receipt back; the re-drive after the inventory was extended, which
// finds nothing outside, completes the request, and its receipt says what was probed.
func TestOutsideTheInventoryHoldsTheReceipt(t *testing.T) {
	for _, o := range []event.OutsideLocation{
		{Location: "crm:{tenant}:{id}", Found: 1, Suggest: "name: crm"},
		{Location: "crm:{tenant}:{id}", Unexamined: "bound reached"},
	} {
		e := setup(t)
		ctx := context.Background()
		e.handle(t, reqRec(t, request("er_o", "acme", 1)))
		redis := done("er_o", "acme", "redis", event.StatusNothingFound, 1)
		redis.Verification.OutsideInventory = []event.OutsideLocation{o}
		e.handle(t, doneRecs(t, done("er_o", "acme", "qdrant", event.StatusDeleted, 1), redis, done("er_o", "acme", "audit_log", event.StatusNoPII, 1))...)
		if _, err := e.store.GetReceipt(ctx, "er_o"); !errors.Is(err, auditlog.ErrNotFound) {
			t.Fatalf("%+v: a receipt while the subject may sit outside the inventory: %v", o, err)
		}
		e.handle(t, reqRec(t, request("er_o", "acme", 2, "redis")))
		again := done("er_o", "acme", "redis", event.StatusNothingFound, 2)
		again.Verification.OutsideInventory = []event.OutsideLocation{{Location: "crm:{tenant}:{id}", Found: 0}}
		e.handle(t, doneRecs(t, again)...)
		rc := checkReceipts(t, e, "acme", []string{"er_o"})
		if rc[0].Status != event.ReceiptComplete {
			t.Fatalf("receipt %s, want COMPLETE", rc[0].Status)
		}
		var probed []event.OutsideLocation
		for _, s := range rc[0].Stores {
			probed = append(probed, s.Verification.OutsideInventory...)
		}
		if len(probed) != 1 || probed[0].Found != 0 || probed[0].Location != "crm:{tenant}:{id}" {
			t.Errorf("the receipt's probes %+v", probed)
		}
	}
}

// The receipts of a tenant form one chain; tenants have separate chains.
func TestReceiptsChainPerTenant(t *testing.T) {
	e := setup(t)
	a := []string{"er_a1", "er_a2", "er_a3", "er_a4", "er_a5"}
	b := []string{"er_b1", "er_b2"}
	ra, rb := stream(t, "acme", a...), stream(t, "globex", b...)
	for i := range max(len(ra), len(rb)) {
		if i < len(ra) {
			e.handle(t, ra[i])
		}
		if i < len(rb) {
			e.handle(t, rb[i])
		}
	}
	for tenant, ids := range map[string][]string{"acme": a, "globex": b} {
		rs := checkReceipts(t, e, tenant, ids)
		for i := 1; i < len(rs); i++ {
			if rs[i].PrevHash != rs[i-1].Hash {
				t.Errorf("%s seq %d does not link to seq %d", tenant, rs[i].Seq, rs[i-1].Seq)
			}
		}
	}
}

// Two aggregators handling the same records at the same time still issue exactly one
// receipt per request into one intact chain, and publish only that receipt. This fails if
// receipts were written without the conditional head swap of auditlog.Issue.
func TestConcurrentAggregators(t *testing.T) {
	e := setup(t)
	var ids []string
	for i := range 15 {
		ids = append(ids, fmt.Sprintf("er_%02d", i))
	}
	recs := stream(t, "acme", ids...)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })

	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(recs))
	for range 2 {
		a := *e.agg // a second instance sharing the table and the topic
		wg.Go(func() {
			<-start
			for _, r := range recs {
				if err := a.Handle(context.Background(), r); err != nil {
					errs <- err
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkReceipts(t, e, "acme", ids)
	byReq := map[string]map[string]bool{}
	for _, p := range published(t, e.addrs) {
		if byReq[p.RequestID] == nil {
			byReq[p.RequestID] = map[string]bool{}
		}
		byReq[p.RequestID][p.ReceiptID] = true
	}
	for _, id := range ids {
		if len(byReq[id]) != 1 {
			t.Errorf("%s: %d distinct receipts published, want 1", id, len(byReq[id]))
		}
	}
}

// Records that can never be handled are permanent errors; the consumer dead-letters them.
func TestHandleRejectsBadRecords(t *testing.T) {
	e := setup(t)
	noStores := request("er_1", "acme", 1)
	noStores.ExpectedStores = nil
	noTenant := request("er_1", "", 1)
	noStore := done("er_1", "acme", "", event.StatusDeleted, 1)
	misplaced := doneRecs(t, success("er_1", "acme", 1)[0])[0]
	misplaced.Topic = event.TopicRequested
	for name, rec := range map[string]*kgo.Record{
		"garbage request":               {Topic: event.TopicRequested, Value: []byte("{}")},
		"garbage report":                {Topic: event.TopicStoreDone, Value: []byte("\xc3\x01junk")},
		"a report on the request topic": misplaced,
		"request without stores":        reqRec(t, noStores),
		"request without tenant":        reqRec(t, noTenant),
		"report without store":          doneRecs(t, noStore)[0],
	} {
		if err := e.agg.Handle(context.Background(), rec); err == nil || !retry.IsPermanent(err) {
			t.Errorf("%s: got %v, want a permanent error", name, err)
		}
	}
	if _, err := e.store.GetRequest(context.Background(), "er_1"); !errors.Is(err, auditlog.ErrNotFound) {
		t.Errorf("a rejected record was recorded: %v", err)
	}
}

type failingProducer struct{}

func (failingProducer) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	return kgo.ProduceResults{{Record: rs[0], Err: errors.New("broker: not enough replicas")}}
}

// A receipt that cannot be published fails the record transiently; the retry publishes
// the receipt already issued.
func TestPublishFailureIsRetried(t *testing.T) {
	e := setup(t)
	recs := stream(t, "acme", "er_1")
	e.handle(t, recs[:len(recs)-1]...)
	last := recs[len(recs)-1]
	ok := e.agg.Producer
	e.agg.Producer = failingProducer{}
	if err := e.agg.Handle(context.Background(), last); err == nil || retry.IsPermanent(err) {
		t.Fatalf("got %v, want a transient error", err)
	}
	stored, err := e.store.GetReceipt(context.Background(), "er_1")
	if err != nil {
		t.Fatal(err)
	}
	e.agg.Producer = ok
	e.handle(t, last)
	pub := published(t, e.addrs)
	if len(pub) != 1 || pub[0].ReceiptID != stored.ReceiptID {
		t.Errorf("published %v, want the receipt issued before the failure", pub)
	}
	checkReceipts(t, e, "acme", []string{"er_1"})
}

// A store's similar items are listed again at the receipt's top level, for review.
func TestBuildListsSimilarForReview(t *testing.T) {
	in := request("er_s", "acme", 1)
	reports := success("er_s", "acme", 1)
	reports[0].Verification.Similar = []string{"900001", "900002"}
	r, ok := aggregator.Build(auditlog.RequestOf(&in), reports, clock)
	want := []event.ReviewItem{{Store: "qdrant", Kind: event.ReviewSimilar, Item: "900001"}, {Store: "qdrant", Kind: event.ReviewSimilar, Item: "900002"}}
	if !ok || r.Status != event.ReceiptComplete || !slices.Equal(r.Review, want) {
		t.Errorf("receipt %s, review %+v; want COMPLETE with %+v", r.Status, r.Review, want)
	}
}

func TestBuild(t *testing.T) {
	in := request("er_1", "acme", 1)
	req := auditlog.RequestOf(&in)
	req.ExpectedStores = []string{"redis", "audit_log", "qdrant"}
	reports := success("er_1", "acme", 1) // in another order than ExpectedStores
	r, ok := aggregator.Build(req, reports, clock)
	if !ok {
		t.Fatal("not complete")
	}
	var order []string
	for _, s := range r.Stores {
		order = append(order, s.Store)
	}
	if !slices.Equal(order, req.ExpectedStores) {
		t.Errorf("stores in order %v, want %v", order, req.ExpectedStores)
	}
	q := r.Stores[2]
	if q.Deleted != 5 || len(q.Locations) != 2 || q.Kind != "qdrant" || q.Status != event.StatusDeleted ||
		!reflect.DeepEqual(q.Verification, event.Verification{Method: "read-back"}) {
		t.Errorf("qdrant evidence %+v", q)
	}
	if r.Stores[0].Deleted != 0 || r.Stores[1].Status != event.StatusNoPII {
		t.Errorf("evidence %+v", r.Stores)
	}
	if r.RequestID != "er_1" || r.TenantID != "acme" || r.SubjectHash != req.SubjectHash || r.KeyID != "k1" ||
		r.Scope != event.ScopeSubject || r.Regulation != "GDPR" || r.InventoryVersion != "v1" ||
		!r.RequestedAt.Equal(req.RequestedAt) || !r.DueAt.Equal(req.DueAt) || !r.CompletedAt.Equal(clock) ||
		r.ElapsedMS != 90_000 || r.Status != event.ReceiptComplete || r.ReceiptID == "" || r.Seq != 0 || r.Hash != "" {
		t.Errorf("receipt %+v", r)
	}
	r2, _ := aggregator.Build(req, reports, clock)
	if r2.ReceiptID == r.ReceiptID {
		t.Error("two builds share a receipt id")
	}

	if _, ok := aggregator.Build(req, nil, clock); ok {
		t.Error("complete without reports")
	}
}

func TestMerge(t *testing.T) {
	deleted := func(attempt int, st event.Status, n int64) event.StoreDone {
		return event.StoreDone{Store: "redis", Attempt: attempt, Status: st, Locations: []event.LocationCount{{Location: "k", Deleted: n}}}
	}
	for name, tc := range map[string]struct {
		prev, next event.StoreDone
		want       int64
		status     event.Status
	}{
		"redelivery finds nothing":     {deleted(1, event.StatusDeleted, 5), deleted(1, event.StatusNothingFound, 0), 5, event.StatusDeleted},
		"redelivery fails transiently": {deleted(1, event.StatusDeleted, 5), deleted(1, event.StatusFailed, 0), 5, event.StatusDeleted},
		"same report twice":            {deleted(1, event.StatusDeleted, 5), deleted(1, event.StatusDeleted, 5), 5, event.StatusDeleted},
		"failure then success":         {deleted(1, event.StatusFailed, 0), deleted(1, event.StatusDeleted, 3), 3, event.StatusDeleted},
		"re-drive replaces":            {deleted(1, event.StatusDeleted, 5), deleted(2, event.StatusNothingFound, 0), 0, event.StatusNothingFound},
		"stale attempt is ignored":     {deleted(2, event.StatusDeleted, 1), deleted(1, event.StatusFailed, 0), 1, event.StatusDeleted},
	} {
		got := aggregator.Merge(tc.prev, tc.next)
		if got.Deleted() != tc.want || got.Status != tc.status {
			t.Errorf("%s: kept %s deleted %d, want %s %d", name, got.Status, got.Deleted(), tc.status, tc.want)
		}
	}
}
