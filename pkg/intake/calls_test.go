package intake_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lethe-erasure/lethe/pkg/auditlog/dynamo"
	"github.com/lethe-erasure/lethe/pkg/awsclient"
	"github.com/lethe-erasure/lethe/pkg/calls"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	wfdynamo "github.com/lethe-erasure/lethe/pkg/workflow/dynamo"
)

// onDynamo gives e's intake the audit table and the workflow on DynamoDB, as the intake
// service has them, through a client that counts its calls (awsclient.CountCalls) and whose every
// round trip takes at least latency. It returns the table's name.
func onDynamo(t *testing.T, e *env, latency time.Duration) string {
	t.Helper()
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(testenv.DynamoDB(t)),
		APIOptions:   []func(*middleware.Stack) error{awsclient.CountCalls},
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

// Submissions that arrive together share the audit table's calls: the key look-ups, the
// reads of the legal holds and the index entries go in shared calls, while each request
// is still one conditional write of its own, made before its answer. Each request is
// found as soon as it is answered, published once, and a hold placed before the burst
// binds the requests it covers.
func TestConcurrentSubmissionsShareCalls(t *testing.T) {
	e, _ := gated(t, nil)
	table := onDynamo(t, e, 5*time.Millisecond)
	hold := `{"tenant_id": "acme", "subject_id": "held", "store": "dataset", "legal_basis": "GDPR Art. 17(3)(e)"}`
	if code, b := e.do(t, "POST", "/v1/holds", hold, bearer(dpo1Token)...); code != http.StatusCreated {
		t.Fatalf("hold: %d %s", code, b)
	}
	const n, held = 24, 4 // every sixth subject is held
	subject := func(i int) string {
		if i%6 == 0 {
			return "held"
		}
		return fmt.Sprintf("subject-%d", i)
	}
	before := tableCalls(t, table)
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			b := body(t, func(m map[string]any) { m["subject_id"] = subject(i) })
			code, resp := e.do(t, "POST", "/v1/erasures", b, append(bearer(acmeToken), "Idempotency-Key", fmt.Sprintf("order-%d", i))...)
			if code != http.StatusAccepted {
				t.Errorf("submission %d: %d %s", i, code, resp)
				return
			}
			ids[i] = decode[intake.Accepted](t, resp).RequestID
			if r, err := e.store.GetRequest(context.Background(), ids[i]); err != nil || r.RequestID != ids[i] {
				t.Errorf("request %d right after its answer: %+v, %v", i, r, err)
			}
		})
	}
	wg.Wait()
	got, total := since(before, tableCalls(t, table))
	t.Logf("%d submissions at once: %v audit-table calls (%.2f per submission)", n, got, total/n)
	if got["PutItem"] != n+held {
		t.Errorf("%v PutItem calls, want one per request and one per held request's workflow record (%d)", got["PutItem"], n+held)
	}
	if got["BatchWriteItem"] >= n/2 || got["Query"] >= n/2 {
		t.Errorf("index writes in %v calls and hold reads in %v, want them shared (fewer than %d each)", got["BatchWriteItem"], got["Query"], n/2)
	}
	if total >= 3*n {
		t.Errorf("%v calls for %d submissions, want fewer than 3 each", total, n)
	}
	for i, id := range ids {
		pub := e.of(t, id)
		if len(pub) != 1 {
			t.Errorf("request %d published %d times", i, len(pub))
			continue
		}
		if exempt := len(pub[0].Exempt) == 1 && pub[0].Exempt[0].Store == "dataset"; exempt != (subject(i) == "held") {
			t.Errorf("request %d of %s published with exemptions %+v", i, subject(i), pub[0].Exempt)
		}
	}
}
