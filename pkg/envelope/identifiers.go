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
	b, err := s.Open(ctx, req.RequestID, sealedOf(req))
	return decodeIdentifiers(req, b, err)
}

// IdentifiersBatch returns at each index of reqs what Identifiers returns for that
// request, reading the data keys of the sealed ones together (OpenBatch).
func (s *Sealer) IdentifiersBatch(ctx context.Context, reqs []*event.Requested) ([]event.Identifiers, []error) {
	out, errs := make([]event.Identifiers, len(reqs)), make([]error, len(reqs))
	var sealed []int // the indices of the sealed requests
	for i, req := range reqs {
		if req.Sealed == nil || s == nil {
			out[i], errs[i] = s.Identifiers(ctx, req)
			continue
		}
		sealed = append(sealed, i)
	}
	if len(sealed) == 0 { // s may be nil
		return out, errs
	}
	ids, payloads := make([]string, len(sealed)), make([]Sealed, len(sealed))
	for j, i := range sealed {
		ids[j], payloads[j] = reqs[i].RequestID, sealedOf(reqs[i])
	}
	pts, perrs := s.OpenBatch(ctx, ids, payloads)
	for j, i := range sealed {
		out[i], errs[i] = decodeIdentifiers(reqs[i], pts[j], perrs[j])
	}
	return out, errs
}

func sealedOf(req *event.Requested) Sealed {
	return Sealed{KEKID: req.Sealed.KEKID, Nonce: req.Sealed.Nonce, Ciphertext: req.Sealed.Ciphertext}
}

// decodeIdentifiers decodes b, the opened identifiers of req, or passes on err.
func decodeIdentifiers(req *event.Requested, b []byte, err error) (event.Identifiers, error) {
	if err != nil {
		return event.Identifiers{}, err
	}
	var ids identifiers
	if err := json.Unmarshal(b, &ids); err != nil {
		return event.Identifiers{}, retry.Permanent(fmt.Errorf("envelope: sealed identifiers of %s: %w", req.RequestID, err))
	}
	return event.Identifiers{SubjectID: ids.SubjectID, SessionIDs: ids.SessionIDs}, nil
}
