package intake_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lethe-erasure/lethe/pkg/auditlog/dynamo"
	"github.com/lethe-erasure/lethe/pkg/calls"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	wfdynamo "github.com/lethe-erasure/lethe/pkg/workflow/dynamo"
)

// onDynamo gives e's intake the audit table and the workflow on DynamoDB, as the intake
// service has them, through a client that counts its calls (calls.AWS) and whose every
// round trip takes at least latency. It returns the table's name.
func onDynamo(t *testing.T, e *env, latency time.Duration) string {
	t.Helper()
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(testenv.DynamoDB(t)),
		APIOptions:   []func(*middleware.Stack) error{calls.AWS},
		HTTPClient:   &http.Client{Transport: slowTransport{latency}, Timeout: 30 * time.Second},
	})
	table := testenv.DynamoTable(t, "audit")
	store := dynamo.New(client, table)
	if err := store.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.store = &countingStore{Table: store}
	e.svc.Store, e.svc.Workflow = e.store, wfdynamo.New(client, table)
	return table
}

// slowTransport delays each round trip by d before sending it.
type slowTransport struct{ d time.Duration }

func (s slowTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	time.Sleep(s.d)
	return http.DefaultTransport.RoundTrip(r)
}

// tableCalls returns the calls made so far to table, by operation.
func tableCalls(t *testing.T, table string) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 256)
	go func() { calls.Total.Collect(ch); close(ch) }()
	out := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["backend"] == calls.DynamoDB && labels["target"] == table {
			out[labels["op"]] += pb.GetCounter().GetValue()
		}
	}
	return out
}

// since returns the calls of now that were not in before, by operation, and their sum.
func since(before, now map[string]float64) (map[string]float64, float64) {
	out, sum := map[string]float64{}, 0.0
	for op, n := range now {
		if d := n - before[op]; d != 0 {
			out[op] = d
			sum += d
		}
	}
	return out, sum
}

// An accepted submission with an idempotency key makes four calls to the audit table:
// the key's look-up, the read of the legal holds, the request's index entries and the
// request itself. Its answer needs no other read, and the request is found right after
// it. A second submission with the key reads the request and publishes nothing.
func TestSubmitCallsToTheAuditTable(t *testing.T) {
	e, _ := gated(t, nil)
	table := onDynamo(t, e, 0)
	before := tableCalls(t, table)
	acc := e.submit(t, body(t, nil), append(bearer(acmeToken), "Idempotency-Key", "order-1")...)
	got, n := since(before, tableCalls(t, table))
	want := map[string]float64{"BatchGetItem": 1, "Query": 1, "BatchWriteItem": 1, "PutItem": 1}
	if n != 4 || !sameCounts(got, want) {
		t.Errorf("calls to the audit table for one submission: %v, want %v", got, want)
	}
	if acc.State != "" {
		t.Errorf("answer state %q, want none: the request runs", acc.State)
	}
	if st := e.status(t, acc.RequestID, acmeToken); st.RequestID != acc.RequestID {
		t.Errorf("status right after the answer: %+v", st)
	}

	before = tableCalls(t, table)
	again := e.submit(t, body(t, nil), append(bearer(acmeToken), "Idempotency-Key", "order-1")...)
	if again.RequestID != acc.RequestID || len(e.of(t, acc.RequestID)) != 1 {
		t.Errorf("same key again: %+v, published %d times", again, len(e.of(t, acc.RequestID)))
	}
	if got, n := since(before, tableCalls(t, table)); n != 2 || got["BatchGetItem"] != 1 || got["GetItem"] != 1 {
		t.Errorf("calls for a submission answered from the first: %v, want the key's look-up and the answer's workflow read", got)
	}
}

func sameCounts(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The answer to a submission names the gate the request waits at, or PREVIEWED for a dry
// run, and nothing for a request that runs; a dry run's key used again answers the
// state its request has now.
func TestAnswerNamesTheGate(t *testing.T) {
	e, _ := gated(t, intake.Windows{"tenant:globex": time.Hour})
	dry := e.submit(t, body(t, func(m map[string]any) { m["dry_run"] = true }), append(bearer(acmeToken), "Idempotency-Key", "dry-1")...)
	offboard := e.submit(t, `{"tenant_id": "acme", "scope": "TENANT", "regulation": "GDPR"}`, bearer(dpo1Token)...)
	windowed := e.submit(t, body(t, func(m map[string]any) { m["tenant_id"] = "globex" }), bearer(dpoGlobex)...)
	runs := e.submit(t, body(t, nil), bearer(acmeToken)...)
	for _, c := range []struct {
		name      string
		got, want string
	}{
		{"dry run", dry.State, intake.StatePreviewed},
		{"TENANT request", offboard.State, intake.StateAwaitingApproval},
		{"request in its window", windowed.State, intake.StateScheduled},
		{"request that runs", runs.State, ""},
	} {
		if c.got != c.want {
			t.Errorf("%s answered state %q, want %q", c.name, c.got, c.want)
		}
	}
	if again := e.submit(t, body(t, func(m map[string]any) { m["dry_run"] = true }), append(bearer(acmeToken), "Idempotency-Key", "dry-1")...); again.RequestID != dry.RequestID || again.State != intake.StatePreviewed {
		t.Errorf("the dry run's key again: %+v", again)
	}
	if code, b := e.do(t, "POST", "/v1/erasures/"+dry.RequestID+"/confirm", "", bearer(acmeToken)...); code != http.StatusOK {
		t.Fatalf("confirm: %d %s", code, b)
	}
	if again := e.submit(t, body(t, func(m map[string]any) { m["dry_run"] = true }), append(bearer(acmeToken), "Idempotency-Key", "dry-1")...); again.State != "" {
		t.Errorf("the key of a confirmed dry run again: state %q, want none", again.State)
	}
}
