package dynamo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
	auditdynamo "github.com/lethe-erasure/lethe/pkg/auditlog/dynamo"
	"github.com/lethe-erasure/lethe/pkg/awsclient"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	"github.com/lethe-erasure/lethe/pkg/workflow"
	"github.com/lethe-erasure/lethe/pkg/workflow/workflowtest"
)

// counter counts DynamoDB calls on the wire by operation.
type counter struct {
	base http.RoundTripper
	ops  [4]atomic.Int64 // Query, Scan, PutItem, GetItem
}

var counted = []string{"Query", "Scan", "PutItem", "GetItem"}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	for i, op := range counted {
		if r.Header.Get("X-Amz-Target") == "DynamoDB_20120810."+op {
			c.ops[i].Add(1)
		}
	}
	return c.base.RoundTrip(r)
}

func (c *counter) calls(op string) int64 {
	for i, o := range counted {
		if o == op {
			return c.ops[i].Load()
		}
	}
	panic(op)
}

type env struct {
	url    string
	wire   *counter
	client *dynamodb.Client
	tables atomic.Int64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{url: testenv.DynamoDB(t), wire: &counter{base: http.DefaultTransport}}
	e.client = e.newClient(t, e.wire)
	return e
}

// newClient returns a client of its own (its own connection pool, as another process has)
// that sends its calls through rt, or the services' HTTP client when rt is nil.
func (e *env) newClient(t *testing.T, rt http.RoundTripper) *dynamodb.Client {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithHTTPClient(awsclient.HTTPClient()))
	if err != nil {
		t.Fatal(err)
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(e.url)
		if rt != nil {
			o.HTTPClient = &http.Client{Transport: rt, Timeout: 30 * time.Second}
		}
	})
}

// table creates a new audit table, as the audit store creates it, and returns its name.
func (e *env) table(t *testing.T) string {
	t.Helper()
	name := testenv.DynamoTable(t, fmt.Sprintf("audit-%d", e.tables.Add(1)))
	if err := auditdynamo.New(e.client, name).CreateTable(context.Background()); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	return name
}

