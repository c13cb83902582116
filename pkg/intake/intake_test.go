package intake_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

var start = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// countingStore is the audit table, counting the requests recorded in it.
type countingStore struct {
	auditlog.Table
	puts atomic.Int32
}

func (c *countingStore) PutRequest(ctx context.Context, r auditlog.Request) error {
	c.puts.Add(1)
	return c.Table.PutRequest(ctx, r)
}

type env struct {
	svc    *intake.Service
	srv    *httptest.Server
	store  *countingStore
	addrs  []string
	key    subject.Key
	holdID string // a hold placed by the test, if any

	mu  sync.Mutex
	now time.Time
}

func setup(t *testing.T) *env {
	t.Helper()
	b := testenv.Kafka(t, 3, event.TopicRequested, event.TopicCompleted, event.TopicSuppressions)
	cl := brokerProducer(t, b)
	dir, err := auditlog.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key, err := subject.NewKey("k1", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{store: &countingStore{Table: dir}, addrs: b.Brokers, key: key, now: start}
	e.svc = &intake.Service{
		Key:       key,
		Inventory: inventory.Reference(),
		Producer:  cl,
		Store:     e.store,
		Policy:    intake.DefaultPolicy(),
		Now:       e.clock,
		Workflow:  openWorkflow(t, ""), // in memory: TENANT scope needs a workflow store
	}
	e.srv = httptest.NewServer(e.svc.Handler())
	t.Cleanup(e.srv.Close)
	return e
}

// brokerProducer is intake's producer of b: a produce the broker cannot take fails after a
// second, not the default 15.
func brokerProducer(t *testing.T, b broker.Config) *kgo.Client {
	t.Helper()
	cl, err := b.NewProducer(kgo.RecordDeliveryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *env) setNow(t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = t
}

// published returns every record on erasure.requested, decoded, in offset order within
// a partition (a request id's records share one). Every record was acknowledged before the call that produced
// it returned, so the end offsets say how many there are.
func (e *env) published(t *testing.T) []event.Requested {
	t.Helper()
	var out []event.Requested
	for _, r := range testenv.ReadTopic(t, e.addrs, event.TopicRequested) {
		var req event.Requested
		if err := event.Request.Decode(r.Value, &req); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != req.RequestID {
			t.Errorf("record key %q, want the request id %q", r.Key, req.RequestID)
		}
		out = append(out, req)
	}
	return out
}

// of returns the published records of request id, in order (they share a partition).
func (e *env) of(t *testing.T, id string) []event.Requested {
	t.Helper()
	var out []event.Requested
	for _, r := range e.published(t) {
		if r.RequestID == id {
			out = append(out, r)
		}
	}
	return out
}

func encodeIntake(t *testing.T, in event.IntakeRequest) *kgo.Record {
	t.Helper()
	b, err := event.Intake.Encode(&in)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: event.TopicIntake, Value: b}
}

type failingProducer struct{}

func (failingProducer) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	return kgo.ProduceResults{{Record: rs[0], Err: errors.New("broker: not enough replicas")}}
}

func TestHandleIntake(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	valid := event.IntakeRequest{TenantID: "acme", SubjectID: "alice", SessionIDs: []string{"s1"}, Regulation: "lgpd", Scope: event.ScopeSubject,
		IdempotencyKey: "order-1", Source: "shopbot", SubmittedAt: start}
	if err := e.svc.HandleIntake(ctx, encodeIntake(t, valid)); err != nil {
		t.Fatal(err)
	}
	pub := e.published(t)
	if len(pub) != 1 {
		t.Fatalf("%d requests published, want 1", len(pub))
	}
	r := pub[0]
	if r.Identifiers.SubjectID != "alice" || !slices.Equal(r.Identifiers.SessionIDs, []string{"s1"}) ||
		r.SubjectHash != e.key.Pseudonym("acme", "alice") || r.Regulation != "LGPD" || !r.DueAt.Equal(start.Add(15*24*time.Hour)) {
		t.Errorf("published %+v", r)
	}
	if _, err := e.store.GetRequest(ctx, r.RequestID); err != nil {
		t.Errorf("request not recorded: %v", err)
	}
	// Delivered again: same request, not published twice.
	if err := e.svc.HandleIntake(ctx, encodeIntake(t, valid)); err != nil {
		t.Fatal(err)
	}
	if n := len(e.published(t)); n != 1 {
		t.Errorf("redelivered intake published %d requests, want 1", n)
	}

	badTenant, conflict := valid, valid
	badTenant.TenantID, badTenant.IdempotencyKey = "ACME", ""
	conflict.SubjectID = "bob"
	for name, rec := range map[string]*kgo.Record{
		"garbage":                        {Value: []byte("not avro")},
		"invalid tenant":                 encodeIntake(t, badTenant),
		"idempotency key of another one": encodeIntake(t, conflict),
	} {
		if err := e.svc.HandleIntake(ctx, rec); err == nil || !retry.IsPermanent(err) {
			t.Errorf("%s: got %v, want a permanent error", name, err)
		}
	}
	if n := len(e.published(t)); n != 1 {
		t.Errorf("%d requests published, want only the valid one", n)
	}

	e.svc.Producer = failingProducer{}
	other := valid
	other.IdempotencyKey = "order-2"
	err := e.svc.HandleIntake(ctx, encodeIntake(t, other))
	if !errors.Is(err, intake.ErrUnavailable) || retry.IsPermanent(err) {
		t.Errorf("broker failure: got %v, want a transient ErrUnavailable", err)
	}
}

