package schemareg_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/iskorotkov/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
)

func newCodec(t *testing.T) (*schemareg.Codec, *sr.Client, *srfake.Registry) {
	t.Helper()
	reg := srfake.New()
	t.Cleanup(reg.Close)
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	return schemareg.New(cl), cl, reg
}

func intake() event.IntakeRequest {
	return event.IntakeRequest{
		TenantID: "acme", SubjectID: "cust-1", SessionIDs: []string{"s1"}, Regulation: "GDPR",
		Scope: event.ScopeSubject, IdempotencyKey: "k", Source: "app",
		SubmittedAt: time.UnixMilli(1_700_000_000_000).UTC(),
	}
}

func TestRegisterEncodeDecode(t *testing.T) {
	ctx := context.Background()
	c, cl, _ := newCodec(t)
	id, err := c.Register(ctx, event.TopicIntake, event.Intake)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Register(ctx, event.TopicIntake, event.Intake)
	if err != nil || again != id {
		t.Fatalf("second Register = %d, %v; want %d", again, err, id)
	}
	levels := cl.Compatibility(ctx, schemareg.Subject(event.TopicIntake))
	if len(levels) != 1 || levels[0].Err != nil || levels[0].Level != sr.CompatBackward {
		t.Fatalf("compatibility of %s = %+v, want BACKWARD", schemareg.Subject(event.TopicIntake), levels)
	}

	in := intake()
	b, err := c.Encode(event.TopicIntake, event.Intake, &in)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) != id {
		t.Fatalf("header % x, want 00 and id %d", b[:5], id)
	}
	// The same record as franz-go's own Serde frames it.
	var serde sr.Serde
	serde.Register(id, event.IntakeRequest{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(event.Intake.Schema(), v) }))
	want, err := serde.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(b) {
		t.Fatalf("Encode = % x, sr.Serde = % x", b, want)
	}

	// A fresh codec on the same registry decodes it by fetching the schema by id, and
	// still decodes single-object records.
	fresh := schemareg.New(cl)
	for name, data := range map[string][]byte{"registry": b, "single-object": mustSOE(t, &in)} {
		var got event.IntakeRequest
		if err := fresh.Decode(ctx, event.Intake, data, &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.SubjectID != in.SubjectID || !got.SubmittedAt.Equal(in.SubmittedAt) || got.Scope != in.Scope {
			t.Fatalf("%s: decoded %+v, want %+v", name, got, in)
		}
	}
}

