package intake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 64 << 10

// SubmitRequest is the body of POST /v1/erasures.
type SubmitRequest struct {
	TenantID   string      `json:"tenant_id"`
	SubjectID  string      `json:"subject_id"`
	SessionIDs []string    `json:"session_ids"`
	Regulation string      `json:"regulation"`
	Scope      event.Scope `json:"scope"`
	// DryRun counts what the erasure would delete per store, deletes nothing and issues
	// no receipt: the request ends PREVIEWED (POST /v1/erasures/{id}/confirm runs it).
	DryRun bool `json:"dry_run,omitempty"`
}

// Accepted is the 202 answer of POST /v1/erasures.
type Accepted struct {
	RequestID   string    `json:"request_id"`
	SubjectHash string    `json:"subject_hash"`
	KeyID       string    `json:"key_id"`
	DueAt       time.Time `json:"due_at"`
	StatusURL   string    `json:"status_url"`
	ReceiptURL  string    `json:"receipt_url"`
	// State is set when the request waits at a gate or is a dry run: PREVIEWED,
	// SCHEDULED or AWAITING_APPROVAL.
	State string `json:"state,omitempty"`
}

// Request states in Status.
const (
	StatePending    = "PENDING"     // accepted, no store has reported
	StateInProgress = "IN_PROGRESS" // some stores reported
	StateFailed     = "FAILED"      // a store reported FAILED (re-drive it)
	StateComplete   = "COMPLETE"    // the receipt exists
	// StateIncomplete: every store succeeded, but a store found the subject outside the
	// inventory, or could not read a location there (its verification's outside_inventory
	// names each, with the inventory entry that would cover it): extend the inventory and
	// re-drive. No receipt is issued meanwhile.
	StateIncomplete = "INCOMPLETE"
)

// StoreState is one store's part of Status. Status is PENDING until it reports.
type StoreState struct {
	Store     string       `json:"store"`
	Status    event.Status `json:"status"`
	Deleted   int64        `json:"deleted"`
	Remaining int64        `json:"remaining"`
	// Unexamined counts items the store could not read back: unknown, never clean.
	Unexamined int64  `json:"unexamined"`
	Attempt    int    `json:"attempt,omitempty"`
	Error      string `json:"error,omitempty"`
	// Verification is the store's read-back (method, mentions, similar, attestation).
	Verification *event.Verification `json:"verification,omitempty"`
	FinishedAt   time.Time           `json:"finished_at,omitzero"`
	DryRun       bool                `json:"dry_run,omitempty"`
	// Method is how the store read back; Mentions the subject's identifiers it still found
	// outside the named fields (never clean); Similar how many probable untagged copies it
	// reported (their ids are in the receipt).
	Method   string `json:"method,omitempty"`
	Mentions int64  `json:"mentions"`
	Similar  int    `json:"similar"`
	// DiscoveryRunAt is when inventory discovery last ran over the store's backend at the
	// time of the report (nil: never), and DiscoveryUncovered what it found outside the
	// inventory: how complete the store's "complete" was.
	DiscoveryRunAt     *time.Time `json:"discovery_run_at,omitempty"`
	DiscoveryUncovered int64      `json:"discovery_uncovered"`
}

// Status is the answer of GET /v1/erasures/{id}. It holds no raw identifier.
type Status struct {
	RequestID        string       `json:"request_id"`
	TenantID         string       `json:"tenant_id"`
	SubjectHash      string       `json:"subject_hash"`
	KeyID            string       `json:"key_id"`
	Scope            event.Scope  `json:"scope"`
	Regulation       string       `json:"regulation"`
	State            string       `json:"state"`
	RequestedAt      time.Time    `json:"requested_at"`
	DueAt            time.Time    `json:"due_at"`
	Overdue          bool         `json:"overdue"`
	InventoryVersion string       `json:"inventory_version"`
	Stores           []StoreState `json:"stores"`
	ReceiptID        string       `json:"receipt_id,omitempty"`
	// Workflow is the request's passage through the gates (dry run, approval, window).
	Workflow *Gate `json:"workflow,omitempty"`
	// Rejection is, for a REJECTED request that was an erasure.intake record refused and
	// dead-lettered, why it was refused and when.
	Rejection *auditlog.Rejection `json:"rejection,omitempty"`
}

