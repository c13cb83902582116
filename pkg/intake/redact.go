package intake

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/dlq"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// Redact is the dead-letter value of an erasure.intake record (consumer.Config.Redact):
// upstream apps send raw identifiers there in the clear, and a refused record must not
// keep them in the dead-letter topic. A decodable request keeps every field but the
// identifiers, which become placeholders ("pseudonym:<hex>", the keyed pseudonym,
// dlq.IsPlaceholder); undecodable bytes are replaced by their length and SHA-256. Either
// is reported as redacted, and the consumer marks the dead letter so: it is no longer
// the request as sent, and replaying it would erase the placeholder, so it is never
// replayed; the producer resubmits. A decodable record of any encoding (JSON, registry
// framed) is kept in Avro single-object encoding; a request without identifiers (TENANT
// scope) is then re-encoded but not redacted.
func (s *Service) Redact(rec *kgo.Record) ([]byte, bool) {
	in, err := s.decodeRecord(context.Background(), rec)
	if err != nil {
		return fmt.Appendf(nil, "redacted: %d undecodable bytes, sha256 %x", len(rec.Value), sha256.Sum256(rec.Value)), true
	}
	redacted := false
	pseudo := func(id string) string {
		if id == "" {
			return ""
		}
		redacted = true
		return dlq.PlaceholderPrefix + s.Key.Pseudonym(in.TenantID, id)
	}
	in.SubjectID = pseudo(in.SubjectID)
	for i, id := range in.SessionIDs {
		in.SessionIDs[i] = pseudo(id)
	}
	b, err := event.Intake.Encode(&in)
	if err != nil {
		return fmt.Appendf(nil, "redacted: %d bytes, sha256 %x", len(rec.Value), sha256.Sum256(rec.Value)), true
	}
	return b, redacted
}

// errPlaceholder refuses a replayed request that names a placeholder as an identifier.
var errPlaceholder = fmt.Errorf("%w: a replayed request names a placeholder of a redacted dead letter (pseudonym:<hex>) as subject_id or session_ids[]: the producer must submit the request again", ErrInvalid)

// refusePlaceholders returns errPlaceholder when rec is a replay (it carries
// dlq.HeaderReplayedFrom) and in names a placeholder as its subject or a session: erasing
// it would erase nothing of the subject's and spend the producer's idempotency key.
func refusePlaceholders(rec *kgo.Record, in event.IntakeRequest) error {
	if header(rec, dlq.HeaderReplayedFrom) == "" {
		return nil
	}
	if dlq.IsPlaceholder(in.SubjectID) {
		return errPlaceholder
	}
	for _, id := range in.SessionIDs {
		if dlq.IsPlaceholder(id) {
			return errPlaceholder
		}
	}
	return nil
}
