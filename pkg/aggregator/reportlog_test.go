package aggregator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/dynamo"
	"github.com/lethe-erasure/lethe/pkg/awsclient"
	"github.com/lethe-erasure/lethe/pkg/calls"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// dynamoEnv is an aggregator over a DynamoDB audit table (a store that appends reports,
// auditlog.ReportLog) whose calls are counted by operation.
type dynamoEnv struct {
	store *dynamo.Store
	table string
	addrs []string
	prod  *kgo.Client
}

func setupDynamo(t *testing.T) *dynamoEnv {
	t.Helper()
	b := testenv.Kafka(t, 3, event.TopicRequested, event.TopicStoreDone, event.TopicCompleted, event.TopicSuppressions)
	c := dynamodb.New(dynamodb.Options{BaseEndpoint: aws.String(testenv.DynamoDB(t)), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), APIOptions: []func(*middleware.Stack) error{awsclient.CountCalls}})
	table := testenv.DynamoTable(t, "agg-reportlog")
	st := dynamo.New(c, table)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &dynamoEnv{store: st, table: table, addrs: b.Brokers, prod: testenv.Producer(t, b)}
}

func (e *dynamoEnv) agg() *aggregator.Aggregator {
	return &aggregator.Aggregator{Store: e.store, Producer: e.prod}
}

func (e *dynamoEnv) calls(op string) float64 {
	return testutil.ToFloat64(calls.Total.WithLabelValues(calls.DynamoDB, e.table, op))
}

func (e *dynamoEnv) receipts(t *testing.T, tenant string) []event.Receipt {
	t.Helper()
	rs, err := e.store.Receipts(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	if err := auditlog.VerifyChain(context.Background(), e.store, tenant); err != nil {
		t.Error(err)
	}
	return rs
}

// TestReportLogReadsOnlyToComplete: over a store that appends reports, the aggregator
// reads a request's state once, when its view says the request can complete, not after
// every record; records in any order, and handled twice, still give exactly one receipt
// per request, with every store's counts.
func TestReportLogReadsOnlyToComplete(t *testing.T) {
	e := setupDynamo(t)
	a := e.agg()
	ctx := context.Background()
	var recs []*kgo.Record
	ids := []string{"r1", "r2", "r3", "r4"}
	for _, id := range ids {
		found := event.StoreFound{RequestID: id, TenantID: "acme", Store: "qdrant", Kind: "qdrant", Attempt: 1, Run: "run-" + id,
			Locations: []event.LocationCount{{Location: "a:acme:{subject}", Deleted: 7}}, FoundAt: clock}
		b, err := event.Found.Encode(&found)
		if err != nil {
			t.Fatal(err)
		}
		rs := success(id, "acme", 1)
		rs[0].FoundRuns = []string{found.Run} // the qdrant report waits for its find
		recs = append(recs, reqRec(t, request(id, "acme", 1)), &kgo.Record{Topic: event.TopicStoreFound, Key: []byte(id), Value: b})
		recs = append(recs, doneRecs(t, rs...)...)
	}
	rand.New(rand.NewPCG(5, 6)).Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	q0 := e.calls("Query")
	for _, r := range append(recs, recs...) { // every record twice: a redelivery
		if err := a.Handle(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	queries := e.calls("Query") - q0
	rs := e.receipts(t, "acme")
	if len(rs) != len(ids) {
		t.Fatalf("%d receipts, want %d", len(rs), len(ids))
	}
	for _, r := range rs {
		if r.Status != event.ReceiptComplete || r.Stores[0].Store != "qdrant" || r.Stores[0].Deleted != 10 {
			t.Errorf("receipt of %s: %s, qdrant deleted %d; want COMPLETE with the find's 7 and the report's 3", r.RequestID, r.Status, r.Stores[0].Deleted)
		}
	}
	t.Logf("%.0f queries for %d records handled", queries, 2*len(recs))
	// A request is read when first seen (twice when a report came first: its reports,
	// then), once more when every store reported but its find did not come yet, and once
	// to complete; records handled again after its receipt, none.
	if q := queries; q > float64(4*len(ids)) || q < float64(2*len(ids)) {
		t.Errorf("%.0f queries for %d requests, want two to four each", q, len(ids))
	}
}

// TestReportLogFindsWhatAnotherInstanceStored: two aggregators, each handling some of a
// request's records after both first read it, so neither sees all of them: the re-read
// of a request that cannot complete in a view finds the records the other instance
// stored, and exactly one receipt is issued.
func TestReportLogFindsWhatAnotherInstanceStored(t *testing.T) {
	e := setupDynamo(t)
	a, b := e.agg(), e.agg()
	a.Reread, b.Reread = time.Second, time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	handle := func(agg *aggregator.Aggregator, recs ...*kgo.Record) {
		for _, r := range recs {
			if err := agg.Handle(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 3 {
		id := fmt.Sprintf("x%d", i)
		rs := success(id, "acme", 1)
		handle(a, reqRec(t, request(id, "acme", 1)))
		handle(b, doneRecs(t, rs[2])...) // b reads the request, a does not see this report
		handle(a, doneRecs(t, rs[0], rs[1])...)
	}
	if n := len(e.receipts(t, "acme")); n != 0 {
		t.Fatalf("%d receipts before any re-read; the test needs views that cannot complete", n)
	}

	// the request and every store's report handled by a, the find of one by b in between:
	// a, holding a report of every store, reads at once and completes, with no re-read
	rs := success("y", "acme", 1)
	rs[0].FoundRuns = []string{"run-y"}
	found := event.StoreFound{RequestID: "y", TenantID: "acme", Store: "qdrant", Kind: "qdrant", Attempt: 1, Run: "run-y",
		Locations: []event.LocationCount{{Location: "a:acme:{subject}", Deleted: 1}}, FoundAt: clock}
	b2, err := event.Found.Encode(&found)
	if err != nil {
		t.Fatal(err)
	}
	handle(a, reqRec(t, request("y", "acme", 1)))
	handle(b, &kgo.Record{Topic: event.TopicStoreFound, Key: []byte("y"), Value: b2})
	handle(a, doneRecs(t, rs...)...)
	if rc, err := e.store.GetReceipt(ctx, "y"); err != nil || rc.Stores[0].Deleted != 5 {
		t.Fatalf("receipt of y before any re-read: %+v, %v; want one counting the report's 5", rc.Stores, err)
	}
	go a.Run(ctx, time.Hour) // the re-reads
	go b.Run(ctx, time.Hour)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if rs, err := e.store.Receipts(ctx, "acme"); err == nil && len(rs) == 4 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // a second receipt, if one were issued, would show now
	if n := len(e.receipts(t, "acme")); n != 4 {
		t.Fatalf("%d receipts after the re-reads, want 4", n)
	}
}
