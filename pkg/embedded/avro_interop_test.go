package embedded_test

import (
	"context"
	"encoding/binary"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/schemas"
)

// An intake record encoded by another Avro implementation (goavro) from
// schemas/intake.avsc, framed as single-object encoding with the specification's
// fingerprint, erases the subject: the request reaches a COMPLETE receipt. So does the
// record as goavro frames it itself.
func TestIntakeFromAnotherAvroLibraryCompletes(t *testing.T) {
	sys := start(t)
	js, err := fs.ReadFile(schemas.FS, "intake.avsc")
	if err != nil {
		t.Fatal(err)
	}
	codec, err := goavro.NewCodec(string(js))
	if err != nil {
		t.Fatal(err)
	}
	// goavro writes a primitive type with a logicalType as {"type":"long"} in its canonical
	// form, where the specification writes "long"; its fingerprint of the corrected form
	// is the specification's.
	spec, err := goavro.NewCodec(strings.ReplaceAll(codec.CanonicalSchema(), `{"type":"long"}`, `"long"`))
	if err != nil {
		t.Fatal(err)
	}
	header := binary.LittleEndian.AppendUint64([]byte{0xc3, 0x01}, spec.Rabin)

	tenants := map[string]func(native map[string]any) []byte{
		"interop-spec": func(native map[string]any) []byte {
			body, err := codec.BinaryFromNative(nil, native)
			if err != nil {
				t.Fatal(err)
			}
			return append(append([]byte{}, header...), body...)
		},
		"interop-goavro": func(native map[string]any) []byte {
			rec, err := codec.SingleFromNative(nil, native)
			if err != nil {
				t.Fatal(err)
			}
			return rec
		},
	}
	for tenant, encode := range tenants {
		rec := encode(map[string]any{
			"tenant_id": tenant, "subject_id": "cust-7", "session_ids": []any{"sess-7"},
			"regulation": "GDPR", "scope": "SUBJECT", "idempotency_key": "upstream-1", "source": "shopbot",
			"submitted_at": time.Now(),
		})
		produce(t, sys, &kgo.Record{Topic: event.TopicIntake, Key: []byte(tenant), Value: rec})
	}
	for tenant := range tenants {
		var reqs []string
		for deadline := time.Now().Add(20 * time.Second); len(reqs) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			rs, err := sys.Stack.Audit.ListRequests(context.Background(), tenant)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				reqs = append(reqs, r.RequestID)
			}
		}
		if len(reqs) != 1 {
			t.Fatalf("%s: requests %v, want the one of the intake record", tenant, reqs)
		}
		if r := waitReceipt(t, sys, reqs[0]); r.Status != event.ReceiptComplete {
			t.Errorf("%s: receipt status %s, want %s", tenant, r.Status, event.ReceiptComplete)
		}
	}
}
