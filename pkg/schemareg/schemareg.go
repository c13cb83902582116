// Package schemareg frames Lethe's events in the Confluent Schema Registry wire format
// through franz-go's pkg/sr: a zero byte, the schema id (4 bytes, big-endian), then the
// Avro body. It sits beside Avro single-object encoding (pkg/event), which needs no
// registry; which of the two a topic's records carry is the topic's Framing.
//
// Schemas are registered under the topic-name strategy (subject "<topic>-value") with
// BACKWARD compatibility. Before registering, Register checks the new schema against every
// version the subject holds with hamba/avro's compatibility check, so an incompatible
// change fails here even against a registry that does not check (franz-go's srfake
// accepts everything).
//
// Decode accepts both framings whatever the topic's Framing is, so producers can move
// from one to the other without readers changing. A Codec is safe for concurrent use.
package schemareg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/iskorotkov/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/lethe-erasure/lethe/pkg/event"
)

// Framing is how the records of a topic are framed.
type Framing string

// The framings.
const (
	// SingleObject is Avro single-object encoding (0xC3 0x01, the schema's CRC-64-AVRO
	// fingerprint, the body): readable without a registry. The default.
	SingleObject Framing = "single-object"
	// Registry is the Confluent wire format (0x00, the registry's schema id, the body).
	Registry Framing = "registry"
)

// ParseFraming reads a framing name: "single-object" (or "soe", or empty) or "registry"
// (or "sr", "confluent").
func ParseFraming(s string) (Framing, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "single-object", "soe":
		return SingleObject, nil
	case "registry", "sr", "confluent":
		return Registry, nil
	}
	return "", fmt.Errorf("schemareg: unknown framing %q (want single-object or registry)", s)
}

// Subject is the topic-name strategy's subject of topic's record values.
func Subject(topic string) string { return topic + "-value" }

// ErrIncompatible is returned by Register when the current schema cannot read data
// written with a version the subject already holds.
var ErrIncompatible = errors.New("schemareg: schema is not backward compatible")

// errUnregistered is Encode's error for a topic whose schema was not registered.
var errUnregistered = errors.New("schemareg: no schema registered")

// Codec encodes and decodes records of Lethe's event types in either framing.
type Codec struct {
	// Framings is how EncodeFor frames each topic's records; set it before use.
	Framings Framings

	client *sr.Client
	header sr.ConfluentHeader

	mu      sync.Mutex
	ids     map[string]int         // topic -> registry id of its current schema
	writers map[int]avro.Schema    // registry id -> writer schema
	forms   map[avro.Schema]string // writer schema -> canonical form, for Decode
}

// New returns a Codec on the registry cl talks to.
func New(cl *sr.Client) *Codec {
	return &Codec{client: cl, ids: map[string]int{}, writers: map[int]avro.Schema{}, forms: map[avro.Schema]string{}}
}

// Dial returns a Codec on the registry at url (http://host:port).
func Dial(url string) (*Codec, error) {
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		return nil, fmt.Errorf("schemareg: client: %w", err)
	}
	return New(cl), nil
}

