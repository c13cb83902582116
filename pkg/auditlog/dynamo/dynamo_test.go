package dynamo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/auditlogtest"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// OverwriteReceipt replaces the stored receipt unconditionally (auditlogtest.ReceiptOverwriter).
func (s *Store) OverwriteReceipt(ctx context.Context, r event.Receipt) error {
	item, err := record(reqPK(r.RequestID), "RECEIPT", r)
	if err != nil {
		return err
	}
	item["seq"] = num(r.Seq)
	return s.put(ctx, "overwrite receipt", item, "", nil)
}

// counter counts DynamoDB calls on the wire: every call, and Query calls.
type counter struct {
	base    http.RoundTripper
	calls   atomic.Int64
	queries atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	if r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.Query" {
		c.queries.Add(1)
	}
	return c.base.RoundTrip(r)
}

type env struct {
	client *dynamodb.Client
	wire   *counter
	tables atomic.Int64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	url := testenv.DynamoDB(t)
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	if err != nil {
		t.Fatal(err)
	}
	wire := &counter{base: http.DefaultTransport}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(url)
		o.HTTPClient = &http.Client{Transport: wire, Timeout: 30 * time.Second}
	})
	return &env{client: client, wire: wire}
}

// store returns a Store on a new, empty table.
func (e *env) store(t *testing.T, opts ...Option) *Store {
	t.Helper()
	s := New(e.client, testenv.DynamoTable(t, fmt.Sprintf("audit-%d", e.tables.Add(1))), opts...)
	if err := s.CreateTable(context.Background()); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	return s
}

