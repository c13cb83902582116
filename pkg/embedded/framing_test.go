package embedded_test

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iskorotkov/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/testenv"
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
	cfg := embedded.DefaultConfig()
	cfg.Framing.Framings = framings
	sys, err := embedded.Start(context.Background(), embedded.Options{Key: key, DataDir: t.TempDir(), Config: &cfg})
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

// TestEveryTopicFramedAsConfigured runs a request to its COMPLETE receipt, then a sweep
// that finds a late write, under a framing setting, and checks every record written on
// every Lethe topic during it: a topic framed for the registry holds only
// Confluent-framed records (magic byte 0, an id the registry holds under the topic's
// subject for the topic's schema), a single-object topic only single-object records.
// Both settings make records on requested (the request and the sweep's re-drive),
// store.done, store.found, completed, suppressions and reappeared; nothing is
// dead-lettered.
func TestEveryTopicFramedAsConfigured(t *testing.T) {
	for _, setting := range []string{"registry", "registry,erasure.completed=single-object",
		"single-object,erasure.completed=json,erasure.suppressions=json,erasure.reappeared=json"} {
		t.Run(setting, func(t *testing.T) {
			framings, err := schemareg.ParseFramings(setting)
			if err != nil {
				t.Fatal(err)
			}
			sys := startFramed(t, framings)
			ctx := context.Background()
			rdb := sys.Stack.Redis
			if err := rdb.Set(ctx, "session:acme:cust-91:1", "a turn", 0).Err(); err != nil {
				t.Fatal(err)
			}
			acc := submit(t, sys.System, `{"tenant_id":"acme","subject_id":"cust-91","session_ids":["sess-91"],"regulation":"GDPR"}`, "")
			if rc := waitReceipt(t, sys.System, acc.RequestID); rc.Status != event.ReceiptComplete {
				t.Fatalf("receipt %s, want %s", rc.Status, event.ReceiptComplete)
			}
			if err := rdb.Set(ctx, "session:acme:cust-91:late", "a late turn", 0).Err(); err != nil {
				t.Fatal(err)
			}
			sys.clock.Add(time.Minute)
			waitRecords(t, sys, event.TopicReappeared, 1)

			types := schemareg.Topics()
			cl, err := sr.NewClient(sr.URLs("http://" + sys.Stack.Addrs.Registry))
			if err != nil {
				t.Fatal(err)
			}
			for _, topic := range service.Topics {
				if topic == event.TopicIntake {
					continue // written by upstream apps, not by Lethe
				}
				recs := readAll(t, sys.System, topic)
				typ, own := types[topic]
				if !own {
					if len(recs) != 0 {
						t.Errorf("%s: %d records dead-lettered", topic, len(recs))
					}
					continue
				}
				switch topic {
				case event.TopicOverdue:
					// The watchdog's thresholds are days away: its framing is pinned in pkg/aggregator.
				default:
					if len(recs) == 0 {
						t.Errorf("%s: no record written", topic)
					}
				}
				for _, r := range recs {
					if framings.Of(topic) == schemareg.JSON {
						checkJSON(t, sys.System, topic, r)
						continue
					}
					checkFraming(t, cl, framings.Of(topic), topic, typ, r.Value)
				}
			}
		})
	}
}

// checkFraming fails t unless value, of type typ on topic, is framed as want.
func checkFraming(t *testing.T, cl *sr.Client, want schemareg.Framing, topic string, typ *event.Type, value []byte) {
	t.Helper()
	if want == schemareg.SingleObject {
		var v map[string]any
		if len(value) < 2 || value[0] != 0xc3 || value[1] != 0x01 {
			t.Errorf("%s: record starts % x, want single-object (c3 01)", topic, value[:min(2, len(value))])
		} else if err := typ.Decode(value, &v); err != nil {
			t.Errorf("%s: single-object record does not decode: %v", topic, err)
		}
		return
	}
	if len(value) < 5 || value[0] != 0 {
		t.Errorf("%s: record starts % x, want the registry framing (00 and a schema id)", topic, value[:min(5, len(value))])
		return
	}
	ctx := context.Background()
	id := int(binary.BigEndian.Uint32(value[1:5]))
	held, err := cl.SchemaByID(ctx, id)
	if err != nil {
		t.Errorf("%s: schema id %d: %v", topic, id, err)
		return
	}
	s, err := avro.ParseWithCache(held.Schema, "", &avro.SchemaCache{})
	if err != nil || event.CanonicalForm(s) != event.CanonicalForm(typ.Schema()) {
		t.Errorf("%s: schema id %d is not the %s schema (%v)", topic, id, typ.Name(), err)
	}
	subjects, err := cl.SubjectsByID(ctx, id)
	if err != nil || !slices.Contains(subjects, schemareg.Subject(topic)) {
		t.Errorf("%s: schema id %d is under subjects %v (%v), want %s", topic, id, subjects, err, schemareg.Subject(topic))
	}
}

// framedSystem is a System with a fake clock for the aggregator's schedule.
type framedSystem struct {
	*embedded.System
	clock *testenv.Clock
}

// startFramed starts a system writing framings, with one sweep a minute after each
// receipt, run whenever the clock is moved.
func startFramed(t *testing.T, framings schemareg.Framings) framedSystem {
	t.Helper()
	key, err := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	clk := testenv.NewClock(time.Now().UTC())
	cfg := embedded.DefaultConfig()
	cfg.Framing.Framings = framings
	cfg.Aggregator.Sweeps, cfg.Aggregator.Retain, cfg.Aggregator.SweepEvery = aggregator.Sweeps{time.Minute}, aggregator.Days(time.Hour), 20*time.Millisecond
	sys, err := embedded.Start(context.Background(), embedded.Options{Key: key, DataDir: t.TempDir(), Config: &cfg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })
	return framedSystem{sys, clk}
}

// waitRecords waits until topic holds at least n records.
func waitRecords(t *testing.T, sys framedSystem, topic string, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if len(readAll(t, sys.System, topic)) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: fewer than %d records", topic, n)
		}
	}
}

// checkJSON fails t unless r, on a topic framed as JSON, is a JSON object with the header
// content-type: application/json that Lethe's own reader decodes (a receipt equal to the
// one the HTTP API serves).
func checkJSON(t *testing.T, sys *embedded.System, topic string, r *kgo.Record) {
	t.Helper()
	ct := ""
	for _, h := range r.Headers {
		if h.Key == "content-type" {
			ct = string(h.Value)
		}
	}
	if len(r.Value) == 0 || r.Value[0] != '{' || ct != "application/json" {
		t.Errorf("%s: record starts %q with content-type %q, want JSON", topic, r.Value[:min(8, len(r.Value))], ct)
		return
	}
	v := schemareg.JSONTopics[topic]()
	if err := sys.Stack.Registry.Decode(context.Background(), schemareg.Topics()[topic], r.Value, v); err != nil {
		t.Errorf("%s: JSON record does not decode: %v", topic, err)
		return
	}
	if rc, ok := v.(*event.Receipt); ok {
		stored, err := sys.Stack.Audit.GetReceipt(context.Background(), rc.RequestID)
		if err != nil || stored.Hash != rc.Hash || auditlog.HashReceipt(*rc) != rc.Hash {
			t.Errorf("%s: JSON receipt %s does not match the stored one (%v), or its hash does not recompute", topic, rc.ReceiptID, err)
		}
	}
}
