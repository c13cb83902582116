package auditlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// StoredEvent is one of a subject's audit events as the store holds it: the JSON written,
// or, when the store could not read the item, why.
type StoredEvent struct {
	JSON []byte
	Err  error // the item could not be read (a missing or mistyped attribute); JSON is nil
}

// RawEventStore (part of Table) returns
// every stored item of the subject's events as written, decodable or not, so that the
// Verifier reads fields Event does not declare and reports the items it cannot decode
// instead of failing on them or skipping them. Order is unspecified. None is an empty
// result, not an error; errors are the store's own (reading failed as a whole).
type RawEventStore interface {
	RawEvents(ctx context.Context, tenant, subjectHash string) ([]StoredEvent, error)
}

// eventFields are the JSON names Event declares.
var eventFields = map[string]bool{
	"event_id": true, "tenant_id": true, "subject_hash": true, "key_id": true, "type": true,
	"query_fingerprint": true, "chunk_ids": true, "model": true, "path": true, "at": true,
	"actor": true, "reason": true,
}

// decodeStored decodes se into an Event and returns, beside it, every string (object keys
// included) found under the fields Event does not declare.
func decodeStored(se StoredEvent) (Event, []string, error) {
	if se.Err != nil {
		return Event{}, nil, se.Err
	}
	var e Event
	if err := json.Unmarshal(se.JSON, &e); err != nil {
		return Event{}, nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(se.JSON, &all); err != nil {
		return Event{}, nil, err
	}
	var extra []string
	for k, v := range all {
		if eventFields[k] {
			continue
		}
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return Event{}, nil, err
		}
		extra = append(appendStrings(x, extra), k)
	}
	return e, extra, nil
}

// strings_ appends every string of the decoded JSON value x (object keys included) to out.
func appendStrings(x any, out []string) []string {
	switch x := x.(type) {
	case string:
		return append(out, x)
	case []any:
		for _, y := range x {
			out = appendStrings(y, out)
		}
	case map[string]any:
		for k, y := range x {
			out = appendStrings(y, append(out, k))
		}
	}
	return out
}

// unreadable says why an event could not be decoded without quoting any of its content
// (a time that does not parse, for one, would otherwise be echoed back).
func unreadable(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tp *time.ParseError
	switch {
	case errors.As(err, &syn):
		return "not valid JSON"
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q holds a JSON %s where the event has %s", typ.Field, typ.Value, typ.Type)
	case errors.As(err, &tp):
		return `field "at" is not an RFC 3339 time`
	case errors.Is(err, ErrNoEventJSON):
		return "the item holds no event JSON"
	default:
		return "does not decode as an audit event"
	}
}

// ErrNoEventJSON is the StoredEvent.Err of an item that holds no event JSON.
var ErrNoEventJSON = errors.New("auditlog: the item holds no event JSON")

var _ RawEventStore = (*DirStore)(nil)

// RawEvents returns the stored JSON of every event of the subject, those this version
// cannot decode included.
func (s *DirStore) RawEvents(ctx context.Context, tenant, subjectHash string) ([]StoredEvent, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.events[[2]string{tenant, subjectHash}]
	out := make([]StoredEvent, 0, len(m))
	for _, b := range m {
		out = append(out, StoredEvent{JSON: b})
	}
	return out, ctx.Err()
}

// eventKey reads the tenant, subject hash and event id of an event record that does not
// decode as an Event, so that replay keeps it (for the Verifier to report unexamined)
// instead of refusing to open the store; ok is false when even those do not read.
func eventKey(js []byte) (tenant, subjectHash, eventID string, ok bool) {
	var k struct {
		EventID     string `json:"event_id"`
		TenantID    string `json:"tenant_id"`
		SubjectHash string `json:"subject_hash"`
	}
	if json.Unmarshal(js, &k) != nil || k.EventID == "" || k.TenantID == "" || k.SubjectHash == "" {
		return "", "", "", false
	}
	return k.TenantID, k.SubjectHash, k.EventID, true
}