func mustSOE(t *testing.T, v any) []byte {
	b, err := event.Intake.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeUnknownIDIsPermanent(t *testing.T) {
	c, _, _ := newCodec(t)
	data := []byte{0, 0, 0, 0x30, 0x39, 2, 'a'} // id 12345, never registered
	var got event.IntakeRequest
	err := c.Decode(context.Background(), event.Intake, data, &got)
	if !errors.Is(err, event.ErrUnknownSchema) || !retry.IsPermanent(err) {
		t.Fatalf("Decode of unknown id = %v, want permanent ErrUnknownSchema", err)
	}
	var none *schemareg.Codec
	if err := none.Decode(context.Background(), event.Intake, data, &got); !errors.Is(err, event.ErrUnknownSchema) {
		t.Fatalf("nil codec Decode = %v, want ErrUnknownSchema", err)
	}
}

func TestDecodeUnreachableRegistryIsTransient(t *testing.T) {
	c, _, reg := newCodec(t)
	reg.Close()
	var got event.IntakeRequest
	err := c.Decode(context.Background(), event.Intake, []byte{0, 0, 0, 0, 1, 0}, &got)
	if err == nil || retry.IsPermanent(err) {
		t.Fatalf("Decode with the registry down = %v, want a transient error", err)
	}
}

// A producer still writing an older released schema under its own id: the record decodes
// into the current type.
func TestReleasedSchemaDecodes(t *testing.T) {
	ctx := context.Background()
	c, cl, _ := newCodec(t)
	rel, err := event.Released()
	if err != nil {
		t.Fatal(err)
	}
	v1 := rel["requested"][0]
	old, err := cl.CreateSchema(ctx, schemareg.Subject(event.TopicRequested), sr.Schema{Schema: v1.String()})
	if err != nil {
		t.Fatal(err)
	}
	// The current schema is checked against v1 and registered after it.
	if _, err := c.Register(ctx, event.TopicRequested, event.Request); err != nil {
		t.Fatal(err)
	}
	req := event.Requested{
		RequestID: "er_1", TenantID: "acme", SubjectHash: "h", KeyID: "k1", Scope: event.ScopeSubject,
		Regulation: "GDPR", RequestedAt: time.UnixMilli(1), DueAt: time.UnixMilli(2), InventoryVersion: "v",
		ExpectedStores: []string{"qdrant"}, OnlyStores: []string{}, Attempt: 1,
	}
	body, err := avro.Marshal(v1, &req)
	if err != nil {
		t.Fatal(err)
	}
	data := append([]byte{0, 0, 0, 0, byte(old.ID)}, body...)
	var got event.Requested
	if err := c.Decode(ctx, event.Request, data, &got); err != nil {
		t.Fatal(err)
	}
	if got.RequestID != "er_1" || got.ExpectedStores[0] != "qdrant" {
		t.Fatalf("decoded %+v", got)
	}
}

func TestRegisterRefusesIncompatible(t *testing.T) {
	ctx := context.Background()
	c, _, reg := newCodec(t)
	// A held version without tenant_id: the current schema, whose tenant_id has no
	// default, cannot read its records. srfake would accept the registration.
	reg.SeedSchema(schemareg.Subject(event.TopicIntake), 1, 1, sr.Schema{Schema: `{"type":"record","name":"IntakeRequest","namespace":"lethe.erasure","fields":[{"name":"subject_id","type":"string"}]}`})
	_, err := c.Register(ctx, event.TopicIntake, event.Intake)
	if !errors.Is(err, schemareg.ErrIncompatible) {
		t.Fatalf("Register = %v, want ErrIncompatible", err)
	}
}

func TestParseFraming(t *testing.T) {
	for in, want := range map[string]schemareg.Framing{"": schemareg.SingleObject, "soe": schemareg.SingleObject, "registry": schemareg.Registry, "SR": schemareg.Registry} {
		if got, err := schemareg.ParseFraming(in); err != nil || got != want {
			t.Errorf("ParseFraming(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := schemareg.ParseFraming("protobuf"); err == nil {
		t.Error("ParseFraming(protobuf) succeeded")
	}
}

// A registry-framed record of one of Lethe's topics reaches a single-object handler as
// the same record in single-object encoding; a record of a writer schema Lethe never
// released is refused.
func TestReframe(t *testing.T) {
	ctx := context.Background()
	c, cl, _ := newCodec(t)
	if err := c.RegisterAll(ctx); err != nil {
		t.Fatal(err)
	}
	c.Framings, _ = schemareg.ParseFramings("erasure.intake=registry")
	in := intake()
	b, err := c.EncodeFor(event.TopicIntake, event.Intake, &in)
	if err != nil || b[0] != 0 {
		t.Fatalf("EncodeFor(registry topic) = % x, %v", b[:1], err)
	}
	if soe, _ := c.EncodeFor(event.TopicRequested, event.Intake, &in); soe[0] != 0xc3 {
		t.Fatalf("EncodeFor(single-object topic) starts % x", soe[:1])
	}
	var got event.IntakeRequest
	h := c.Reframe(schemareg.Topics(), func(_ context.Context, rec *kgo.Record) error {
		return event.Intake.Decode(rec.Value, &got)
	})
	if err := h(ctx, &kgo.Record{Topic: event.TopicIntake, Value: b}); err != nil {
		t.Fatal(err)
	}
	if got.SubjectID != in.SubjectID {
		t.Fatalf("decoded %+v", got)
	}
	other, err := cl.CreateSchema(ctx, "other-value", sr.Schema{Schema: `{"type":"record","name":"IntakeRequest","namespace":"lethe.erasure","fields":[{"name":"tenant_id","type":"string"},{"name":"extra","type":"int"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	err = h(ctx, &kgo.Record{Topic: event.TopicIntake, Value: []byte{0, 0, 0, 0, byte(other.ID), 2, 'a', 2}})
	if !errors.Is(err, event.ErrUnknownSchema) {
		t.Fatalf("Reframe of an unreleased writer schema = %v, want ErrUnknownSchema", err)
	}
}

func TestParseFramings(t *testing.T) {
	f, err := schemareg.ParseFramings("registry, erasure.completed=single-object")
	if err != nil {
		t.Fatal(err)
	}
	if f.Of(event.TopicIntake) != schemareg.Registry || f.Of(event.TopicCompleted) != schemareg.SingleObject || !f.UsesRegistry() {
		t.Fatalf("framings %+v", f)
	}
	if f, _ := schemareg.ParseFramings(""); f.Of(event.TopicIntake) != schemareg.SingleObject || f.UsesRegistry() {
		t.Fatalf("default framings %+v", f)
	}
	if _, err := schemareg.ParseFramings("erasure.intake=xml"); err == nil {
		t.Fatal("ParseFramings accepted xml")
	}
}

// The handler behind Reframe sees single-object encoding; once it returns, the record
// holds its own value again, so a dead-lettered record is written as it was read.
func TestReframeRestoresTheValue(t *testing.T) {
	ctx := context.Background()
	c, _, _ := newCodec(t)
	if err := c.RegisterAll(ctx); err != nil {
		t.Fatal(err)
	}
	c.Framings, _ = schemareg.ParseFramings("registry")
	f := event.StoreFound{RequestID: "er_1", TenantID: "acme", Store: "redis", Kind: "redis", Attempt: 1,
		FoundAt: time.UnixMilli(1_700_000_000_000).UTC()}
	b, err := c.EncodeFor(event.TopicStoreFound, event.Found, &f)
	if err != nil || b[0] != 0 {
		t.Fatalf("EncodeFor(store.found) = % .1x, %v", b, err)
	}
	rec := &kgo.Record{Topic: event.TopicStoreFound, Value: b}
	var seen []byte
	h := c.Reframe(schemareg.OwnTopics(), func(_ context.Context, r *kgo.Record) error {
		seen = r.Value
		return errors.New("refused")
	})
	if err := h(ctx, rec); err == nil {
		t.Fatal("the handler's error was lost")
	}
	var got event.StoreFound
	if err := event.Found.Decode(seen, &got); err != nil || got.RequestID != f.RequestID {
		t.Fatalf("handler saw %+v, %v", got, err)
	}
	if string(rec.Value) != string(b) {
		t.Fatalf("record value after the handler % x, want the registry-framed value back", rec.Value[:5])
	}
}

// FromEnv reads LETHE_FRAMING and LETHE_SCHEMA_REGISTRY_URL: no registry is nil (single
// object), registry framing without a URL is refused, and with a URL every topic Lethe
// writes is registered; a renamed topic is registered on first use.
func TestFromEnv(t *testing.T) {
	ctx := context.Background()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	if c, err := schemareg.FromEnv(ctx, env(nil)); c != nil || err != nil {
		t.Fatalf("FromEnv without settings = %v, %v; want nil, nil", c, err)
	}
	if _, err := schemareg.FromEnv(ctx, env(map[string]string{"LETHE_FRAMING": "registry"})); err == nil {
		t.Fatal("registry framing without a registry URL was accepted")
	}
	_, cl, reg := newCodec(t)
	c, err := schemareg.FromEnv(ctx, env(map[string]string{"LETHE_FRAMING": "registry", "LETHE_SCHEMA_REGISTRY_URL": reg.URL()}))
	if err != nil {
		t.Fatal(err)
	}
	for topic := range schemareg.OwnTopics() {
		if _, err := cl.SchemaByVersion(ctx, schemareg.Subject(topic), -1); err != nil {
			t.Errorf("%s: not registered: %v", topic, err)
		}
	}
	rc := event.Receipt{RequestID: "er_1", TenantID: "acme", Scope: event.ScopeSubject, Status: event.ReceiptComplete}
	b, err := c.EncodeFor("team.completed", event.Completed, &rc)
	if err != nil || b[0] != 0 {
		t.Fatalf("EncodeFor(a renamed topic) = % .1x, %v", b, err)
	}
	if _, err := cl.SchemaByVersion(ctx, schemareg.Subject("team.completed"), -1); err != nil {
		t.Errorf("the renamed topic's subject was not registered: %v", err)
	}
	var got event.Receipt
	if err := c.Decode(ctx, event.Completed, b, &got); err != nil || got.RequestID != rc.RequestID {
		t.Errorf("decoded %+v, %v", got, err)
	}
}

// TestJSONFramingOnlyForOutwardTopics: JSON frames the outward topics alone, never as the
// default, and a JSON record of an Avro-only type is refused.
func TestJSONFramingOnlyForOutwardTopics(t *testing.T) {
	for setting, ok := range map[string]bool{
		"registry,erasure.completed=json":         true,
		"single-object,erasure.suppressions=json": true,
		"json":                             false,
		"registry,erasure.requested=json":  false,
		"registry,erasure.store.done=json": false,
	} {
		f, err := schemareg.ParseFramings(setting)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Validate(); (err == nil) != ok {
			t.Errorf("%s: Validate = %v, want ok %v", setting, err, ok)
		}
	}
	var req event.Requested
	if err := (*schemareg.Codec)(nil).Decode(context.Background(), event.Request, []byte(`{"request_id":"er_1"}`), &req); err == nil {
		t.Error("a JSON erasure.requested record decoded")
	}
	var rc event.Receipt
	if err := (*schemareg.Codec)(nil).Decode(context.Background(), event.Completed, []byte(`{"request_id":"er_1","status":"COMPLETE"}`), &rc); err != nil || rc.RequestID != "er_1" {
		t.Errorf("a JSON receipt: %+v %v", rc, err)
	}
}