// outsideNow reports whether the latest attempt of some kind found the subject outside
// the inventory or could not read a location there (as aggregator.Build decides).
func outsideNow(byStore map[string]event.StoreDone) bool {
	latest := map[string]int{}
	for _, d := range byStore {
		latest[d.Kind] = max(latest[d.Kind], d.Attempt)
	}
	for _, d := range byStore {
		if d.Attempt == latest[d.Kind] && d.Verification.Outside() {
			return true
		}
	}
	return false
}

// Pending is the store state before a report.
const Pending event.Status = "PENDING"

// Handler serves the intake API:
//
//	POST /v1/erasures               submit (202 with Accepted; 400, 403, 409, 413, 429, 503 with {"error"})
//	GET  /v1/erasures/{id}          status (200 with Status; 404)
//	GET  /v1/erasures/{id}/receipt  receipt (200 with event.Receipt; 404 until it exists)
//	GET  /v1/erasures               list: ?tenant=&state=&overdue=true&limit= (200 {"requests": [Status]})
//	GET  /v1/erasures?tenant=&idempotency_key=   the request submitted with that key, if any (200 {"requests": [Status]})
//	POST /v1/erasures/{id}/retry    re-drive with RetryRequest (202; 400, 404, 503)
//	POST /v1/suppressions/check     which identifiers are erased: CheckRequest (200 CheckResponse; 400, 403, 429, 503)
//	POST /v1/suppressions/lift      lift suppressions by consent: LiftRequest (200 LiftResponse; 400, 403, 429, 503)
//	GET  /healthz                   liveness
//
// A submitted body is one JSON object of at most MaxBodyBytes (larger bodies are 413
// whatever they hold) with only the fields of SubmitRequest. It must be valid UTF-8 and
// must not escape a lone UTF-16 surrogate (\ud800): encoding/json would silently replace
// either by U+FFFD, and the request would then erase and pseudonymise another identifier
// than the one sent, so such bodies are 400. No answer echoes an identifier.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/erasures", s.authenticate(s.handleSubmit))
	mux.HandleFunc("GET /v1/erasures", s.authenticate(s.handleList))
	mux.HandleFunc("GET /v1/erasures/{id}", s.authenticate(s.handleStatus))
	mux.HandleFunc("POST /v1/erasures/{id}/retry", s.authenticate(s.handleRetry))
	mux.HandleFunc("GET /v1/erasures/{id}/receipt", s.authenticate(s.handleReceipt))
	mux.HandleFunc("GET /v1/erasures/{id}/addenda", s.authenticate(s.handleAddenda))
	mux.HandleFunc("POST /v1/suppressions/check", s.authenticate(s.handleCheck))
	mux.HandleFunc("POST /v1/suppressions/lift", s.authenticate(s.handleLift))
	s.routeWorkflow(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	return metrics.Or(s.Metrics).Instrument(mux, s.guard(mux))
}

// decodeBody reads one JSON object of at most MaxBodyBytes with only the fields of v, or
// answers the refusal and returns false.
func (s *Service) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.reject(w, http.StatusRequestEntityTooLarge, metrics.ReasonTooLarge, fmt.Sprintf("body is larger than %d bytes", MaxBodyBytes))
			return false
		}
		s.reject(w, http.StatusBadRequest, metrics.ReasonInvalid, "body could not be read")
		return false
	}
	if err := decodeStrict(raw, v); err != nil {
		s.reject(w, http.StatusBadRequest, metrics.ReasonInvalid, "body "+err.Error())
		return false
	}
	return true
}

// decodeStrict decodes raw, one JSON object with only the fields of v, into v. raw must
// be valid UTF-8 and must not escape a lone UTF-16 surrogate (encoding/json would replace
// either by U+FFFD, changing the identifier). Errors complete a sentence whose subject is
// the body or record ("is not a valid request: ...") and never echo raw.
func decodeStrict(raw []byte, v any) error {
	if !utf8.Valid(raw) || loneSurrogate(raw) {
		return errors.New("is not valid UTF-8 (or escapes a lone UTF-16 surrogate)")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New("is not a valid request: " + jsonReason(err, v))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("holds more than one JSON value")
	}
	return nil
}

