package auditlog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Writer writes hash-only audit events for a RAG app. It turns raw identifiers into keyed
// pseudonyms and query fingerprints before anything reaches the store; raw subject ids,
// session ids and query texts never do. The app remains responsible for chunk ids, model
// and path, which are stored as given: keep identifiers out of them (the audit_log
// Verifier flags events where it finds one). Safe for concurrent use.
type Writer struct {
	s   Store
	k   subject.Key
	now func() time.Time
}

// NewWriter returns a Writer that appends to s and pseudonymises with k.
func NewWriter(s Store, k subject.Key) *Writer {
	return &Writer{s: s, k: k, now: time.Now}
}

// Query appends a "query" event: the subject's pseudonym, the keyed fingerprint of
// (tenant, subject, session, query text), the retrieved chunk ids, the model and the
// request path, with a random event id and the current time. Errors from the store are
// returned wrapped; an empty tenant or subject id is Permanent. Errors never hold the
// raw values.
func (w *Writer) Query(ctx context.Context, tenant, subjectID, sessionID, queryText string, chunkIDs []string, model, path string) error {
	if tenant == "" || subjectID == "" {
		return retry.Permanent(errors.New("auditlog: query event needs a tenant and a subject id"))
	}
	id, err := newEventID()
	if err != nil {
		return err
	}
	e := Event{
		EventID:          id,
		TenantID:         tenant,
		SubjectHash:      w.k.Pseudonym(tenant, subjectID),
		KeyID:            w.k.ID(),
		Type:             TypeQuery,
		QueryFingerprint: w.k.Fingerprint(tenant, subjectID, sessionID, queryText),
		ChunkIDs:         append([]string(nil), chunkIDs...),
		Model:            model,
		Path:             path,
		At:               w.now().UTC(),
	}
	if err := w.s.AppendEvent(ctx, e); err != nil {
		return fmt.Errorf("auditlog: append query event: %w", err)
	}
	return nil
}

// newEventID returns 128 random bits in hex.
func newEventID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("auditlog: event id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
