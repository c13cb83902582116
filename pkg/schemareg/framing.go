package schemareg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// Framings is the framing of each topic's records; a topic it does not name uses
// Default. The zero Framings is unset: With decides.
type Framings struct {
	Default Framing
	Topics  map[string]Framing
}

// With returns f, or for unset framings the default where a registry is configured or
// not: the registry framing with one (what registry-aware consumers such as
// confluent_kafka's AvroDeserializer and kcat -s value=avro read), single-object encoding
// without.
func (f Framings) With(registry bool) Framings {
	switch {
	case f.Default != "" || len(f.Topics) > 0:
		return f
	case registry:
		return Framings{Default: Registry}
	}
	return Framings{Default: SingleObject}
}

// Of is topic's framing.
func (f Framings) Of(topic string) Framing {
	if fr, ok := f.Topics[topic]; ok {
		return fr
	}
	if f.Default == "" {
		return SingleObject
	}
	return f.Default
}

// ParseFramings reads a framing setting (LETHE_FRAMING): one framing for every topic
// ("registry"), or a comma-separated list of topic=framing with an optional bare default
// ("single-object,erasure.completed=registry").
func ParseFramings(s string) (Framings, error) {
	f := Framings{Default: SingleObject, Topics: map[string]Framing{}}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		topic, name, named := strings.Cut(part, "=")
		if !named {
			name = topic
		}
		fr, err := ParseFraming(name)
		if err != nil {
			return Framings{}, err
		}
		if named {
			f.Topics[strings.TrimSpace(topic)] = fr
		} else {
			f.Default = fr
		}
	}
	return f, nil
}