// handleSubmit answers a submission. The body is validated before the tenant is
// authorised: validity depends on the body alone (no store is read), so a 400 says what is
// wrong with it whatever the token, and tells nothing about any tenant or its requests.
func (s *Service) handleSubmit(w http.ResponseWriter, r *http.Request) {
	var body SubmitRequest
	if !s.decodeBody(w, r, &body) {
		return
	}
	source := "http"
	if p, ok := auth.PrincipalFrom(r.Context()); ok {
		source = p.Name
	}
	in := event.IntakeRequest{
		TenantID: body.TenantID, SubjectID: body.SubjectID, SessionIDs: body.SessionIDs,
		Regulation: body.Regulation, Scope: body.Scope, IdempotencyKey: r.Header.Get("Idempotency-Key"),
		Source: source, SubmittedAt: s.now(),
	}
	if err := s.Validate(&in); err != nil {
		s.reject(w, http.StatusBadRequest, metrics.ReasonInvalid, err.Error())
		return
	}
	if !s.authorize(w, r, in.TenantID) || !s.limit(w, in.TenantID) {
		return
	}
	sub, err := s.submit(r.Context(), in, SubmitOptions{DryRun: body.DryRun, Channel: "http"})
	req, state := sub.req, string(sub.state)
	if err == nil && sub.again {
		state = s.gateState(r.Context(), req.RequestID)
	}
	switch {
	case errors.Is(err, ErrInvalid):
		s.reject(w, http.StatusBadRequest, metrics.ReasonInvalid, err.Error())
	case errors.Is(err, ErrConflict):
		s.reject(w, http.StatusConflict, metrics.ReasonConflict, err.Error())
	case errors.Is(err, ErrForbidden):
		s.reject(w, http.StatusForbidden, metrics.ReasonForbidden, err.Error())
	case errors.Is(err, ErrUnavailable):
		s.reject(w, http.StatusServiceUnavailable, metrics.ReasonUnavailable, UnavailableReason(err))
	case err != nil:
		s.log().Error("submit failed", zap.Error(err))
		writeError(w, http.StatusInternalServerError, "internal error")
	default:
		writeJSON(w, http.StatusAccepted, Accepted{
			RequestID: req.RequestID, SubjectHash: req.SubjectHash, KeyID: req.KeyID, DueAt: req.DueAt,
			StatusURL: "/v1/erasures/" + req.RequestID, ReceiptURL: "/v1/erasures/" + req.RequestID + "/receipt",
			State: state,
		})
	}
}

// reject answers a refused submission and counts it by reason.
func (s *Service) reject(w http.ResponseWriter, code int, reason, msg string) {
	metrics.Or(s.Metrics).Rejected.WithLabelValues(reason).Inc()
	writeError(w, code, msg)
}

// jsonReason describes a decoding error without echoing the body (it may hold identifiers).
func jsonReason(err error, v any) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("syntax error at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q must be %s", typ.Field, typ.Type)
	case err.Error() == "EOF":
		return "empty body"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return strings.TrimPrefix(err.Error(), "json: ") + "; the fields are " + strings.Join(jsonFields(reflect.TypeOf(v)), ", ")
	}
	msg := err.Error()
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return msg // "json: unknown field \"x\"" and the like name fields, not values
}

// loneSurrogate reports whether the JSON text b holds a \u escape of a UTF-16 surrogate
// that is not half of a high-low pair. Backslashes outside strings are syntax errors the
// decoder reports, so b is scanned escape by escape.
func loneSurrogate(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+1 >= len(b) || b[i+1] != 'u' {
			i++ // a one-character escape such as \\ or \"
			continue
		}
		r, ok := hex4(b[i+2:])
		switch {
		case !ok:
			i++ // malformed: the decoder reports it
		case r >= 0xdc00 && r <= 0xdfff:
			return true
		case r >= 0xd800 && r <= 0xdbff:
			if len(b) < i+12 || b[i+6] != '\\' || b[i+7] != 'u' {
				return true
			}
			if lo, ok := hex4(b[i+8:]); !ok || lo < 0xdc00 || lo > 0xdfff {
				return true
			}
			i += 11
		default:
			i += 5
		}
	}
	return false
}

// hex4 parses the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(n), err == nil
}

