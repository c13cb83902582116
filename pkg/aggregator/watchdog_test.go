package aggregator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/dynamo"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

type capture struct {
	mu   sync.Mutex
	recs []*kgo.Record
	fail error
}

func (c *capture) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out kgo.ProduceResults
	for _, r := range rs {
		if c.fail == nil {
			c.recs = append(c.recs, r)
		}
		out = append(out, kgo.ProduceResult{Record: r, Err: c.fail})
	}
	return out
}

func (c *capture) overdues(t *testing.T) []event.Overdue {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []event.Overdue
	for _, r := range c.recs {
		var o event.Overdue
		if err := event.Overdues.Decode(r.Value, &o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

// watchdogStores are the audit stores the watchdog tests run on: the directory store,
// whose receipts it reads one by one, and DynamoDB, whose it reads together.
func watchdogStores(t *testing.T) map[string]auditlog.Store {
	dir, err := auditlog.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := dynamodb.New(dynamodb.Options{BaseEndpoint: aws.String(testenv.DynamoDB(t)), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	ddb := dynamo.New(c, testenv.DynamoTable(t, "watchdog"))
	if err := ddb.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return map[string]auditlog.Store{"dir": dir, "dynamodb": ddb}
}

func TestWatchdogAnnouncesEachThresholdOnce(t *testing.T) {
	for name, store := range watchdogStores(t) {
		t.Run(name, func(t *testing.T) { testWatchdogThresholds(t, store) })
	}
}

func testWatchdogThresholds(t *testing.T, store auditlog.Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	open := auditlog.Request{RequestID: "r-open", TenantID: "acme", SubjectHash: "h1", Regulation: "GDPR", Scope: event.ScopeSubject,
		RequestedAt: t0, DueAt: t0.Add(100 * time.Hour), ExpectedStores: []string{"qdrant", "redis"}, Attempt: 1}
	done := open
	done.RequestID, done.SubjectHash = "r-done", "h2"
	for _, r := range []auditlog.Request{open, done} {
		if err := store.PutRequest(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.PutReport(ctx, event.StoreDone{RequestID: "r-open", TenantID: "acme", Store: "qdrant", Kind: "qdrant", Status: event.StatusDeleted, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := auditlog.Issue(ctx, store, event.Receipt{RequestID: "r-done", TenantID: "acme", Status: event.ReceiptComplete}); err != nil {
		t.Fatal(err)
	}

	now := t0
	prod := &capture{}
	m := metrics.New()
	w := &Watchdog{Store: store, Producer: prod, Metrics: m, Now: func() time.Time { return now }}
	steps := []struct {
		at        time.Duration
		announced []int // thresholds announced so far
		overdue   float64
	}{
		{10 * time.Hour, nil, 0},
		{55 * time.Hour, []int{50}, 0},
		{60 * time.Hour, []int{50}, 0}, // nothing new
		{101 * time.Hour, []int{50, 100}, 1},
		{120 * time.Hour, []int{50, 100}, 1},
	}
	for _, s := range steps {
		now = t0.Add(s.at)
		if err := w.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		got := prod.overdues(t)
		if len(got) != len(s.announced) {
			t.Fatalf("at +%v: %d announcements, want %v", s.at, len(got), s.announced)
		}
		for i, o := range got {
			if o.Threshold != s.announced[i] || o.RequestID != "r-open" || len(o.PendingStores) != 1 || o.PendingStores[0] != "redis" {
				t.Errorf("at +%v: announcement %d = %+v", s.at, i, o)
			}
		}
		if v := testutil.ToFloat64(m.Overdue.WithLabelValues("acme")); v != s.overdue {
			t.Errorf("at +%v: overdue gauge %v, want %v", s.at, v, s.overdue)
		}
	}
	if v := testutil.ToFloat64(m.SLAThreshold.WithLabelValues("100", event.WindowLegal)); v != 1 {
		t.Errorf("100%% crossings counted %v", v)
	}

	// A failed publish announces nothing, and the next sweep tries again.
	fresh := open
	fresh.RequestID = "r-late"
	store.PutRequest(ctx, fresh)
	prod.fail = errors.New("broker down")
	if err := w.Sweep(ctx); err == nil {
		t.Fatal("sweep with a failing broker succeeded")
	}
	prod.fail = nil
	if err := w.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(prod.overdues(t)); n != 3 {
		t.Errorf("%d announcements after the retry, want 3", n)
	}
}

// With an internal target, the target window is announced beside the legal one.
func TestWatchdogInternalTarget(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	store := openRequest(t, t0, 30*24*time.Hour)
	now := t0.Add(6 * time.Minute)
	prod := &capture{}
	m := metrics.New()
	w := &Watchdog{Store: store, Producer: prod, Metrics: m, Target: 5 * time.Minute, Now: func() time.Time { return now }}
	if err := w.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	got := prod.overdues(t)
	if len(got) != 1 || got[0].Window != event.WindowTarget || got[0].Threshold != 100 || !got[0].DueAt.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("announcements %+v, want the target missed", got)
	}
	if v := testutil.ToFloat64(m.Overdue.WithLabelValues("acme")); v != 0 {
		t.Errorf("legally overdue %v, want 0: the legal window is far from over", v)
	}
	now = t0.Add(16 * 24 * time.Hour)
	if err := w.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got = prod.overdues(t); len(got) != 2 || got[1].Window != event.WindowLegal || got[1].Threshold != 50 {
		t.Errorf("announcements %+v, want the legal 50%% next", got)
	}
}

// openRequest returns a directory store holding one open request "r" of tenant acme,
// requested at t0 and due after due, expecting the store qdrant. It is closed when t ends.
func openRequest(t *testing.T, t0 time.Time, due time.Duration) *auditlog.DirStore {
	t.Helper()
	store, err := auditlog.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	r := auditlog.Request{RequestID: "r", TenantID: "acme", SubjectHash: "h", Regulation: "GDPR", Scope: event.ScopeSubject,
		RequestedAt: t0, DueAt: t0.Add(due), ExpectedStores: []string{"qdrant"}, Attempt: 1}
	if err := store.PutRequest(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return store
}