// UnmarshalText parses a framing setting (ParseFramings).
func (f *Framings) UnmarshalText(b []byte) error {
	v, err := ParseFramings(string(b))
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// MarshalText writes f as ParseFramings reads it: the default, then each topic's framing
// in topic order.
func (f Framings) MarshalText() ([]byte, error) {
	if f.Default == "" && len(f.Topics) == 0 {
		return nil, nil
	}
	parts := []string{string(f.Of(""))}
	for _, t := range slices.Sorted(maps.Keys(f.Topics)) {
		parts = append(parts, t+"="+string(f.Topics[t]))
	}
	return []byte(strings.Join(parts, ",")), nil
}

// UsesRegistry reports whether any topic is framed for the registry.
func (f Framings) UsesRegistry() bool {
	if f.Default == Registry {
		return true
	}
	for _, fr := range f.Topics {
		if fr == Registry {
			return true
		}
	}
	return false
}

// EncodeFor writes v, of type t, in topic's framing (c.Framings). A nil Codec writes
// single-object encoding. It is the one place producers choose a framing: every record
// Lethe writes on its topics goes through it.
//
// A topic framed for the registry whose schema was not registered yet (a topic renamed
// from the defaults of package event) is registered on first use, under
// Subject(topic), within registerTimeout; a registry that cannot be reached then is an
// error the caller may retry.
func (c *Codec) EncodeFor(topic string, t *event.Type, v any) ([]byte, error) {
	if c == nil || c.Framings.Of(topic) != Registry {
		return t.Encode(v)
	}
	b, err := c.Encode(topic, t, v)
	if !errors.Is(err, errUnregistered) {
		return b, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
	defer cancel()
	if _, err := c.Register(ctx, topic, t); err != nil {
		return nil, err
	}
	return c.Encode(topic, t, v)
}

// registerTimeout bounds the registration EncodeFor makes of a topic not registered yet.
const registerTimeout = 10 * time.Second

// Reframe wraps a record handler of Lethe's own topics: a registry-framed record of a
// topic in types is handed on in single-object encoding (same body, the header of its
// writer schema), so handlers that read single-object encoding read both framings. The
// record's value is put back once the handler returns, so a record the consumer then
// dead-letters is written as it was read. A writer schema that is none of the released
// ones, or an id the registry does not know, is a permanent error (the record is
// dead-lettered with the reason); other records pass unchanged. A nil Codec refuses
// registry-framed records the same way.
func (c *Codec) Reframe(types map[string]*event.Type, h func(context.Context, *kgo.Record) error) func(context.Context, *kgo.Record) error {
	return func(ctx context.Context, rec *kgo.Record) error {
		t, ok := types[rec.Topic]
		if !ok || len(rec.Value) == 0 || rec.Value[0] != 0 {
			return h(ctx, rec)
		}
		if c == nil {
			return fmt.Errorf("%w: %s: schema registry framing, and no registry is configured", event.ErrUnknownSchema, t.Name())
		}
		id, body, err := c.header.DecodeID(rec.Value)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", event.ErrMalformed, t.Name(), err)
		}
		writer, err := c.writer(ctx, t, id)
		if err != nil {
			return err
		}
		v, err := t.SingleObject(writer, body)
		if err != nil {
			return err
		}
		orig := rec.Value
		rec.Value = v
		defer func() { rec.Value = orig }()
		return h(ctx, rec)
	}
}

// Topics maps each of Lethe's topics to the event type of its records.
func Topics() map[string]*event.Type {
	return map[string]*event.Type{
		event.TopicIntake:       event.Intake,
		event.TopicRequested:    event.Request,
		event.TopicStoreDone:    event.Done,
		event.TopicCompleted:    event.Completed,
		event.TopicOverdue:      event.Overdues,
		event.TopicSuppressions: event.Suppressions,
		event.TopicReappeared:   event.Reappear,
		event.TopicStoreFound:   event.Found,
	}
}

// RegisterAll registers the current schema of every topic in Topics (Register).
func (c *Codec) RegisterAll(ctx context.Context) error {
	for topic, t := range Topics() {
		if _, err := c.Register(ctx, topic, t); err != nil {
			return err
		}
	}
	return nil
}

// OwnTopics is Topics without erasure.intake: the topics only Lethe writes, whose writer
// schemas are always released ones, for Reframe. Intake records come from upstream apps,
// whose schema versions the intake handler resolves itself.
func OwnTopics() map[string]*event.Type {
	t := Topics()
	delete(t, event.TopicIntake)
	return t
}

// FramingSettings declare how Lethe frames the records it writes.
type FramingSettings struct {
	Framings Framings `env:"LETHE_FRAMING" doc:"How Lethe frames the records it writes, per topic: single-object, registry, or a list (registry,erasure.completed=single-object); empty: registry where LETHE_SCHEMA_REGISTRY_URL is set, else single-object. It applies to every topic Lethe writes, by every service and by lethectl reapply; consumers read both framings whatever it says."`
}

// Settings declare the Schema Registry and the framing.
type Settings struct {
	URL string `env:"LETHE_SCHEMA_REGISTRY_URL" doc:"The Schema Registry, http://host:port; required when LETHE_FRAMING names registry; services and lethectl register Lethe's schemas there."`
	FramingSettings
}

// Validate refuses registry framing without a registry.
func (s Settings) Validate() error {
	if s.URL == "" && s.Framings.UsesRegistry() {
		return errors.New("schemareg: LETHE_FRAMING frames records for a registry, and LETHE_SCHEMA_REGISTRY_URL is not set")
	}
	return nil
}

// Codec returns the Codec of the registry s names, with its framings and Lethe's schemas
// registered (RegisterAll). Without a registry URL it returns nil, which reads and writes
// single-object encoding only.
func (s Settings) Codec(ctx context.Context) (*Codec, error) {
	if s.URL == "" {
		return nil, nil
	}
	c, err := Dial(s.URL)
	if err != nil {
		return nil, err
	}
	c.Framings = s.Framings.With(true)
	if err := c.RegisterAll(ctx); err != nil {
		return nil, fmt.Errorf("schemareg: %s: %w", s.URL, err)
	}
	return c, nil
}

// FromEnv loads the Settings through getenv (os.Getenv when nil) and returns their Codec.
func FromEnv(ctx context.Context, getenv func(string) string) (*Codec, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var s Settings
	if err := envconf.Load(&s, getenv); err != nil {
		return nil, err
	}
	return s.Codec(ctx)
}
