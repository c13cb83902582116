package replay_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/replay"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

const rawSubject = "alice@example.com" // must never leave erasure.requested

var (
	clock    = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	expected = []string{"qdrant", "redis", "audit_log"}
	kinds    = map[string]string{"qdrant": "qdrant", "redis": "redis", "audit_log": "audit_log"}
)

type env struct {
	brokers  broker.Config
	prod     *kgo.Client
	agg      *aggregator.Aggregator
	store    *auditlog.DirStore
	dir      string
	tampered map[string]event.Receipt // receipts the table answers altered (see rewrite)
}

func setup(t *testing.T) *env {
	t.Helper()
	brokers := testenv.Kafka(t, 3, event.TopicRequested, event.TopicStoreDone, event.TopicCompleted, event.TopicSuppressions)
	prod := testenv.Producer(t, brokers)
	dir := t.TempDir()
	st, err := auditlog.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &env{
		brokers: brokers, prod: prod, store: st, dir: dir,
		agg: &aggregator.Aggregator{Store: st, Producer: prod, Now: func() time.Time { return clock }},
	}
}

func request(id, tenant string, attempt int, only ...string) *kgo.Record {
	r := event.Requested{
		RequestID: id, TenantID: tenant, SubjectHash: "hash-of-" + id, KeyID: "k1",
		Identifiers: event.Identifiers{SubjectID: rawSubject, SessionIDs: []string{"session-of-alice"}},
		Scope:       event.ScopeSubject, Regulation: "GDPR",
		RequestedAt: clock.Add(-90 * time.Second), DueAt: clock.Add(30 * 24 * time.Hour),
		InventoryVersion: "v1", ExpectedStores: expected, OnlyStores: only, Attempt: attempt,
	}
	return encode(event.TopicRequested, id, event.Request, &r)
}

func report(id, tenant, store string, status event.Status, attempt int) *kgo.Record {
	d := event.StoreDone{
		RequestID: id, TenantID: tenant, Store: store, Kind: kinds[store], Status: status,
		Locations:    []event.LocationCount{},
		Verification: event.Verification{Method: "read-back", Remaining: 0},
		Attempt:      attempt, StartedAt: clock.Add(-time.Minute), FinishedAt: clock,
	}
	switch status {
	case event.StatusFailed:
		d.Error, d.Verification = "store unavailable", event.Verification{Method: "not verified", Remaining: -1}
	case event.StatusDeleted:
		d.Locations = []event.LocationCount{{Location: "a:" + tenant, Deleted: 2}, {Location: "b:" + tenant, Deleted: 3}}
	}
	return encode(event.TopicStoreDone, id, event.Done, &d)
}

// success is the successful report of every expected store.
func success(id, tenant string, attempt int) []*kgo.Record {
	return []*kgo.Record{
		report(id, tenant, "qdrant", event.StatusDeleted, attempt),
		report(id, tenant, "redis", event.StatusNothingFound, attempt),
		report(id, tenant, "audit_log", event.StatusNoPII, attempt),
	}
}

func receiptRecord(r event.Receipt) *kgo.Record {
	return encode(event.TopicCompleted, r.RequestID, event.Completed, &r)
}