func TestDynamo(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	// Small pages, so that List and Holds follow LastEvaluatedKey; the replica is a
	// store on another client, as a second intake process has.
	t.Run("Suite", func(t *testing.T) {
		workflowtest.Run(t, workflowtest.Fixture{
			New: func(t *testing.T) workflow.Store { return New(e.client, e.table(t), PageSize(7)) },
			Replica: func(t *testing.T, s workflow.Store) workflow.Store {
				return New(e.newClient(t, nil), s.(*Store).table, PageSize(7))
			},
		})
	})

	// Each record and hold is one item under the table's keys; Swap moves the version
	// attribute with the JSON.
	t.Run("ItemLayout", func(t *testing.T) {
		s := New(e.client, e.table(t))
		r := workflowtest.Record("er/1#a", workflowtest.T0)
		must(t, s.Create(ctx, r))
		must(t, s.PutHold(ctx, workflow.Hold{ID: "hold 1", TenantID: "acme", CreatedAt: workflowtest.T0}))
		item := raw(t, s, "WF#REC", "er%2F1%23a")
		if n, _ := item["version"].(*types.AttributeValueMemberN); n == nil || n.Value != "1" {
			t.Errorf("record item version = %v, want N 1", item["version"])
		}
		if d, _ := item["data"].(*types.AttributeValueMemberS); d == nil || !strings.Contains(d.Value, `"request_id":"er/1#a"`) {
			t.Errorf("record item data = %v, want the record's JSON", item["data"])
		}
		stored, err := s.Get(ctx, r.RequestID)
		must(t, err)
		_, err = s.Swap(ctx, stored)
		must(t, err)
		if n, _ := raw(t, s, "WF#REC", "er%2F1%23a")["version"].(*types.AttributeValueMemberN); n == nil || n.Value != "2" {
			t.Errorf("record item version after Swap = %v, want N 2", n)
		}
		if d, _ := raw(t, s, "WF#HOLD", "hold%201")["data"].(*types.AttributeValueMemberS); d == nil || !strings.Contains(d.Value, `"hold_id":"hold 1"`) {
			t.Errorf("hold item data = %v, want the hold's JSON", d)
		}
	})

	// List and Holds query their partitions page by page; nothing scans the table.
	t.Run("ListQueriesPagesWithoutScan", func(t *testing.T) {
		s := New(e.client, e.table(t), PageSize(10))
		for i := range 45 {
			must(t, s.Create(ctx, workflowtest.Record(fmt.Sprintf("er_%02d", i), workflowtest.T0)))
			must(t, s.PutHold(ctx, workflow.Hold{ID: fmt.Sprintf("hold_%02d", i), TenantID: "acme", CreatedAt: workflowtest.T0}))
		}
		scans, queries := e.wire.calls("Scan"), e.wire.calls("Query")
		rs, err := s.List(ctx)
		must(t, err)
		hs, err := s.Holds(ctx)
		must(t, err)
		if len(rs) != 45 || len(hs) != 45 {
			t.Fatalf("List = %d, Holds = %d; want 45 each", len(rs), len(hs))
		}
		if q := e.wire.calls("Query") - queries; q < 2*5 {
			t.Errorf("List and Holds made %d queries, want at least 5 pages of 10 each", q)
		}
		if n := e.wire.calls("Scan") - scans; n != 0 {
			t.Errorf("List and Holds made %d Scan calls, want none", n)
		}
	})

	// Holds callers that come while a query is in flight share the next query, each
	// answered in full.
	t.Run("ConcurrentHoldsShareAQuery", func(t *testing.T) {
		hold := &holding{base: http.DefaultTransport}
		s := New(e.newClient(t, hold), e.table(t))
		for i := range 3 {
			must(t, s.PutHold(ctx, workflow.Hold{ID: fmt.Sprintf("hold_%d", i), TenantID: "acme", CreatedAt: workflowtest.T0}))
		}
		read := func() {
			if hs, err := s.Holds(ctx); err != nil || len(hs) != 3 {
				t.Errorf("Holds = %d holds, %v; want 3", len(hs), err)
			}
		}
		var wg sync.WaitGroup
		hold.holdNext()
		wg.Go(read)
		<-hold.held
		for range 10 {
			wg.Go(read)
		}
		for deadline := time.Now().Add(10 * time.Second); s.holds.Waiting() < 10; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the readers never waited")
			}
		}
		close(hold.release)
		wg.Wait()
		if n := hold.queries.Load(); n != 2 {
			t.Errorf("11 concurrent Holds calls made %d queries, want 2", n)
		}
	})

	// The workflow shares the audit table with the audit store: a record and a request of
	// one id, a hold and the audit store's items stay apart.
	t.Run("SharesTheAuditTable", func(t *testing.T) {
		table := e.table(t)
		audit, wf := auditdynamo.New(e.client, table), New(e.client, table)
		req := auditlog.Request{RequestID: "er_1", TenantID: "acme", SubjectHash: "3f9a", Scope: event.ScopeSubject, RequestedAt: workflowtest.T0, Attempt: 1}
		must(t, audit.PutRequest(ctx, req))
		must(t, audit.AppendEvent(ctx, auditlog.Event{EventID: "erasure_approved:er_1", TenantID: "acme", SubjectHash: "3f9a", Type: "erasure_approved", At: workflowtest.T0}))
		must(t, wf.Create(ctx, workflowtest.Record("er_1", workflowtest.T0)))
		must(t, wf.PutHold(ctx, workflow.Hold{ID: "er_1", TenantID: "acme", CreatedAt: workflowtest.T0}))
		if st, err := audit.RequestState(ctx, "er_1"); err != nil || st.Request.RequestID != "er_1" || len(st.Reports) != 0 {
			t.Errorf("RequestState = %+v, %v; want the request alone", st, err)
		}
		if rs, err := audit.ListRequests(ctx, ""); err != nil || len(rs) != 1 {
			t.Errorf("ListRequests = %d, %v; want 1", len(rs), err)
		}
		if rs, err := wf.List(ctx); err != nil || len(rs) != 1 || rs[0].RequestID != "er_1" {
			t.Errorf("List = %d, %v; want the record", len(rs), err)
		}
		if hs, err := wf.Holds(ctx); err != nil || len(hs) != 1 {
			t.Errorf("Holds = %d, %v; want 1", len(hs), err)
		}
	})

	t.Run("ErrorClasses", func(t *testing.T) {
		missing := New(e.client, "no-such-table")
		for name, err := range map[string]error{
			"Get":    second(missing.Get(ctx, "er_1")),
			"Create": missing.Create(ctx, workflowtest.Record("er_1", workflowtest.T0)),
			"Swap":   second(missing.Swap(ctx, workflowtest.Record("er_1", workflowtest.T0))),
			"List":   second(missing.List(ctx)),
			"Holds":  second(missing.Holds(ctx)),
		} {
			if err == nil || retry.IsPermanent(err) || errors.Is(err, workflow.ErrNotFound) || errors.Is(err, workflow.ErrConflict) {
				t.Errorf("%s on a missing table: %v, want a transient error", name, err)
			}
		}
		// Table names have at least 3 characters. moto takes "x" for a missing table, so
		// this case runs where names are validated as DynamoDB does.
		v := &env{url: testenv.DynamoDBValidating(t)}
		invalid := New(v.newClient(t, nil), "x")
		if _, err := invalid.Get(ctx, "er_1"); !retry.IsPermanent(err) {
			t.Errorf("invalid table name: %v, want a permanent error", err)
		}
		s := New(e.client, e.table(t))
		big := workflowtest.Record("er_big", workflowtest.T0)
		big.Event = make([]byte, 400<<10)
		if err := s.Create(ctx, big); !retry.IsPermanent(err) {
			t.Errorf("item over 400 KB: %.200v, want a permanent error", err)
		}
		if err := s.Create(ctx, workflow.Record{}); !retry.IsPermanent(err) {
			t.Errorf("record without a request id: %v, want a permanent error", err)
		}
		if err := s.PutHold(ctx, workflow.Hold{}); !retry.IsPermanent(err) {
			t.Errorf("hold without an id: %v, want a permanent error", err)
		}
		// An item another writer left without its JSON.
		_, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: key(recordsPK, "er_bad")})
		must(t, err)
		if _, err := s.Get(ctx, "er_bad"); !retry.IsPermanent(err) {
			t.Errorf("item without data: %v, want a permanent error", err)
		}
		if _, err := s.List(ctx); !retry.IsPermanent(err) {
			t.Errorf("List over an item without data: %v, want a permanent error", err)
		}
	})
}

// raw reads the item (pk, sk) as stored.
func raw(t *testing.T, s *Store, pk, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := s.c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(s.table),
		Key: map[string]types.AttributeValue{"pk": str(pk), "sk": str(sk)}, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("item (%s, %s): %v, %v", pk, sk, out, err)
	}
	return out.Item
}

func second[T any](_ T, err error) error { return err }

// holding counts Query calls and can hold the next one until release is closed.
type holding struct {
	base    http.RoundTripper
	queries atomic.Int64
	armed   atomic.Bool
	held    chan struct{} // closed when the next query is held
	release chan struct{}
}

// holdNext holds the next query.
func (h *holding) holdNext() {
	h.held, h.release = make(chan struct{}), make(chan struct{})
	h.armed.Store(true)
}

func (h *holding) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.Query" {
		h.queries.Add(1)
		if h.armed.CompareAndSwap(true, false) {
			close(h.held)
			<-h.release
		}
	}
	return h.base.RoundTrip(r)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