func TestDynamo(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	t.Run("Suite", func(t *testing.T) {
		auditlogtest.Run(t, func(t *testing.T) auditlog.Store { return e.store(t, PageSize(25)) })
	})

	t.Run("Verifier", func(t *testing.T) {
		deletiontest.Run(t, func(t *testing.T) deletiontest.Fixture {
			s := e.store(t)
			f := auditlogtest.VerifierFixture(t, s, func(t testing.TB, sub deletion.Subject) {
				must(t, s.putEventItem(ctx, sub, "unreadable", nil))
			})
			f.Down = func(t *testing.T) deletion.Store {
				down := dynamodb.New(e.client.Options(), func(o *dynamodb.Options) {
					o.BaseEndpoint = aws.String(fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t)))
					o.RetryMaxAttempts = 1
				})
				return auditlog.NewVerifier(New(down, s.table))
			}
			return f
		})
	})

	t.Run("VerifierReportsUnreadableItems", func(t *testing.T) {
		s := e.store(t, PageSize(2))
		sub := deletiontest.NewSubject("acme", "cust-1")
		must(t, s.AppendEvent(ctx, auditlog.Event{EventID: "ok", TenantID: "acme", SubjectHash: sub.Hash, Type: "query", At: auditlogtest.T0}))
		must(t, s.putEventItem(ctx, sub, "no-data", nil))
		must(t, s.putEventItem(ctx, sub, "number", &types.AttributeValueMemberN{Value: "42"}))
		must(t, s.putEventItem(ctx, sub, "not-json", str(`{"event_id": "not-json", "path": "/customers/cust-1`)))
		v, err := auditlog.NewVerifier(s).Verify(ctx, inventory.Reference().OfKinds(auditlog.Kind)[0], sub)
		must(t, err)
		// Items come in key order: no-data, not-json, number, ok.
		want := []string{
			"audit event 1 of 4 under the subject's pseudonym: the item holds no event JSON",
			"audit event 2 of 4 under the subject's pseudonym: not valid JSON",
			"audit event 3 of 4 under the subject's pseudonym: the item holds no event JSON",
		}
		if v.Remaining != 0 || v.Unexamined != 3 || !slices.Equal(v.UnexaminedItems, want) {
			t.Errorf("Verify = %+v, want 3 unexamined %q", v, want)
		}
		if st := deletion.StatusOf(deletion.Result{NoPIIByDesign: true}, v); st != event.StatusFailed {
			t.Errorf("status %s, want FAILED", st)
		}
	})

	// A request is recorded with two calls: its two index entries together, then the
	// request; ListRequests finds it through either index.
	t.Run("PutRequestInTwoCalls", func(t *testing.T) {
		s := e.store(t)
		r := auditlog.Request{RequestID: "req-calls", TenantID: "acme", SubjectHash: auditlogtest.Hash("calls"), RequestedAt: auditlogtest.T0, Attempt: 1}
		before := e.wire.calls.Load()
		must(t, s.PutRequest(ctx, r))
		if n := e.wire.calls.Load() - before; n != 2 {
			t.Errorf("PutRequest made %d calls, want 2", n)
		}
		for _, tenant := range []string{"acme", ""} {
			rs, err := s.ListRequests(ctx, tenant)
			must(t, err)
			if len(rs) != 1 || rs[0].RequestID != r.RequestID {
				t.Errorf("ListRequests(%q) = %v, want %s", tenant, rs, r.RequestID)
			}
		}
	})

	t.Run("EventsFollowsPages", func(t *testing.T) {
		s := e.store(t, PageSize(40))
		h := auditlogtest.Hash("paged")
		for i := range 130 {
			must(t, s.AppendEvent(ctx, auditlog.Event{EventID: fmt.Sprintf("e%03d", i), TenantID: "acme", SubjectHash: h, Type: "query", At: auditlogtest.T0}))
		}
		before := e.wire.queries.Load()
		evs, err := s.Events(ctx, "acme", h)
		must(t, err)
		pages := e.wire.queries.Load() - before
		if len(evs) != 130 || pages < 4 {
			t.Fatalf("Events = %d events in %d pages, want 130 in at least 4 pages of 40", len(evs), pages)
		}
		all, err := New(e.client, s.table).Events(ctx, "acme", h) // default 1 MB pages
		if err != nil || len(all) != 130 {
			t.Fatalf("Events without a page size = %d, %v", len(all), err)
		}
	})

	t.Run("ListRequestsFollowsPagesAndSkipsOrphans", func(t *testing.T) {
		s := e.store(t, PageSize(40))
		const n = 230 // three BatchGetItem calls of at most 100 keys
		for i := range n {
			r := auditlog.Request{RequestID: fmt.Sprintf("r%03d", i), TenantID: "acme", Attempt: 1,
				RequestedAt: auditlogtest.T0.Add(time.Duration(n-i) * time.Millisecond)}
			must(t, s.PutRequest(ctx, r))
		}
		// A writer that crashed after the index entries, before the request.
		orphan := auditlog.Request{RequestID: "crashed", TenantID: "acme", RequestedAt: auditlogtest.T0}
		must(t, s.putRequestIndex(ctx, orphan))
		before := e.wire.queries.Load()
		for _, tenant := range []string{"acme", ""} {
			got, err := s.ListRequests(ctx, tenant)
			must(t, err)
			if len(got) != n {
				t.Fatalf("ListRequests(%q) = %d requests, want %d (the orphan entry skipped)", tenant, len(got), n)
			}
			for i, r := range got {
				if want := fmt.Sprintf("r%03d", n-1-i); r.RequestID != want {
					t.Fatalf("ListRequests(%q)[%d] = %s, want %s (time order)", tenant, i, r.RequestID, want)
				}
			}
		}
		if pages := e.wire.queries.Load() - before; pages < 2*6 {
			t.Errorf("ListRequests read %d index pages, want at least 6 pages of 40 per call", pages)
		}
		must(t, s.PutRequest(ctx, orphan)) // the retried write completes it
		if got, err := s.ListRequests(ctx, "acme"); err != nil || len(got) != n+1 || got[0].RequestID != "crashed" {
			t.Errorf("after the request was written: %d requests, %v; want %d with it first", len(got), err, n+1)
		}
	})

	t.Run("ConcurrentRequestCallsShareBatches", func(t *testing.T) {
		hold := &holding{base: http.DefaultTransport, calls: map[string]int{}}
		s := New(dynamodb.New(e.client.Options(), func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: hold} }), e.store(t).table)
		req := func(i int) auditlog.Request {
			return auditlog.Request{RequestID: fmt.Sprintf("r%02d", i), TenantID: "acme", Attempt: 1, RequestedAt: auditlogtest.T0.Add(time.Duration(i))}
		}
		// The first writer's index entries are held in flight; twelve writers wait meanwhile
		// and then share one BatchWriteItem call. Each request stays one conditional PutItem.
		release := hold.next("BatchWriteItem")
		var wg sync.WaitGroup
		put := func(r auditlog.Request) {
			if err := s.PutRequest(ctx, r); err != nil {
				t.Errorf("PutRequest(%s): %v", r.RequestID, err)
			}
		}
		wg.Go(func() { put(req(0)) })
		hold.waitHeld(t)
		for i := 1; i <= 12; i++ {
			wg.Go(func() { put(req(i)) })
		}
		waitFor(t, func() bool { return s.reqs.indexes.Waiting() == 12 })
		release()
		wg.Wait()
		if got := hold.count("BatchWriteItem"); got != 2 {
			t.Errorf("13 concurrent PutRequests made %d BatchWriteItem calls, want 2", got)
		}
		if got := hold.count("PutItem"); got != 13 {
			t.Errorf("13 concurrent PutRequests made %d PutItem calls, want 13", got)
		}
		// Readers that come while a read is in flight share the next BatchGetItem call,
		// each with its own answer.
		release = hold.next("BatchGetItem")
		wg.Go(func() {
			if r, err := s.GetRequest(ctx, "r00"); err != nil || r.RequestID != "r00" {
				t.Errorf("GetRequest(r00) = %+v, %v", r, err)
			}
		})
		hold.waitHeld(t)
		for _, id := range []string{"r01", "r05", "r05", "r12", "missing"} {
			wg.Go(func() {
				r, err := s.GetRequest(ctx, id)
				switch {
				case id == "missing" && !errors.Is(err, auditlog.ErrNotFound):
					t.Errorf("GetRequest(missing) = %v, want ErrNotFound", err)
				case id != "missing" && (err != nil || r.RequestID != id):
					t.Errorf("GetRequest(%s) = %+v, %v", id, r, err)
				}
			})
		}
		waitFor(t, func() bool { return s.reqs.gets.Waiting() == 5 })
		release()
		wg.Wait()
		if got := hold.count("BatchGetItem"); got != 2 {
			t.Errorf("6 concurrent GetRequests made %d BatchGetItem calls, want 2", got)
		}
		if got, err := s.ListRequests(ctx, "acme"); err != nil || len(got) != 13 {
			t.Errorf("ListRequests = %d requests, %v; want the 13 written", len(got), err)
		}
	})

	t.Run("CreateTableIsIdempotent", func(t *testing.T) {
		s := e.store(t)
		must(t, s.CreateTable(ctx))
		out, err := e.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)})
		must(t, err)
		td := out.Table
		if td.TableStatus != types.TableStatusActive || len(td.KeySchema) != 2 || *td.KeySchema[0].AttributeName != "pk" || *td.KeySchema[1].AttributeName != "sk" {
			t.Errorf("table = %s %+v", td.TableStatus, td.KeySchema)
		}
		if td.BillingModeSummary == nil || td.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
			t.Errorf("billing mode = %+v, want PAY_PER_REQUEST", td.BillingModeSummary)
		}
	})

	t.Run("KeysDoNotCollide", func(t *testing.T) {
		s := e.store(t)
		must(t, s.AppendEvent(ctx, auditlog.Event{EventID: "1", TenantID: "a#b", SubjectHash: "c", Type: "query", At: auditlogtest.T0}))
		must(t, s.AppendEvent(ctx, auditlog.Event{EventID: "1", TenantID: "a", SubjectHash: "b#c", Type: "query", At: auditlogtest.T0}))
		must(t, s.AppendEvent(ctx, auditlog.Event{EventID: "1", TenantID: "a", SubjectHash: "b%23c", Type: "query", At: auditlogtest.T0}))
		for _, k := range [][2]string{{"a#b", "c"}, {"a", "b#c"}, {"a", "b%23c"}} {
			evs, err := s.Events(ctx, k[0], k[1])
			if err != nil || len(evs) != 1 || evs[0].TenantID != k[0] || evs[0].SubjectHash != k[1] {
				t.Errorf("Events(%q, %q) = %+v, %v; want only its own event", k[0], k[1], evs, err)
			}
		}
		must(t, s.PutReport(ctx, event.StoreDone{RequestID: "r#REPORT#x", Store: "y", Attempt: 1}))
		if ds, err := s.Reports(ctx, "r"); err != nil || len(ds) != 0 {
			t.Errorf("Reports(r) = %+v, %v; want none", ds, err)
		}
	})

	t.Run("ErrorClasses", func(t *testing.T) {
		missing := New(e.client, "no-such-table")
		_, err := missing.GetRequest(ctx, "r")
		if err == nil || errors.Is(err, auditlog.ErrNotFound) || retry.IsPermanent(err) {
			t.Errorf("missing table: %v, want a transient error", err)
		}
		t.Logf("missing table: %v", err)
		// Table names have at least 3 characters. moto takes "x" for a missing table, so
		// this case runs where names are validated as DynamoDB does.
		v := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(testenv.DynamoDBValidating(t)),
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
		invalid := New(v, "x")
		_, err = invalid.GetRequest(ctx, "r")
		if !retry.IsPermanent(err) {
			t.Errorf("invalid table name: %v, want a permanent error", err)
		}
		t.Logf("invalid table name: %v", err)
		s := e.store(t)
		big := make([]string, 0, 5000)
		for i := range cap(big) {
			big = append(big, fmt.Sprintf("chunk-%0100d", i))
		}
		err = s.AppendEvent(ctx, auditlog.Event{EventID: "big", TenantID: "acme", SubjectHash: "h", ChunkIDs: big, At: auditlogtest.T0})
		if !retry.IsPermanent(err) {
			t.Errorf("item over 400 KB: %v, want a permanent error", err)
		}
		t.Logf("item over 400 KB: %.200v", err)
	})
}