func encode(topic, key string, codec *event.Type, v any) *kgo.Record {
	b, err := codec.Encode(v)
	if err != nil {
		panic(err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: b}
}

// publish produces recs; the aggregator does not see them.
func (e *env) publish(t *testing.T, recs ...*kgo.Record) {
	t.Helper()
	if err := e.prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// handle produces each record, then has the real aggregator handle it, as its consumer would.
func (e *env) handle(t *testing.T, recs ...*kgo.Record) {
	t.Helper()
	for _, r := range recs {
		e.publish(t, r)
		if err := e.agg.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// clean runs three requests of two tenants through the aggregator: one with a redelivered
// last report, one completed by a re-drive after a failed store, and an undecodable record.
func clean(t *testing.T, e *env) {
	t.Helper()
	e.handle(t, request("r-1", "acme", 1))
	e.handle(t, success("r-1", "acme", 1)...)
	e.handle(t, success("r-1", "acme", 1)[2]) // redelivered: the receipt is not published again
	// The same receipt published a second time, as after a crash between the broker's
	// acknowledgement and the aggregator's publication mark.
	r1, err := e.store.GetReceipt(context.Background(), "r-1")
	if err != nil {
		t.Fatal(err)
	}
	e.publish(t, receiptRecord(r1))

	e.handle(t, request("r-2", "acme", 1))
	e.handle(t, report("r-2", "acme", "qdrant", event.StatusDeleted, 1), report("r-2", "acme", "redis", event.StatusFailed, 1),
		report("r-2", "acme", "audit_log", event.StatusNoPII, 1))
	e.handle(t, request("r-2", "acme", 2, "redis"), report("r-2", "acme", "redis", event.StatusDeleted, 2))

	e.handle(t, request("g-1", "globex", 1))
	e.handle(t, success("g-1", "globex", 1)...)

	e.publish(t, &kgo.Record{Topic: event.TopicStoreDone, Key: []byte("junk"), Value: []byte("not an event")})
}

func rebuild(t *testing.T, e *env) *replay.Trail {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	trail, err := replay.Rebuild(ctx, e.brokers, replay.Topics{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return trail
}

func TestCleanRunHasNoFindings(t *testing.T) {
	e := setup(t)
	clean(t, e)
	trail := rebuild(t, e)

	if got := trail.IDs(); !slices.Equal(got, []string{"g-1", "r-1", "r-2"}) {
		t.Fatalf("rebuilt requests %v, want g-1, r-1, r-2", got)
	}
	if trail.Records[event.TopicRequested] != 4 || trail.Records[event.TopicStoreDone] != 12 || trail.Records[event.TopicCompleted] != 4 {
		t.Errorf("records read = %v, want 4 requested, 12 store.done, 4 completed", trail.Records)
	}
	if trail.TotalUndecodable() != 1 || trail.Undecodable[event.TopicStoreDone] != 1 {
		t.Errorf("undecodable = %v, want the one junk record on %s", trail.Undecodable, event.TopicStoreDone)
	}
	r2 := trail.Requests["r-2"]
	if r2.Request == nil || r2.Request.Attempt != 2 || r2.Reports["redis"].Attempt != 2 || r2.Reports["redis"].Status != event.StatusDeleted || len(r2.Reports) != 3 {
		t.Errorf("r-2 rebuilt as %+v, want attempt 2 with redis's second report", r2)
	}
	for _, id := range trail.IDs() {
		if n := len(trail.Requests[id].Published); n != 1 {
			t.Errorf("%s: %d distinct published receipts, want 1 (a republished receipt counts once)", id, n)
		}
	}
	if b, _ := json.Marshal(trail); strings.Contains(string(b), "alice") {
		t.Errorf("the trail holds a raw identifier: %s", b)
	}

	rep := replay.Compare(context.Background(), trail, e.store)
	if !rep.OK() {
		t.Fatalf("findings on a clean run: %+v", rep.Findings)
	}
	if rep.Requests != 3 || rep.Complete != 3 || rep.Stored != 3 || rep.Published != 3 || rep.Tenants != 2 || rep.Undecodable != 1 {
		t.Errorf("report counts %+v, want 3 requests, 3 complete, 3 stored, 3 published, 2 tenants, 1 undecodable", rep)
	}
}

// rewrite makes the audit table answer the receipt of id with change applied, as someone
// with write access to the table could.
func (e *env) rewrite(t *testing.T, id string, change func(*event.Receipt)) {
	t.Helper()
	r, err := e.store.GetReceipt(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	change(&r)
	if e.tampered == nil {
		e.tampered = map[string]event.Receipt{}
	}
	e.tampered[id] = r
}

// view is the audit table as Compare sees it: the store with the tampered receipts.
func (e *env) view() auditlog.Store { return tamperedStore{e.store, e.tampered} }

type tamperedStore struct {
	auditlog.Store
	receipts map[string]event.Receipt
}

func (s tamperedStore) GetReceipt(ctx context.Context, id string) (event.Receipt, error) {
	if r, ok := s.receipts[id]; ok {
		return r, nil
	}
	return s.Store.GetReceipt(ctx, id)
}

func (s tamperedStore) Receipts(ctx context.Context, tenant string) ([]event.Receipt, error) {
	rs, err := s.Store.Receipts(ctx, tenant)
	for i := range rs {
		if r, ok := s.receipts[rs[i].RequestID]; ok {
			rs[i] = r
		}
	}
	return rs, err
}

func TestFindings(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, e *env)
		want   []string // "<request or tenant> <kind>"
	}{{
		name: "tampered receipt keeping its hash",
		damage: func(t *testing.T, e *env) {
			e.rewrite(t, "r-1", func(r *event.Receipt) { r.Stores[0].Deleted = 1 })
		},
		want: []string{"r-1 receipt_mismatch", "r-1 published_mismatch", "acme chain_broken"},
	}, {
		name: "tampered receipt with a recomputed hash",
		damage: func(t *testing.T, e *env) {
			e.rewrite(t, "r-1", func(r *event.Receipt) { r.Regulation = "CCPA"; r.Hash = auditlog.HashReceipt(*r) })
		},
		want: []string{"r-1 receipt_mismatch", "r-1 published_mismatch", "acme chain_broken"},
	}, {
		name: "receipt published twice with different hashes",
		damage: func(t *testing.T, e *env) {
			r, err := e.store.GetReceipt(context.Background(), "g-1")
			if err != nil {
				t.Fatal(err)
			}
			r.ReceiptID, r.Seq, r.PrevHash = "forged", 2, r.Hash
			r.Hash = auditlog.HashReceipt(r)
			e.publish(t, receiptRecord(r))
		},
		want: []string{"g-1 duplicate_receipt", "g-1 published_mismatch"},
	}, {
		name: "stuck request",
		damage: func(t *testing.T, e *env) {
			e.publish(t, request("r-3", "acme", 1))
			e.publish(t, success("r-3", "acme", 1)...)
		},
		want: []string{"r-3 stuck"},
	}, {
		name: "receipt published but not stored",
		damage: func(t *testing.T, e *env) {
			e.publish(t, request("r-4", "acme", 1))
			e.publish(t, success("r-4", "acme", 1)...)
			r, err := e.store.GetReceipt(context.Background(), "r-1")
			if err != nil {
				t.Fatal(err)
			}
			r.RequestID, r.ReceiptID = "r-4", "rcpt-r-4"
			e.publish(t, receiptRecord(r))
		},
		want: []string{"r-4 receipt_not_stored"},
	}, {
		name: "stored receipt without events",
		damage: func(t *testing.T, e *env) {
			issue(t, e, "r-5")
		},
		want: []string{"r-5 receipt_without_events"},
	}, {
		name: "receipt the reports do not justify",
		damage: func(t *testing.T, e *env) {
			e.publish(t, request("r-6", "acme", 1))
			e.publish(t, report("r-6", "acme", "qdrant", event.StatusDeleted, 1), report("r-6", "acme", "redis", event.StatusFailed, 1),
				report("r-6", "acme", "audit_log", event.StatusNoPII, 1))
			issue(t, e, "r-6")
		},
		want: []string{"r-6 receipt_unjustified", "r-6 receipt_not_published"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			clean(t, e)
			tc.damage(t, e)
			rep := replay.Compare(context.Background(), rebuild(t, e), e.view())
			var got []string
			for _, f := range rep.Findings {
				who := f.RequestID
				if who == "" {
					who = f.TenantID
				}
				got = append(got, who+" "+string(f.Kind))
				if f.Detail == "" || strings.Contains(f.Detail, "alice") {
					t.Errorf("finding %+v: want a detail without raw identifiers", f)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings %q, want %q\n%+v", got, tc.want, rep.Findings)
			}
		})
	}
}

// issue links a receipt for id (acme, every store clean) into the store directly.
func issue(t *testing.T, e *env, id string) {
	t.Helper()
	r, err := e.store.GetReceipt(context.Background(), "r-1")
	if err != nil {
		t.Fatal(err)
	}
	r.RequestID, r.ReceiptID, r.SubjectHash = id, "rcpt-"+id, "hash-of-"+id
	if _, err := auditlog.Issue(context.Background(), e.store, r); err != nil {
		t.Fatal(err)
	}
}

func TestRebuildFailsOnMissingTopic(t *testing.T) {
	e := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := replay.Rebuild(ctx, e.brokers, replay.Topics{Completed: "no.such.topic"}, nil)
	if err == nil || !strings.Contains(err.Error(), "no.such.topic") {
		t.Fatalf("Rebuild with a missing topic: %v, want an error naming it", err)
	}
}

func TestRebuildEmptyTopics(t *testing.T) {
	e := setup(t)
	trail := rebuild(t, e)
	rep := replay.Compare(context.Background(), trail, e.store)
	if len(trail.Requests) != 0 || !rep.OK() || rep.Requests != 0 {
		t.Fatalf("empty topics: %d requests, report %+v; want nothing", len(trail.Requests), rep)
	}
}

// A receipt rests on what the aggregator had read when it issued it: a twin of the
// request (the same attempt published again after the intake's state write failed, with
// its own requested_at) and a redelivered run that finished after the receipt change what
// the trail ends with, not the receipt, and are no mismatch. The receipt tampered with
// still is.
func TestStateAfterTheReceiptIsNoMismatch(t *testing.T) {
	e := setup(t)
	e.handle(t, request("r-7", "acme", 1))
	e.handle(t, success("r-7", "acme", 1)...)
	stored, err := e.store.GetReceipt(context.Background(), "r-7")
	if err != nil {
		t.Fatal(err)
	}
	twin := event.Requested{
		RequestID: "r-7", TenantID: "acme", SubjectHash: "hash-of-r-7", KeyID: "k1", Scope: event.ScopeSubject, Regulation: "GDPR",
		RequestedAt: clock.Add(-30 * time.Second), DueAt: clock.Add(30*24*time.Hour + time.Minute),
		InventoryVersion: "v1", ExpectedStores: expected, Attempt: 1,
	}
	late := event.StoreDone{
		RequestID: "r-7", TenantID: "acme", Store: "redis", Kind: kinds["redis"], Status: event.StatusNothingFound,
		Locations:    []event.LocationCount{{Location: "late:acme", Deleted: 0}},
		Verification: event.Verification{Method: "read-back", Remaining: 0},
		Attempt:      1, StartedAt: stored.CompletedAt, FinishedAt: stored.CompletedAt.Add(time.Minute),
	}
	e.handle(t, encode(event.TopicRequested, "r-7", event.Request, &twin), encode(event.TopicStoreDone, "r-7", event.Done, &late))
	e.publish(t, receiptRecord(stored))
	if got := findingKinds(t, e, "r-7"); len(got) != 0 {
		t.Fatalf("findings %v, want none: the receipt rests on the state it was issued from", got)
	}
	e.rewrite(t, "r-7", func(r *event.Receipt) { r.Regulation = "CCPA"; r.Hash = auditlog.HashReceipt(*r) })
	if got := findingKinds(t, e, "r-7"); !slices.Contains(got, replay.KindReceiptMismatch) {
		t.Errorf("a tampered receipt: findings %v, want receipt_mismatch", got)
	}
}

// findingKinds compares the trail rebuilt from e's records with its view and returns the
// kinds of the findings on requestID.
func findingKinds(t *testing.T, e *env, requestID string) []replay.Kind {
	t.Helper()
	var out []replay.Kind
	for _, f := range replay.Compare(context.Background(), rebuild(t, e), e.view()).Findings {
		if f.RequestID == requestID {
			out = append(out, f.Kind)
		}
	}
	return out
}

// TestReceiptFromRecordsHandledBeforeALaterRunIsNoMismatch: a receipt issued while the
// aggregator had not yet handled a run that had finished earlier (it lagged behind the
// deleter) rests on the records it had handled; it is no mismatch, and a tampered one
// still is.
func TestReceiptFromRecordsHandledBeforeALaterRunIsNoMismatch(t *testing.T) {
	e := setup(t)
	e.handle(t, request("r-8", "acme", 1))
	e.handle(t, success("r-8", "acme", 1)...)
	stored, err := e.store.GetReceipt(context.Background(), "r-8")
	if err != nil {
		t.Fatal(err)
	}
	earlier := stored.CompletedAt.Add(-time.Second) // finished before the receipt, handled after it
	second := event.StoreDone{
		RequestID: "r-8", TenantID: "acme", Store: "redis", Kind: kinds["redis"], Status: event.StatusNothingFound,
		Locations:    []event.LocationCount{{Location: "other:acme", Deleted: 0}},
		Verification: event.Verification{Method: "read-back", Remaining: 0, DiscoveryRunAt: &earlier},
		Attempt:      1, StartedAt: earlier, FinishedAt: earlier,
	}
	e.handle(t, encode(event.TopicStoreDone, "r-8", event.Done, &second))
	e.publish(t, receiptRecord(stored))
	if got := findingKinds(t, e, "r-8"); len(got) != 0 {
		t.Fatalf("findings %v, want none: the receipt rests on the records handled when it was issued", got)
	}
	e.rewrite(t, "r-8", func(r *event.Receipt) { r.Stores[0].Deleted++; r.Hash = auditlog.HashReceipt(*r) })
	if got := findingKinds(t, e, "r-8"); !slices.Contains(got, replay.KindReceiptMismatch) {
		t.Errorf("a tampered receipt: findings %v, want receipt_mismatch", got)
	}
}