// Status returns the status of requestID.
func (s *Service) Status(ctx context.Context, requestID string) (Status, error) {
	if st, waiting, err := s.gatedStatus(ctx, requestID); waiting || err != nil {
		return st, err
	}
	req, err := s.Store.GetRequest(ctx, requestID)
	if err != nil {
		return Status{}, err
	}
	reports, err := s.Store.Reports(ctx, requestID)
	if err != nil {
		return Status{}, err
	}
	st := Status{
		RequestID: req.RequestID, TenantID: req.TenantID, SubjectHash: req.SubjectHash, KeyID: req.KeyID,
		Scope: req.Scope, Regulation: req.Regulation, RequestedAt: req.RequestedAt, DueAt: req.DueAt,
		InventoryVersion: req.InventoryVersion, State: StatePending,
	}
	byStore := map[string]event.StoreDone{}
	for _, d := range reports {
		byStore[d.Store] = d
	}
	for _, name := range req.ExpectedStores {
		d, ok := byStore[name]
		if !ok {
			st.Stores = append(st.Stores, StoreState{Store: name, Status: Pending})
			continue
		}
		st.State = StateInProgress
		v := d.Verification
		st.Stores = append(st.Stores, StoreState{
			Store:              name,
			Status:             d.Status,
			Deleted:            d.Deleted(),
			Remaining:          v.Remaining,
			Unexamined:         v.Unexamined,
			Attempt:            d.Attempt,
			Error:              d.Error,
			Method:             v.Method,
			Mentions:           v.Mentions,
			Similar:            len(v.Similar),
			DiscoveryRunAt:     v.DiscoveryRunAt,
			DiscoveryUncovered: v.DiscoveryUncovered,
			Verification:       &d.Verification,
			FinishedAt:         d.FinishedAt,
			DryRun:             d.DryRun,
		})
	}
	reported := len(reports) > 0
	for _, ss := range st.Stores {
		if ss.Status == event.StatusFailed {
			st.State = StateFailed
		}
		reported = reported && ss.Status != Pending
	}
	if st.State == StateInProgress && reported && outsideNow(byStore) {
		st.State = StateIncomplete
	}
	rc, err := s.Store.GetReceipt(ctx, requestID)
	switch {
	case err == nil:
		st.State, st.ReceiptID = StateComplete, rc.ReceiptID
	case !errors.Is(err, auditlog.ErrNotFound):
		return Status{}, err
	}
	st.Overdue = st.State != StateComplete && s.now().After(req.DueAt)
	return s.decorate(ctx, st, rc)
}

func (s *Service) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := s.Status(r.Context(), r.PathValue("id"))
	if s.lookupFailed(w, err) || !s.authorize(w, r, st.TenantID) {
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Service) handleReceipt(w http.ResponseWriter, r *http.Request) {
	req, err := s.Store.GetRequest(r.Context(), r.PathValue("id"))
	if s.lookupFailed(w, err) || !s.authorize(w, r, req.TenantID) {
		return
	}
	rc, err := s.Store.GetReceipt(r.Context(), req.RequestID)
	if s.lookupFailed(w, err) {
		return
	}
	writeJSON(w, http.StatusOK, rc)
}

// handleAddenda answers the addenda of a request's receipt ({"addenda": [...]}, oldest
// first; empty when the store keeps none).
func (s *Service) handleAddenda(w http.ResponseWriter, r *http.Request) {
	req, err := s.Store.GetRequest(r.Context(), r.PathValue("id"))
	if s.lookupFailed(w, err) || !s.authorize(w, r, req.TenantID) {
		return
	}
	ads, err := s.Store.AddendaOf(r.Context(), req.RequestID)
	if s.lookupFailed(w, err) {
		return
	}
	if ads == nil {
		ads = []auditlog.Addendum{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"addenda": ads})
}

func (s *Service) lookupFailed(w http.ResponseWriter, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, auditlog.ErrNotFound):
		writeError(w, http.StatusNotFound, "no such request, or no receipt yet")
	default:
		s.log().Error("lookup failed", zap.Error(err))
		writeError(w, http.StatusServiceUnavailable, "state store unavailable")
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the status is sent; a client that went away is no error of ours
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// jsonFields lists the JSON member names of the struct t points to, those of embedded
// structs included, in declaration order.
func jsonFields(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
