package consumer

import (
	"bytes"
	"context"
	"errors"
	"mime"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/pii"
)

// Headers of a dead letter. The consumer writes the lethe.dlq.* ones. Of the record's own
// headers a dead letter keeps only this allow-list, so that a credential (the
// authorization header of erasure.intake records), trace context or an application's
// headers never reach the dead-letter topic:
//   - HeaderContentType, reduced to its media type, and only when the dead letter's value
//     is the record's own: erasure.intake's decoder reads it;
//   - HeaderReplayedFrom and HeaderReplayedBy, which a replay (pkg/dlq) writes, when well
//     formed: they say that the record failed again after a replay, and who replayed it.
//
// Header names are matched without regard to case.
const (
	HeaderReason    = "lethe.dlq.reason" // why, masked for personal data
	HeaderTopic     = "lethe.dlq.topic"  // the source topic
	HeaderPartition = "lethe.dlq.partition"
	HeaderOffset    = "lethe.dlq.offset"
	HeaderGroup     = "lethe.dlq.group"
	HeaderAt        = "lethe.dlq.at" // RFC 3339, UTC
	// HeaderPrincipal names the principal the record's credential authenticated, when
	// the handler said (WithPrincipal). Neither the credential nor its hash is written.
	HeaderPrincipal = "lethe.dlq.principal"
	// HeaderRedacted is "true" when Config.Redact replaced identifiers in the value: the
	// dead letter is not the record as sent, and must never be replayed.
	HeaderRedacted = "lethe.dlq.redacted"

	HeaderContentType  = "content-type"
	HeaderReplayedFrom = "lethe.replayed-from" // "<dead-letter topic>/<partition>/<offset>"
	HeaderReplayedBy   = "lethe.replayed-by"   // the replaying principal's name
)

// maxNameBytes bounds a replaying principal's name kept on a dead letter.
const maxNameBytes = 128

// WithPrincipal returns err carrying name, the principal that the record's credential
// authenticated: the record's dead letter names it in HeaderPrincipal. errors.Is,
// errors.As and retry.IsPermanent see through it. WithPrincipal(nil, name) is nil, and an
// empty name adds nothing.
func WithPrincipal(err error, name string) error {
	if err == nil || name == "" {
		return err
	}
	return &principalError{err: err, name: name}
}

// PrincipalOf returns the principal's name WithPrincipal attached to err, or "".
func PrincipalOf(err error) string {
	var pe *principalError
	if errors.As(err, &pe) {
		return pe.name
	}
	return ""
}

type principalError struct {
	err  error
	name string
}

func (e *principalError) Error() string { return e.err.Error() }
func (e *principalError) Unwrap() error { return e.err }

// deadLetter writes rec to <topic>.dlq, retrying until the write was acknowledged.
func (p *partition) deadLetter(ctx context.Context, rec *kgo.Record, cause error) bool {
	out := p.r.deadLetterOf(rec, cause, time.Now())
	for attempt := 1; ; attempt++ {
		err := p.cl.ProduceSync(ctx, out).FirstErr()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		p.r.cfg.Log.Error("dead-letter write failed, retrying", zap.String("topic", out.Topic), zap.Int("attempt", attempt), zap.Error(err))
		if !sleep(ctx, p.quit, p.r.cfg.Backoff.Delay(attempt)) {
			return false
		}
	}
}

// deadLetterOf is the dead letter of rec, refused at now for cause: its key, its value or
// Config.Redact's, the allow-listed headers of rec and the lethe.dlq.* ones.
func (r *runner) deadLetterOf(rec *kgo.Record, cause error, now time.Time) *kgo.Record {
	value, redacted := rec.Value, false
	if r.cfg.Redact != nil {
		value, redacted = r.cfg.Redact(rec)
	}
	hs := keptHeaders(rec.Headers, bytes.Equal(value, rec.Value))
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderReason, Value: []byte(pii.Mask(cause.Error()))},
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(rec.Topic)},
		kgo.RecordHeader{Key: HeaderPartition, Value: []byte(strconv.Itoa(int(rec.Partition)))},
		kgo.RecordHeader{Key: HeaderOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))},
		kgo.RecordHeader{Key: HeaderGroup, Value: []byte(r.cfg.Group)},
		kgo.RecordHeader{Key: HeaderAt, Value: []byte(now.UTC().Format(time.RFC3339Nano))},
	)
	if name := PrincipalOf(cause); name != "" {
		hs = append(hs, kgo.RecordHeader{Key: HeaderPrincipal, Value: []byte(name)})
	}
	if redacted {
		hs = append(hs, kgo.RecordHeader{Key: HeaderRedacted, Value: []byte("true")})
	}
	return &kgo.Record{Topic: event.DLQ(rec.Topic), Key: rec.Key, Value: value, Headers: hs}
}

// keptHeaders returns the allow-listed headers among hs (see HeaderReason), cleaned and
// under their canonical names; ownValue says whether the dead letter keeps the record's
// value (a content type describes that value only).
func keptHeaders(hs []kgo.RecordHeader, ownValue bool) []kgo.RecordHeader {
	var out []kgo.RecordHeader
	keep := func(k, v string) { out = append(out, kgo.RecordHeader{Key: k, Value: []byte(v)}) }
	for _, h := range hs {
		v := string(h.Value)
		switch k := strings.ToLower(h.Key); k {
		case HeaderContentType:
			if mt, _, err := mime.ParseMediaType(v); ownValue && err == nil {
				keep(k, mt)
			}
		case HeaderReplayedFrom:
			if validLocation(v) {
				keep(k, v)
			}
		case HeaderReplayedBy:
			if validName(v) {
				keep(k, pii.Mask(v))
			}
		}
	}
	return out
}

// validLocation reports whether v is "<topic>/<partition>/<offset>" with a Kafka topic
// name and non-negative numbers.
func validLocation(v string) bool {
	parts := strings.Split(v, "/")
	if len(parts) != 3 || len(parts[0]) == 0 || len(parts[0]) > 249 {
		return false
	}
	for _, c := range parts[0] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	p, err1 := strconv.ParseInt(parts[1], 10, 32)
	o, err2 := strconv.ParseInt(parts[2], 10, 64)
	return err1 == nil && err2 == nil && p >= 0 && o >= 0
}

// validName reports whether v may be a principal's name: short, printable UTF-8.
func validName(v string) bool {
	if v == "" || len(v) > maxNameBytes || !utf8.ValidString(v) {
		return false
	}
	return strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
}