// Register registers t's current schema under Subject(topic), sets the subject's
// compatibility to BACKWARD and returns the schema's id. It first checks locally that the
// schema reads data written with every version the subject holds (ErrIncompatible
// otherwise). Registering the same schema again returns the same id; Register is
// idempotent.
func (c *Codec) Register(ctx context.Context, topic string, t *event.Type) (int, error) {
	subject := Subject(topic)
	held, err := c.client.Schemas(ctx, subject)
	if err != nil && !notFound(err) {
		return 0, fmt.Errorf("schemareg: versions of %s: %w", subject, err)
	}
	for _, h := range held {
		old, err := parse(h.Schema.Schema)
		if err != nil {
			return 0, fmt.Errorf("schemareg: %s version %d: %w", subject, h.Version, err)
		}
		if err := avro.NewSchemaCompatibility().Compatible(t.Schema(), old); err != nil {
			return 0, fmt.Errorf("%w: %s against version %d: %v", ErrIncompatible, subject, h.Version, err)
		}
	}
	for _, r := range c.client.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, subject) {
		if r.Err != nil {
			return 0, fmt.Errorf("schemareg: compatibility of %s: %w", subject, r.Err)
		}
	}
	full, err := Full(t.Schema())
	if err != nil {
		return 0, err
	}
	ss, err := c.client.CreateSchema(ctx, subject, sr.Schema{Schema: full, Type: sr.TypeAvro})
	if err != nil {
		return 0, fmt.Errorf("schemareg: register %s: %w", subject, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids[topic] = ss.ID
	c.writers[ss.ID] = t.Schema()
	return ss.ID, nil
}

// Encode writes v, of type t, in the registry framing with the id Register returned for
// topic. It fails when topic's schema was not registered.
func (c *Codec) Encode(topic string, t *event.Type, v any) ([]byte, error) {
	c.mu.Lock()
	id, ok := c.ids[topic]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w for %s", errUnregistered, topic)
	}
	body, err := t.EncodeBody(v)
	if err != nil {
		return nil, err
	}
	b, err := c.header.AppendEncode(make([]byte, 0, 5+len(body)), id, nil)
	if err != nil {
		return nil, fmt.Errorf("schemareg: header: %w", err)
	}
	return append(b, body...), nil
}

// Decode reads data, of type t, in either framing into v. A record in the registry
// framing whose id the registry does not know fails with event.ErrUnknownSchema (a
// permanent error), as does any registry-framed record when c is nil; a registry that
// cannot be reached is a transient error. Other records go to t.Decode.
func (c *Codec) Decode(ctx context.Context, t *event.Type, data []byte, v any) error {
	if len(data) == 0 || data[0] != 0 {
		return t.Decode(data, v)
	}
	if c == nil {
		return fmt.Errorf("%w: %s: schema registry framing, and no registry is configured", event.ErrUnknownSchema, t.Name())
	}
	id, body, err := c.header.DecodeID(data)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", event.ErrMalformed, t.Name(), err)
	}
	writer, err := c.writer(ctx, t, id)
	if err != nil {
		return err
	}
	return t.DecodeBody(writer, body, v)
}

// writer returns the writer schema of registry id, fetched once. A schema with t's
// current canonical form is t's current schema, so decoding it needs no resolution.
func (c *Codec) writer(ctx context.Context, t *event.Type, id int) (avro.Schema, error) {
	c.mu.Lock()
	s, ok := c.writers[id]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	held, err := c.client.SchemaByID(ctx, id)
	if notFound(err) {
		return nil, fmt.Errorf("%w: %s: registry id %d is not in the registry", event.ErrUnknownSchema, t.Name(), id)
	}
	if err != nil {
		return nil, fmt.Errorf("schemareg: schema id %d: %w", id, err)
	}
	s, err = parse(held.Schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: registry id %d: %v", event.ErrUnknownSchema, t.Name(), id, err)
	}
	if event.CanonicalForm(s) == event.CanonicalForm(t.Schema()) {
		s = t.Schema()
	}
	c.mu.Lock()
	c.writers[id] = s
	c.mu.Unlock()
	return s, nil
}

// notFound reports whether err is the registry's 404 (no such subject, version or id).
func notFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// parse parses a schema from the registry on its own, so its names neither meet nor
// enter the process-wide cache that Lethe's own schemas are parsed into.
func parse(text string) (avro.Schema, error) {
	return avro.ParseWithCache(text, "", &avro.SchemaCache{})
}

// Full is the text a schema is registered as: its JSON with every doc, default and alias
// (the parsing canonical form, Schema.String, drops defaults, and a registry checking a
// new version against it finds a field added with a default incompatible).
func Full(s avro.Schema) (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("schemareg: schema text: %w", err)
	}
	return string(b), nil
}
