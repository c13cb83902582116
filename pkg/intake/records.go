package intake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/pii"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// ContentTypeHeader is the erasure.intake record header that may say how the value is
// encoded: "application/json" for JSON, an Avro media type ("application/avro",
// "application/vnd.apache.avro+binary", ...) for Avro. Without it, or with another type,
// the first byte decides: '{' (after JSON whitespace) is JSON, 0x00 the Schema Registry
// wire format, 0xC3 Avro single-object encoding.
const ContentTypeHeader = "content-type"

// JSONRecord is an erasure.intake record in JSON, the shape schemas/intake.schema.json
// publishes: the HTTP submission's fields plus the idempotency key (the HTTP
// Idempotency-Key header) and, optionally, when the app submitted it. Unknown fields are
// refused, as over HTTP; the producer's identity comes from the authorization header,
// never from the record.
type JSONRecord struct {
	SubmitRequest
	IdempotencyKey string     `json:"idempotency_key"`
	SubmittedAt    *time.Time `json:"submitted_at,omitempty"`
}

// DecodeJSONRecord reads one JSON object of at most MaxBodyBytes with only JSONRecord's
// fields, valid UTF-8 without lone surrogate escapes (the rules of an HTTP submission).
// Its errors wrap ErrInvalid and describe the problem without echoing the value.
func DecodeJSONRecord(b []byte) (JSONRecord, error) {
	var v JSONRecord
	if len(b) > MaxBodyBytes {
		return v, fmt.Errorf("%w: JSON record is larger than %d bytes", ErrInvalid, MaxBodyBytes)
	}
	if err := decodeStrict(b, &v); err != nil {
		return v, fmt.Errorf("%w: invalid JSON record: the record %v", ErrInvalid, err)
	}
	return v, nil
}

// decodeRecord reads an erasure.intake record in any of its encodings (ContentTypeHeader).
// Every error is permanent: the record will never decode.
func (s *Service) decodeRecord(ctx context.Context, rec *kgo.Record) (event.IntakeRequest, error) {
	if !isJSON(rec) {
		if len(rec.Value) == 0 || rec.Value[0] != 0 && rec.Value[0] != 0xC3 {
			return event.IntakeRequest{}, retry.Permanent(fmt.Errorf("%w: the record is neither JSON (a value starting with '{', or header "+
				"content-type: application/json) nor Avro in the Schema Registry framing (first byte 0x00) or single-object encoding (first bytes 0xC3 0x01)", ErrInvalid))
		}
		var in event.IntakeRequest
		if err := s.Registry.Decode(ctx, event.Intake, rec.Value, &in); err != nil {
			if retry.IsPermanent(err) {
				return in, err
			}
			return in, fmt.Errorf("intake: schema registry: %w", err) // unreachable registry: retried
		}
		return in, nil
	}
	j, err := DecodeJSONRecord(rec.Value)
	if err != nil {
		return event.IntakeRequest{}, retry.Permanent(err)
	}
	in := event.IntakeRequest{
		TenantID: j.TenantID, SubjectID: j.SubjectID, SessionIDs: j.SessionIDs,
		Regulation: j.Regulation, Scope: j.Scope, IdempotencyKey: j.IdempotencyKey,
		Source: "kafka", SubmittedAt: s.now(),
	}
	if in.SessionIDs == nil {
		in.SessionIDs = []string{}
	}
	if j.SubmittedAt != nil {
		in.SubmittedAt = j.SubmittedAt.UTC()
	}
	return in, nil
}

// isJSON reports whether rec's value is JSON by its content-type header or, without a
// JSON or Avro one, by its first byte.
func isJSON(rec *kgo.Record) bool {
	if ct := header(rec, ContentTypeHeader); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
		case mt == "application/json" || strings.HasSuffix(mt, "+json"):
			return true
		case strings.Contains(mt, "avro"):
			return false
		}
	}
	trimmed := bytes.TrimLeft(rec.Value, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{'
}

// listByIdempotencyKey answers GET /v1/erasures?tenant=T&idempotency_key=K: the request
// that tenant T submitted with key K, if any, as a list of zero or one Status. It is how a
// producer on erasure.intake, which gets no answer from the broker, finds its request (the
// request id is keyed by the pseudonym key, so producers cannot compute it).
func (s *Service) listByIdempotencyKey(w http.ResponseWriter, r *http.Request, tenant, key string) {
	if tenant == "" {
		writeError(w, http.StatusBadRequest, "idempotency_key needs tenant")
		return
	}
	id := s.requestID(event.IntakeRequest{TenantID: tenant, IdempotencyKey: key})
	st, err := s.Status(r.Context(), id)
	if errors.Is(err, auditlog.ErrNotFound) {
		st, err = s.rejected(r.Context(), id)
	}
	switch {
	case errors.Is(err, auditlog.ErrNotFound):
		writeJSON(w, http.StatusOK, map[string]any{"requests": []Status{}})
	case err != nil:
		s.log().Error("lookup failed", zap.Error(err))
		writeError(w, http.StatusServiceUnavailable, "state store unavailable")
	default:
		writeJSON(w, http.StatusOK, map[string]any{"requests": []Status{st}})
	}
}

// rejected is the status of requestID when it names a refused intake record: REJECTED
// with the rejection; ErrNotFound when there is none.
func (s *Service) rejected(ctx context.Context, requestID string) (Status, error) {
	rj, err := s.Store.GetRejection(ctx, requestID)
	if err != nil {
		return Status{}, err
	}
	return Status{RequestID: rj.RequestID, TenantID: rj.TenantID, State: StateRejected, RequestedAt: rj.At,
		Stores: []StoreState{}, Rejection: &rj}, nil
}

// recordRejection records why rec was refused, under the request id its tenant and
// idempotency key name, so that its producer finds the refusal by that key. in is what was
// decoded of it; a JSON record that did not decode gives up its tenant and key if they can
// be read. Nothing is recorded for a record without both, for a producer that may not act
// for the tenant (it could otherwise answer for another tenant's key). An error storing
// it is returned (transient): the record is handled again rather than dead-lettered
// without a trace.
func (s *Service) recordRejection(ctx context.Context, rec *kgo.Record, in event.IntakeRequest, cause error) error {
	if in.TenantID == "" && isJSON(rec) {
		var named struct {
			TenantID       string `json:"tenant_id"`
			IdempotencyKey string `json:"idempotency_key"`
		}
		if json.Unmarshal(rec.Value, &named) == nil {
			in.TenantID, in.IdempotencyKey = named.TenantID, named.IdempotencyKey
		}
	}
	if in.IdempotencyKey == "" || subject.ValidateTenant(in.TenantID) != nil {
		return nil
	}
	var producer string
	if s.Auth != nil {
		p, err := s.Auth.AuthenticateHeader(header(rec, auth.RecordHeader))
		if err != nil || p.Authorize(in.TenantID) != nil {
			return nil
		}
		producer = p.Name
	}
	rj := auditlog.Rejection{RequestID: s.requestID(in), TenantID: in.TenantID, Reason: pii.Mask(cause.Error()), Producer: producer, At: s.now()}
	if err := s.Store.PutRejection(ctx, rj); err != nil {
		return fmt.Errorf("intake: record the rejection: %w", err)
	}
	s.log().Warn("intake record rejected", zap.String("request_id", rj.RequestID), zap.String("tenant", rj.TenantID),
		zap.String("producer", producer), zap.String("reason", rj.Reason))
	return nil
}
