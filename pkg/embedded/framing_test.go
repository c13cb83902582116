package embedded_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// waitRequest waits for the one request of tenant and returns its id.
func waitRequest(t *testing.T, sys *embedded.System, tenant string) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		rs, err := sys.Stack.Audit.ListRequests(context.Background(), tenant)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) > 1 {
			t.Fatalf("%s: %d requests, want one", tenant, len(rs))
		}
		if len(rs) == 1 {
			return rs[0].RequestID
		}
	}
	t.Fatalf("%s: no request", tenant)
	return ""
}

// An erasure.intake record in each encoding an upstream app may use — Avro in the Schema
// Registry wire format, JSON (by content-type header and by its first byte), Avro
// single-object encoding — reaches a COMPLETE receipt, with the system's own topics framed
// for the registry. A registry id the registry does not know and invalid JSON are
// dead-lettered with the reason.
func TestIntakeFramingsComplete(t *testing.T) {
	key, err := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	framings, err := schemareg.ParseFramings("registry")
	if err != nil {
		t.Fatal(err)
	}
	sys, err := embedded.Start(context.Background(), embedded.Options{Key: key, DataDir: t.TempDir(), Framings: framings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })

	in := func(tenant string) *event.IntakeRequest {
		return &event.IntakeRequest{
			TenantID: tenant, SubjectID: "cust-7", SessionIDs: []string{"sess-7"}, Regulation: "GDPR",
			Scope: event.ScopeSubject, IdempotencyKey: "upstream-1", Source: "shopbot", SubmittedAt: time.Now().UTC().Truncate(time.Millisecond),
		}
	}
	srFramed, err := sys.Stack.Registry.Encode(event.TopicIntake, event.Intake, in("frame-registry"))
	if err != nil {
		t.Fatal(err)
	}
	soe, err := event.Intake.Encode(in("frame-soe"))
	if err != nil {
		t.Fatal(err)
	}
	jsonRec := func(tenant string) []byte {
		return []byte(`{"tenant_id":"` + tenant + `","subject_id":"cust-7","session_ids":["sess-7"],"regulation":"GDPR","idempotency_key":"upstream-1"}`)
	}
	ct := []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}}
	produce(t, sys,
		&kgo.Record{Topic: event.TopicIntake, Key: []byte("frame-registry"), Value: srFramed},
		&kgo.Record{Topic: event.TopicIntake, Key: []byte("frame-json"), Value: jsonRec("frame-json"), Headers: ct},
		&kgo.Record{Topic: event.TopicIntake, Key: []byte("frame-json-bare"), Value: append([]byte("\n "), jsonRec("frame-json-bare")...)},
		&kgo.Record{Topic: event.TopicIntake, Key: []byte("frame-soe"), Value: soe},
	)
	for _, tenant := range []string{"frame-registry", "frame-json", "frame-json-bare", "frame-soe"} {
		id := waitRequest(t, sys, tenant)
		if r := waitReceipt(t, sys, id); r.Status != event.ReceiptComplete {
			t.Errorf("%s: receipt %s, want %s", tenant, r.Status, event.ReceiptComplete)
		}
	}

	// erasure.requested, which intake writes, is framed for the registry.
	cl, err := kgo.NewClient(kgo.SeedBrokers(sys.Stack.Broker.Brokers...), kgo.ConsumeTopics(event.TopicRequested),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	fetches := cl.PollRecords(ctx, 1)
	cancel()
	cl.Close()
	if recs := fetches.Records(); len(recs) == 0 || recs[0].Value[0] != 0 {
		t.Errorf("erasure.requested records %d, first byte not 0x00 (registry framing)", len(recs))
	}

	unknownID := append([]byte{0, 0, 0, 0x7f, 0xff}, srFramed[5:]...)
	produce(t, sys,
		&kgo.Record{Topic: event.TopicIntake, Key: []byte("bad-id"), Value: unknownID},
		&kgo.Record{Topic: event.TopicIntake, Key: []byte("bad-json"), Value: []byte(`{"tenant_id":"bad-json","subject_id":"cust-7",`), Headers: ct},
	)
	reasons, values := dlq(t, sys, event.TopicIntake, 2)
	all := strings.Join(reasons, "\n")
	for _, want := range []string{"registry id 32767 is not in the registry", "invalid JSON record: "} {
		if !strings.Contains(all, want) {
			t.Errorf("dead-letter reasons %q lack %q", reasons, want)
		}
	}
	if strings.Contains(string(values), "cust-7") {
		t.Error("a dead-lettered value holds the raw subject id")
	}
}
