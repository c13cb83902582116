package envelope

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// identifiers is the sealed plaintext of event.Identifiers.
type identifiers struct {
	SubjectID  string   `json:"subject_id"`
	SessionIDs []string `json:"session_ids"`
}

// SealIdentifiers encrypts ids under the data key of requestID.
func (s *Sealer) SealIdentifiers(ctx context.Context, requestID string, ids event.Identifiers) (*event.SealedIdentifiers, error) {
	b, err := json.Marshal(identifiers{SubjectID: ids.SubjectID, SessionIDs: ids.SessionIDs})
	if err != nil {
		return nil, err
	}
	sealed, err := s.Seal(ctx, requestID, b)
	if err != nil {
		return nil, err
	}
	return &event.SealedIdentifiers{KEKID: sealed.KEKID, Nonce: sealed.Nonce, Ciphertext: sealed.Ciphertext}, nil
}

// Identifiers returns the identifiers of req: opened from req.Sealed when it is set (an
// error wrapping ErrShredded once the request's key was destroyed), else the clear ones.
func (s *Sealer) Identifiers(ctx context.Context, req *event.Requested) (event.Identifiers, error) {
	if req.Sealed == nil {
		return req.Identifiers, nil
	}
	if s == nil {
		return event.Identifiers{}, fmt.Errorf("envelope: request %s is sealed and no key-encryption key is configured", req.RequestID)
	}
	b, err := s.Open(ctx, req.RequestID, Sealed{KEKID: req.Sealed.KEKID, Nonce: req.Sealed.Nonce, Ciphertext: req.Sealed.Ciphertext})
	if err != nil {
		return event.Identifiers{}, err
	}
	var ids identifiers
	if err := json.Unmarshal(b, &ids); err != nil {
		return event.Identifiers{}, retry.Permanent(fmt.Errorf("envelope: sealed identifiers of %s: %w", req.RequestID, err))
	}
	return event.Identifiers{SubjectID: ids.SubjectID, SessionIDs: ids.SessionIDs}, nil
}
