package embedded_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

func start(t *testing.T) *embedded.System {
	t.Helper()
	key, err := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	sys, err := embedded.Start(context.Background(), embedded.Options{Key: key, DataDir: t.TempDir(), External: external(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })
	return sys
}

func submit(t *testing.T, sys *embedded.System, body, idem string) intake.Accepted {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, sys.BaseURL+"/v1/erasures", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var acc intake.Accepted
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %s", resp.Status)
	}
	json.NewDecoder(resp.Body).Decode(&acc)
	return acc
}

func waitReceipt(t *testing.T, sys *embedded.System, id string) event.Receipt {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if r, err := sys.Stack.Audit.GetReceipt(context.Background(), id); err == nil {
			return r
		}
	}
	t.Fatalf("no receipt for %s", id)
	return event.Receipt{}
}

func produce(t *testing.T, sys *embedded.System, recs ...*kgo.Record) {
	t.Helper()
	cl, err := sys.Stack.Broker.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// dlq reads n records of topic's dead-letter topic and returns their reasons and values.
func dlq(t *testing.T, sys *embedded.System, topic string, n int) (reasons []string, values []byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(sys.Stack.Broker.Brokers...), kgo.ConsumeTopics(event.DLQ(topic)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for len(reasons) < n {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d records dead-lettered from %s: %v", len(reasons), n, topic, reasons)
		}
		f.EachRecord(func(r *kgo.Record) {
			values = append(values, r.Value...)
			for _, h := range r.Headers {
				if h.Key == consumer.HeaderReason {
					reasons = append(reasons, string(h.Value))
				}
			}
		})
	}
	return reasons, values
}

// Poison and invalid events go to the dead-letter topic with their reason, and the
// pipeline carries on: a valid request submitted after them completes.
func TestPoisonEventsAreDeadLettered(t *testing.T) {
	sys := start(t)
	unknownSchema := append([]byte{0xc3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8}, "body"...)
	badTenant, _ := event.Intake.Encode(&event.IntakeRequest{TenantID: "../etc", SubjectID: "alice@example.com", SessionIDs: []string{"alice-session-1"}, Regulation: "GDPR",
		Scope: event.ScopeSubject, IdempotencyKey: "k", SubmittedAt: time.Now()})
	noSubject, _ := event.Intake.Encode(&event.IntakeRequest{TenantID: "acme", SessionIDs: []string{}, Regulation: "GDPR",
		Scope: event.ScopeSubject, IdempotencyKey: "k2", SubmittedAt: time.Now()})
	nobodyServes, _ := event.Request.Encode(&event.Requested{RequestID: "er_orphan", TenantID: "acme", SubjectHash: "h", KeyID: "k1",
		Identifiers: event.Identifiers{SubjectID: "x", SessionIDs: []string{}}, Scope: event.ScopeSubject, Regulation: "GDPR",
		RequestedAt: time.Now(), DueAt: time.Now().Add(time.Hour), InventoryVersion: "v", ExpectedStores: []string{"mainframe"}, OnlyStores: []string{}, Attempt: 1})
	orphan := &kgo.Record{Topic: event.TopicRequested, Key: []byte("er_orphan"), Value: nobodyServes}
	if err := integrity.Sign(sys.MAC, event.Request, orphan); err != nil {
		t.Fatal(err)
	}
	produce(t, sys,
		&kgo.Record{Topic: event.TopicIntake, Value: []byte("not avro")},
		&kgo.Record{Topic: event.TopicIntake, Value: unknownSchema},
		&kgo.Record{Topic: event.TopicIntake, Value: badTenant},
		&kgo.Record{Topic: event.TopicIntake, Value: noSubject},
		orphan,
	)
	rs, values := dlq(t, sys, event.TopicIntake, 4)
	reasons := strings.Join(rs, "\n")
	if bytes.Contains(values, []byte("alice")) || !bytes.Contains(values, []byte("pseudonym:")) {
		t.Errorf("dead-lettered intake records keep raw identifiers or were not redacted: %q", values)
	}
	for _, want := range []string{"neither JSON", "unknown schema", "tenant_id", "subject_id is empty"} {
		if !strings.Contains(reasons, want) {
			t.Errorf("intake dead letters lack %q:\n%s", want, reasons)
		}
	}
	if r, _ := dlq(t, sys, event.TopicRequested, 1); !strings.Contains(r[0], `"mainframe"`) {
		t.Errorf("request for a store nobody serves: %q", r)
	}
	acc := submit(t, sys, `{"tenant_id":"acme","subject_id":"cust-1","regulation":"GDPR"}`, "")
	if r := waitReceipt(t, sys, acc.RequestID); r.Status != event.ReceiptComplete {
		t.Errorf("receipt %+v", r)
	}
}

// The same request twice over HTTP with one Idempotency-Key, and the same intake event
// twice, each make one request with one receipt.
func TestDuplicatesMakeOneReceipt(t *testing.T) {
	sys := start(t)
	body := `{"tenant_id":"acme","subject_id":"cust-2","session_ids":["s1"],"regulation":"GDPR"}`
	a, b := submit(t, sys, body, "idem-1"), submit(t, sys, body, "idem-1")
	if a.RequestID != b.RequestID {
		t.Fatalf("one idempotency key gave two requests: %s, %s", a.RequestID, b.RequestID)
	}
	in, _ := event.Intake.Encode(&event.IntakeRequest{TenantID: "acme", SubjectID: "cust-3", SessionIDs: []string{}, Regulation: "GDPR",
		Scope: event.ScopeSubject, IdempotencyKey: "app-42", SubmittedAt: time.Now()})
	produce(t, sys, &kgo.Record{Topic: event.TopicIntake, Value: in}, &kgo.Record{Topic: event.TopicIntake, Value: bytes.Clone(in)})
	waitReceipt(t, sys, a.RequestID)
	var ids []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		reqs, err := sys.Stack.Audit.ListRequests(context.Background(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		ids = ids[:0]
		for _, r := range reqs {
			ids = append(ids, r.RequestID)
		}
		if len(ids) == 2 {
			if _, err := sys.Stack.Audit.GetReceipt(context.Background(), ids[0]); err == nil {
				if _, err := sys.Stack.Audit.GetReceipt(context.Background(), ids[1]); err == nil {
					break
				}
			}
		}
	}
	if len(ids) != 2 {
		t.Fatalf("requests of acme: %v, want the HTTP one and the intake-event one", ids)
	}
	rs, err := sys.Stack.Audit.Receipts(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Errorf("%d receipts for 2 requests submitted twice each", len(rs))
	}
}

// A restart with an extended inventory keeps the stack, the data directory and the keys:
// a request completed before it is still served, and one submitted after it completes
// with the new store expected.
func TestRestartWithAnExtendedInventory(t *testing.T) {
	key, err := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	sys, err := embedded.Start(context.Background(), embedded.Options{Key: key, External: external(t)})
	if err != nil {
		t.Fatal(err)
	}
	before := submit(t, sys, `{"tenant_id":"acme","subject_id":"alice","regulation":"GDPR"}`, "")
	first := waitReceipt(t, sys, before.RequestID)
	dir := sys.DataDir
	inv := *sys.Inventory
	inv.Version += "+extra"
	extra := inv.Stores[0]
	extra.Name = "extra"
	inv.Stores = append(append([]inventory.Entry{}, inv.Stores...), extra)
	sys, err = sys.Restart(context.Background(), &inv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })
	if sys.DataDir != dir || sys.Inventory.Version != inv.Version {
		t.Fatalf("restarted on %s with inventory %s", sys.DataDir, sys.Inventory.Version)
	}
	resp, err := http.Get(sys.BaseURL + "/v1/erasures/" + before.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	var st intake.Status
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.State != intake.StateComplete || st.ReceiptID != first.ReceiptID {
		t.Errorf("the earlier request after the restart: %+v", st)
	}
	after := submit(t, sys, `{"tenant_id":"acme","subject_id":"bob","regulation":"GDPR"}`, "")
	r := waitReceipt(t, sys, after.RequestID)
	if len(r.Stores) != len(inv.Stores) || r.InventoryVersion != inv.Version {
		t.Errorf("receipt after the restart: %d stores, inventory %s", len(r.Stores), r.InventoryVersion)
	}
}

// TestBusyPortNamesItsVariable: a component whose address is taken fails to start with
// the variable that moves it.
func TestBusyPortNamesItsVariable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = embedded.StartStackUsing(context.Background(), t.TempDir(), embedded.Addrs{Qdrant: l.Addr().String()}, embedded.External{})
	if err == nil || !strings.Contains(err.Error(), "set LETHE_STANDALONE_QDRANT_ADDR to a free host:port") {
		t.Fatalf("start on a busy Qdrant port: %v", err)
	}
}
