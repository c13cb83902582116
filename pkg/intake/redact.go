package intake

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/event"
)

// Redact is the dead-letter value of an erasure.intake record (consumer.Config.Redact):
// upstream apps send raw identifiers there in the clear, and a refused record must not
// keep them in the dead-letter topic. A decodable request keeps every field but the
// identifiers, which become keyed pseudonyms ("pseudonym:<hex>"); undecodable bytes are
// replaced by their length and SHA-256. Refused records are refused for good (invalid,
// unauthorised), so the producer resubmits rather than anyone replaying them. Either is
// reported as redacted, and the consumer marks the dead letter so. A decodable record of
// any encoding (JSON, registry framed) is kept in Avro single-object encoding; a request
// without identifiers (TENANT scope) is then re-encoded but not redacted.
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
		return "pseudonym:" + s.Key.Pseudonym(in.TenantID, id)
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
