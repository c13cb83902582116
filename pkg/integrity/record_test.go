package integrity_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
)

func newRing(t *testing.T, current string, secrets map[string]string) *integrity.Ring {
	t.Helper()
	m := map[string][]byte{}
	for id, s := range secrets {
		m[id] = []byte(s)
	}
	r, err := integrity.NewRing(current, m)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const (
	s1 = "record-secret-one-0123456789abcdef"
	s2 = "record-secret-two-0123456789abcdef"
)

func report(t *testing.T) *kgo.Record {
	t.Helper()
	d := event.StoreDone{RequestID: "er_1", TenantID: "acme", Store: "redis", Kind: "redis", Status: event.StatusDeleted,
		Locations: []event.LocationCount{{Location: "session:acme:*", Deleted: 3}}, Verification: event.Verification{Method: "scan"},
		Attempt: 1, StartedAt: time.UnixMilli(1), FinishedAt: time.UnixMilli(2)}
	b, err := event.Done.Encode(&d)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: event.TopicStoreDone, Key: []byte("er_1"), Value: b}
}

func TestSignVerify(t *testing.T) {
	r := newRing(t, "m1", map[string]string{"m1": s1})
	rec := report(t)
	if err := integrity.Verify(r, event.Done, rec); !errors.Is(err, integrity.ErrUnsigned) {
		t.Fatalf("unsigned record: %v, want ErrUnsigned", err)
	}
	if err := integrity.Sign(r, event.Done, rec); err != nil {
		t.Fatal(err)
	}
	if err := integrity.Verify(r, event.Done, rec); err != nil {
		t.Fatalf("signed record: %v", err)
	}
	if err := integrity.Sign(r, event.Done, rec); err != nil || len(rec.Headers) != 1 {
		t.Fatalf("signing again: %v, %d headers, want the MAC replaced", err, len(rec.Headers))
	}
	// A MAC made for another event type does not verify.
	if err := integrity.Verify(r, event.Found, rec); !errors.Is(err, integrity.ErrMismatch) {
		t.Errorf("verified as another type: %v, want ErrMismatch", err)
	}
	// Any changed byte of the value fails.
	forged := *rec
	forged.Value = append([]byte(nil), rec.Value...)
	forged.Value[len(forged.Value)-3] ^= 1
	if err := integrity.Verify(r, event.Done, &forged); !errors.Is(err, integrity.ErrMismatch) {
		t.Errorf("changed value: %v, want ErrMismatch", err)
	}
	// Another deployment's key does not verify, and an unknown key id is named as such.
	if err := integrity.Verify(newRing(t, "m1", map[string]string{"m1": s2}), event.Done, rec); !errors.Is(err, integrity.ErrMismatch) {
		t.Errorf("other secret: %v, want ErrMismatch", err)
	}
	if err := integrity.Verify(newRing(t, "m9", map[string]string{"m9": s1}), event.Done, rec); !errors.Is(err, integrity.ErrUnknownKey) {
		t.Errorf("other key id: %v, want ErrUnknownKey", err)
	}
	for _, bad := range []string{"", "v2:m1:00", "v1:m1", "v1:m1:zz", "v1:m1:abcd"} {
		malformed := *rec
		malformed.Headers = []kgo.RecordHeader{{Key: integrity.Header, Value: []byte(bad)}}
		if err := integrity.Verify(r, event.Done, &malformed); !errors.Is(err, integrity.ErrUnsigned) {
			t.Errorf("header %q: %v, want ErrUnsigned", bad, err)
		}
	}
	twice := *rec
	twice.Headers = append(append([]kgo.RecordHeader{}, rec.Headers...), rec.Headers...)
	if err := integrity.Verify(r, event.Done, &twice); !errors.Is(err, integrity.ErrUnsigned) {
		t.Errorf("two MAC headers: %v, want ErrUnsigned", err)
	}
}

// A record signed before a rotation verifies with the rotated ring, which signs with the
// new key.
func TestSignVerifyRotation(t *testing.T) {
	before := newRing(t, "m1", map[string]string{"m1": s1})
	after := newRing(t, "m2", map[string]string{"m2": s2, "m1": s1})
	old := report(t)
	if err := integrity.Sign(before, event.Done, old); err != nil {
		t.Fatal(err)
	}
	if err := integrity.Verify(after, event.Done, old); err != nil {
		t.Errorf("record signed with the old key: %v", err)
	}
	fresh := report(t)
	if err := integrity.Sign(after, event.Done, fresh); err != nil {
		t.Fatal(err)
	}
	if err := integrity.Verify(before, event.Done, fresh); !errors.Is(err, integrity.ErrUnknownKey) {
		t.Errorf("record signed with the new key, verified by the old ring: %v, want ErrUnknownKey", err)
	}
}

// A record written in Schema Registry framing verifies once reframed to single-object
// encoding, as consumers see it; reframed as another schema version it does not.
func TestSignRegistryFraming(t *testing.T) {
	r := newRing(t, "m1", map[string]string{"m1": s1})
	soe := report(t)
	body := soe.Value[10:]
	rec := &kgo.Record{Topic: event.TopicStoreDone, Value: append([]byte{0, 0, 0, 0, 7}, body...)}
	if err := integrity.Sign(r, event.Done, rec); err != nil {
		t.Fatal(err)
	}
	if err := integrity.Verify(r, event.Done, rec); err != nil {
		t.Errorf("registry-framed record: %v", err)
	}
	reframed := &kgo.Record{Topic: rec.Topic, Value: soe.Value, Headers: rec.Headers}
	if err := integrity.Verify(r, event.Done, reframed); err != nil {
		t.Errorf("the same record reframed to single-object encoding: %v", err)
	}
	rel, err := event.Released()
	if err != nil {
		t.Fatal(err)
	}
	older, err := event.Done.SingleObject(rel["store_done"][0], body)
	if err != nil {
		t.Fatal(err)
	}
	if err := integrity.Verify(r, event.Done, &kgo.Record{Value: older, Headers: rec.Headers}); !errors.Is(err, integrity.ErrMismatch) {
		t.Errorf("reframed as an older schema version: %v, want ErrMismatch", err)
	}
}

type recorder struct{ got []*kgo.Record }

func (p *recorder) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	p.got = append(p.got, rs...)
	out := make(kgo.ProduceResults, len(rs))
	for i, r := range rs {
		out[i] = kgo.ProduceResult{Record: r}
	}
	return out
}

func TestSignerSignsItsTopicsOnly(t *testing.T) {
	r := newRing(t, "m1", map[string]string{"m1": s1})
	p := &recorder{}
	s := &integrity.Signer{Producer: p, Ring: r, Types: map[string]*event.Type{event.TopicStoreDone: event.Done}}
	other := &kgo.Record{Topic: event.TopicSuppressions, Value: []byte("x")}
	if err := s.ProduceSync(context.Background(), report(t), other).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if len(p.got) != 2 || integrity.Verify(r, event.Done, p.got[0]) != nil || len(p.got[1].Headers) != 0 {
		t.Errorf("published %+v: want the report signed and the other record unchanged", p.got)
	}
	bad := &kgo.Record{Topic: event.TopicStoreDone, Value: []byte{0, 1}}
	if err := s.ProduceSync(context.Background(), bad).FirstErr(); err == nil || len(p.got) != 2 {
		t.Errorf("unsignable record: %v, %d published", err, len(p.got))
	}
}
