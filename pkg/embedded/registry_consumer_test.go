package embedded_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// consumeReceipt reads erasure.completed with confluent_kafka's DeserializingConsumer and
// AvroDeserializer against the registry, as a registry-aware consumer does, and prints the
// receipt of the request named as JSON (the topic may hold other tests' receipts).
const consumeReceipt = `
import json, sys
from confluent_kafka import DeserializingConsumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import StringDeserializer
brokers, registry, request_id = sys.argv[1], sys.argv[2], sys.argv[3]
c = DeserializingConsumer({"bootstrap.servers": brokers, "group.id": "registry-reader", "auto.offset.reset": "earliest",
    "key.deserializer": StringDeserializer("utf_8"),
    "value.deserializer": AvroDeserializer(SchemaRegistryClient({"url": registry}))})
c.subscribe(["erasure.completed"])
for _ in range(600):
    m = c.poll(0.1)
    if m is None:
        continue
    if m.error():
        sys.exit(str(m.error()))
    if m.value()["request_id"] == request_id:
        json.dump(m.value(), sys.stdout, default=str)
        sys.exit(0)
sys.exit("no receipt within 60 s")
`

// TestRegistryConsumerReadsReceipts: with a registry configured and LETHE_FRAMING unset,
// receipts on erasure.completed are framed for the registry, and a consumer that knows
// only the registry (confluent_kafka's AvroDeserializer) reads one: the schema Lethe
// registered, with its defaults, decodes the record.
func TestRegistryConsumerReadsReceipts(t *testing.T) {
	py := venvPython(t)
	ctx := context.Background()
	key, err := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	sys, err := embedded.Start(ctx, embedded.Options{Key: key, External: external(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })
	acc := submit(t, sys, `{"tenant_id":"acme","subject_id":"cust-9","regulation":"GDPR"}`, "")
	rc := waitReceipt(t, sys, acc.RequestID)
	c, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(c, py, "-c", consumeReceipt, sys.Stack.Addrs.Kafka, "http://"+sys.Stack.Addrs.Registry, rc.RequestID)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the registry consumer: %v\n%s", err, stderr.String())
	}
	var got struct {
		RequestID string `json:"request_id"`
		Status    string `json:"status"`
		Hash      string `json:"hash"`
		Stores    []any  `json:"stores"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("consumer output %q: %v", stdout.String(), err)
	}
	if got.RequestID != rc.RequestID || got.Status != string(event.ReceiptComplete) || got.Hash != rc.Hash || len(got.Stores) != len(rc.Stores) {
		t.Fatalf("AvroDeserializer read %+v; the receipt is %s %s %s with %d stores", got, rc.RequestID, rc.Status, rc.Hash, len(rc.Stores))
	}
}