// A record without an idempotency key is a new request each time it is delivered.
func TestHandleIntakeTwiceWithoutIdempotencyKey(t *testing.T) {
	e := setup(t)
	in := event.IntakeRequest{TenantID: "acme", SubjectID: "alice", SessionIDs: []string{}, Regulation: "GDPR", Scope: event.ScopeSubject, SubmittedAt: start}
	for range 2 {
		if err := e.svc.HandleIntake(context.Background(), encodeIntake(t, in)); err != nil {
			t.Fatal(err)
		}
	}
	pub := e.published(t)
	if len(pub) != 2 || pub[0].RequestID == pub[1].RequestID || pub[0].SubjectHash != pub[1].SubjectHash {
		t.Fatalf("published %d requests (%+v), want two with distinct ids for one subject", len(pub), pub)
	}
}

func TestRedrive(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	ids := event.Identifiers{SubjectID: "alice", SessionIDs: []string{"s1"}}
	first, err := e.svc.Submit(ctx, event.IntakeRequest{TenantID: "acme", SubjectID: ids.SubjectID, SessionIDs: ids.SessionIDs, Regulation: "GDPR"})
	if err != nil {
		t.Fatal(err)
	}
	e.setNow(start.Add(time.Hour))
	got, err := e.svc.Redrive(ctx, first.RequestID, ids, []string{"redis"})
	if err != nil {
		t.Fatal(err)
	}
	pub := e.of(t, first.RequestID)
	if len(pub) != 2 {
		t.Fatalf("%d records, want the request and its re-drive", len(pub))
	}
	r := pub[1]
	if r.RequestID != first.RequestID || r.Attempt != 2 || !slices.Equal(r.OnlyStores, []string{"redis"}) ||
		r.SubjectHash != first.SubjectHash || !r.RequestedAt.Equal(first.RequestedAt) || !r.DueAt.Equal(first.DueAt) ||
		!slices.Equal(r.ExpectedStores, first.ExpectedStores) || r.Identifiers.SubjectID != "alice" || got.Attempt != 2 {
		t.Errorf("re-drive %+v", r)
	}
	if stored, err := e.store.GetRequest(ctx, first.RequestID); err != nil || stored.Attempt != 2 {
		t.Errorf("stored attempt %d (%v), want 2", stored.Attempt, err)
	}
	if again, err := e.svc.Redrive(ctx, first.RequestID, ids, nil); err != nil || again.Attempt != 3 || len(again.OnlyStores) != 0 {
		t.Errorf("second re-drive: attempt %d only %v (%v)", again.Attempt, again.OnlyStores, err)
	}

	tenantReq, err := e.svc.Submit(ctx, event.IntakeRequest{TenantID: "acme", Regulation: "GDPR", Scope: event.ScopeTenant})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Redrive(ctx, tenantReq.RequestID, event.Identifiers{}, []string{"qdrant"}); err != nil {
		t.Errorf("TENANT re-drive: %v", err)
	}
	before := len(e.published(t))

	for _, tc := range []struct {
		name   string
		id     string
		ids    event.Identifiers
		stores []string
		want   error
	}{
		{"another subject", first.RequestID, event.Identifiers{SubjectID: "bob"}, nil, intake.ErrInvalid},
		{"no subject", first.RequestID, event.Identifiers{}, nil, intake.ErrInvalid},
		{"control character in a session", first.RequestID, event.Identifiers{SubjectID: "alice", SessionIDs: []string{"s\n1"}}, nil, intake.ErrInvalid},
		{"a store the request does not expect", first.RequestID, ids, []string{"mysql"}, intake.ErrInvalid},
		{"a subject for a TENANT request", tenantReq.RequestID, ids, nil, intake.ErrInvalid},
		{"unknown request", "er_nope", ids, nil, auditlog.ErrNotFound},
	} {
		if _, err := e.svc.Redrive(ctx, tc.id, tc.ids, tc.stores); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		} else if err != nil && (strings.Contains(err.Error(), "alice") || strings.Contains(err.Error(), "bob")) {
			t.Errorf("%s: error %q names the subject", tc.name, err)
		}
	}
	if n := len(e.published(t)); n != before {
		t.Errorf("rejected re-drives published %d records", n-before)
	}
}

func TestPolicyFromEnv(t *testing.T) {
	t.Setenv("LETHE_SLA", "")
	p, err := intake.PolicyFromEnv()
	if err != nil || p["GDPR"] != 30*24*time.Hour || len(p) != len(intake.DefaultPolicy()) {
		t.Errorf("unset: %v %v", p, err)
	}
	t.Setenv("LETHE_SLA", "GDPR=720h, lgpd = 24h,APPI=1h30m")
	p, err = intake.PolicyFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	for reg, want := range map[string]time.Duration{"GDPR": 720 * time.Hour, "LGPD": 24 * time.Hour, "APPI": 90 * time.Minute, "CCPA": 45 * 24 * time.Hour} {
		if p[reg] != want {
			t.Errorf("%s = %v, want %v", reg, p[reg], want)
		}
	}
	for _, bad := range []string{"GDPR", "GDPR=", "GDPR=thirty days", "GDPR=720", "GDPR=-1h", "GDPR=0s", "=720h", "GDPR=720h,", "GDPR=720h;LGPD=24h"} {
		t.Setenv("LETHE_SLA", bad)
		if p, err := intake.PolicyFromEnv(); err == nil {
			t.Errorf("LETHE_SLA=%q accepted: %v", bad, p)
		}
	}
}