// putEventItem writes, bypassing AppendEvent, an event item of sub with id whose "data"
// attribute is data (none when nil), as another writer of the table could.
func (s *Store) putEventItem(ctx context.Context, sub deletion.Subject, id string, data types.AttributeValue) error {
	item := key(eventPK(sub.Tenant, sub.Hash), "EVT#"+esc(id))
	if data != nil {
		item["data"] = data
	}
	return s.put(ctx, "put raw event", item, "", nil)
}

// holding is a transport that counts calls by operation and can hold the next call of an
// operation in flight until released.
type holding struct {
	base http.RoundTripper

	mu      sync.Mutex
	calls   map[string]int
	op      string        // the operation whose next call is held
	gate    chan struct{} // closed to release it
	entered chan struct{} // closed once it is held
}

func (h *holding) RoundTrip(r *http.Request) (*http.Response, error) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	h.mu.Lock()
	h.calls[op]++
	var gate chan struct{}
	if op == h.op {
		gate, h.op = h.gate, ""
		close(h.entered)
	}
	h.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return h.base.RoundTrip(r)
}

// next holds the next call of op; the function it returns releases it.
func (h *holding) next(op string) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.op, h.gate, h.entered = op, make(chan struct{}), make(chan struct{})
	return func() { close(h.gate) }
}

// waitHeld waits until the call next named is held.
func (h *holding) waitHeld(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	entered := h.entered
	h.mu.Unlock()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the held call was never made")
	}
}

func (h *holding) count(op string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[op]
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
