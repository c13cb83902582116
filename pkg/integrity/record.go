package integrity

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/event"
)

// Header is the record header that carries a record's MAC: "v1:" + key id + ":" + the
// lower-case hex HMAC-SHA-256.
const Header = "lethe.mac"

// ErrUnsigned means a record carries no MAC header, or one that is malformed.
var ErrUnsigned = errors.New("integrity: record carries no MAC")

// RecordLabel is the use label of records of type t: "lethe record v1 " + t.Name(), such
// as "lethe record v1 requested".
func RecordLabel(t *event.Type) string { return "lethe record v1 " + t.Name() }

// canonical is what a record's MAC covers: its value in single-object encoding (C3 01, the
// writer schema's 8-byte fingerprint, the Avro body). A value in Schema Registry framing
// (0, a 4-byte schema id, the body) is taken as written with t's current schema, as
// every record Lethe writes is; a consumer reframes it to the same bytes before its
// handler runs (schemareg.Codec.Reframe). Binding the fingerprint means that a record
// reframed as an older schema version, which would read the same body differently, does
// not verify.
func canonical(t *event.Type, value []byte) ([]byte, error) {
	if len(value) > 0 && value[0] == 0 {
		if len(value) < 5 {
			return nil, fmt.Errorf("%w: %s: short registry header", event.ErrMalformed, t.Name())
		}
		return t.SingleObject(t.Schema(), value[5:])
	}
	return value, nil
}

// Sign adds to rec the MAC of its value, of type t, under the current secret of r,
// replacing a MAC header rec carries already.
func Sign(r *Ring, t *event.Type, rec *kgo.Record) error {
	data, err := canonical(t, rec.Value)
	if err != nil {
		return err
	}
	id, mac := r.Sum(RecordLabel(t), data)
	h := kgo.RecordHeader{Key: Header, Value: []byte("v1:" + id + ":" + hex.EncodeToString(mac))}
	for i := range rec.Headers {
		if rec.Headers[i].Key == Header {
			rec.Headers[i] = h
			return nil
		}
	}
	rec.Headers = append(rec.Headers, h)
	return nil
}

// Verify checks the MAC header of rec, whose value is of type t. It fails with
// ErrUnsigned, ErrUnknownKey or ErrMismatch (wrapped; errors.Is finds them); a record
// with two MAC headers is refused.
func Verify(r *Ring, t *event.Type, rec *kgo.Record) error {
	var raw string
	n := 0
	for _, h := range rec.Headers {
		if h.Key == Header {
			raw, n = string(h.Value), n+1
		}
	}
	if n != 1 {
		if n > 1 {
			return fmt.Errorf("%w: %d MAC headers", ErrUnsigned, n)
		}
		return ErrUnsigned
	}
	v, rest, ok := strings.Cut(raw, ":")
	id, sum, ok2 := strings.Cut(rest, ":")
	mac, err := hex.DecodeString(sum)
	if !ok || !ok2 || v != "v1" || err != nil || len(mac) != 32 {
		return fmt.Errorf("%w: malformed %s header", ErrUnsigned, Header)
	}
	data, err := canonical(t, rec.Value)
	if err != nil {
		return err
	}
	return r.Check(RecordLabel(t), id, data, mac)
}

// Producer publishes records and waits for their acknowledgement (a *kgo.Client).
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Signer is a Producer that signs the records of the topics in Types (by topic name) with
// Ring before publishing them; records of other topics pass unchanged. It is how a
// component that publishes through a Producer it does not own (the intake) signs.
type Signer struct {
	Producer Producer
	Ring     *Ring
	Types    map[string]*event.Type
}

// ProduceSync signs and publishes rs. A record that cannot be signed is not published;
// its result carries the error.
func (s *Signer) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	for _, rec := range rs {
		t, ok := s.Types[rec.Topic]
		if !ok {
			continue
		}
		if err := Sign(s.Ring, t, rec); err != nil {
			out := make(kgo.ProduceResults, len(rs))
			for i, r := range rs {
				out[i] = kgo.ProduceResult{Record: r, Err: fmt.Errorf("integrity: sign record for %s: %w", r.Topic, err)}
			}
			return out
		}
	}
	return s.Producer.ProduceSync(ctx, rs...)
}
