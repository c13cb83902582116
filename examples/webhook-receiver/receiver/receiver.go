// Package receiver is a reference implementation of the processor side of Lethe's webhook
// erasure contract (docs/webhook-contract.md): an http.Handler that verifies signed erasure
// and verification requests, refuses late timestamps and replayed signatures, erases from a
// Store, and answers 200 with its counts and an attestation id, or 202 with a status URL
// that Lethe polls. It treats the request id as an idempotency key: a request re-sent with
// the same id and body gets the first answer again and is not carried out twice.
package receiver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"
)

// Paths the Handler serves.
const (
	ErasuresPath = "/lethe/erasures"
	StatusPrefix = "/lethe/status/"
)

// DefaultTolerance is how far a request's timestamp may lie from the receiver's clock.
const DefaultTolerance = 5 * time.Minute

// Request is the body of a POST (docs/webhook-contract.md, "Request body").
type Request struct {
	Version   int      `json:"version"`
	RequestID string   `json:"request_id"`
	Action    string   `json:"action"` // "erase" or "verify"
	Store     string   `json:"store"`
	Tenant    string   `json:"tenant"`
	Scope     string   `json:"scope"` // "subject" or "tenant"
	Subject   *Subject `json:"subject,omitempty"`
}

// Subject holds the identifiers Lethe sends for a subject-scoped request.
type Subject struct {
	ID       string   `json:"id,omitempty"`
	Hash     string   `json:"hash,omitempty"`
	Sessions []string `json:"sessions,omitempty"`
}

// Answer is the body of a 200 or 202 answer and of a status poll's answer.
type Answer struct {
	RequestID       string   `json:"request_id"`
	Status          string   `json:"status"` // "completed", "pending" or "failed"
	Deleted         *int64   `json:"deleted,omitempty"`
	Remaining       *int64   `json:"remaining,omitempty"`
	Unexamined      int64    `json:"unexamined"`
	UnexaminedItems []string `json:"unexamined_items,omitempty"`
	AttestationID   string   `json:"attestation_id,omitempty"`
	StatusURL       string   `json:"status_url,omitempty"`
	Error           string   `json:"error,omitempty"`
}

// Handler serves the contract. Set Secrets and Store before use; the other fields have
// defaults. It is safe for concurrent use.
type Handler struct {
	Secrets   [][]byte      // accepted shared secrets (two during a rotation)
	Store     *Store        // the processor's data
	Tolerance time.Duration // accepted clock skew; 0 means DefaultTolerance
	// Async answers every new request 202 with a status URL; the work is carried out once
	// the status was polled PendingPolls times, and the poll that finds it done answers it.
	Async        bool
	PendingPolls int
	Now          func() time.Time // the clock; nil means time.Now

	mu   sync.Mutex
	seen map[string]time.Time // signatures already used, until they expire
	done map[string]*record   // answers by request id (the idempotency cache)
	jobs map[string]*job      // pending work by status token
}

type record struct {
	bodyHash [32]byte
	code     int
	answer   []byte
	busy     bool // being carried out: a concurrent duplicate gets 409
}

type job struct {
	req   Request
	polls int
	final []byte // the completed answer, once carried out
}

const maxBody = 1 << 20

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Handler) tolerance() time.Duration {
	if h.Tolerance > 0 {
		return h.Tolerance
	}
	return DefaultTolerance
}

// ServeHTTP serves POST ErasuresPath and GET StatusPrefix+token.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == ErasuresPath && r.Method == http.MethodPost:
		h.serveRequest(w, r)
	case len(r.URL.Path) > len(StatusPrefix) && r.URL.Path[:len(StatusPrefix)] == StatusPrefix && r.Method == http.MethodGet:
		h.serveStatus(w, r, r.URL.Path[len(StatusPrefix):])
	default:
		fail(w, http.StatusNotFound, "no such endpoint")
	}
}

func (h *Handler) serveRequest(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		fail(w, http.StatusBadRequest, "unreadable body")
		return
	}
	if len(body) > maxBody {
		fail(w, http.StatusRequestEntityTooLarge, "body over 1 MiB")
		return
	}
	if !h.authentic(w, r, body, true) {
		return
	}
	req, err := parseRequest(body)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	if r.Header.Get(HeaderRequestID) != req.RequestID {
		fail(w, http.StatusBadRequest, "Lethe-Request-Id does not match the body's request_id")
		return
	}
	sum := sha256.Sum256(body)
	h.mu.Lock()
	if h.done == nil {
		h.done = map[string]*record{}
	}
	if rec, ok := h.done[req.RequestID]; ok {
		h.mu.Unlock()
		switch {
		case rec.bodyHash != sum:
			fail(w, http.StatusUnprocessableEntity, "request id already used with another body")
		case rec.busy:
			fail(w, http.StatusConflict, "a request with this id is being carried out")
		default:
			reply(w, rec.code, rec.answer)
		}
		return
	}
	rec := &record{bodyHash: sum, busy: true}
	h.done[req.RequestID] = rec
	h.mu.Unlock()

	code, answer := h.accept(req)
	h.mu.Lock()
	rec.code, rec.answer, rec.busy = code, answer, false
	if code >= 500 {
		delete(h.done, req.RequestID) // not carried out: a retry tries again
	}
	h.mu.Unlock()
	reply(w, code, answer)
}

// accept carries req out (200) or queues it (202 with a status URL).
func (h *Handler) accept(req Request) (int, []byte) {
	if !h.Async {
		return h.carryOut(req)
	}
	token := randomHex(16)
	h.mu.Lock()
	if h.jobs == nil {
		h.jobs = map[string]*job{}
	}
	h.jobs[token] = &job{req: req}
	h.mu.Unlock()
	b, _ := json.Marshal(Answer{RequestID: req.RequestID, Status: "pending", StatusURL: StatusPrefix + token})
	return http.StatusAccepted, b
}

// carryOut erases or examines and returns the completed answer.
func (h *Handler) carryOut(req Request) (int, []byte) {
	q := Query{Tenant: req.Tenant, WholeTenant: req.Scope == "tenant"}
	if s := req.Subject; s != nil && !q.WholeTenant {
		q.Subject, q.Hash, q.Sessions = s.ID, s.Hash, s.Sessions
	}
	var o Outcome
	if req.Action == "erase" {
		var err error
		if o, err = h.Store.Erase(q); err != nil {
			b, _ := json.Marshal(Answer{RequestID: req.RequestID, Status: "failed", Error: "store unavailable"})
			return http.StatusServiceUnavailable, b
		}
	} else {
		o = h.Store.Examine(q)
	}
	a := Answer{
		RequestID: req.RequestID, Status: "completed", Remaining: &o.Remaining,
		Unexamined: o.Unexamined, UnexaminedItems: o.UnexaminedItems, AttestationID: "att_" + randomHex(12),
	}
	if req.Action == "erase" {
		a.Deleted = &o.Deleted
	}
	b, _ := json.Marshal(a)
	return http.StatusOK, b
}

func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request, token string) {
	if !h.authentic(w, r, []byte(r.URL.RequestURI()), false) {
		return
	}
	h.mu.Lock()
	j, ok := h.jobs[token]
	if ok && j.req.RequestID != r.Header.Get(HeaderRequestID) {
		ok = false
	}
	if !ok {
		h.mu.Unlock()
		fail(w, http.StatusNotFound, "no such request")
		return
	}
	j.polls++
	ready := j.polls > h.PendingPolls
	if ready && j.final == nil {
		_, j.final = h.carryOut(j.req) // under h.mu: one poll carries the job out
	}
	final := j.final
	h.mu.Unlock()
	if final == nil {
		b, _ := json.Marshal(Answer{RequestID: j.req.RequestID, Status: "pending"})
		reply(w, http.StatusOK, b)
		return
	}
	reply(w, http.StatusOK, final)
}

// authentic checks the signature and the timestamp and, for a POST (replay), that the
// signature was not used before; on failure it answers 401 and returns false.
func (h *Handler) authentic(w http.ResponseWriter, r *http.Request, payload []byte, replay bool) bool {
	now := h.now()
	sig, err := CheckSignature(h.Secrets, r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature), payload, now, h.tolerance())
	if err != nil {
		fail(w, http.StatusUnauthorized, err.Error())
		return false
	}
	if !replay {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = map[string]time.Time{}
	}
	for s, exp := range h.seen {
		if now.After(exp) {
			delete(h.seen, s)
		}
	}
	if _, dup := h.seen[sig]; dup {
		fail(w, http.StatusUnauthorized, "replayed request")
		return false
	}
	// A signature is refused as late once its timestamp leaves the tolerance, so it need
	// be remembered only until then (from now: twice the tolerance covers any skew).
	h.seen[sig] = now.Add(2 * h.tolerance())
	return true
}

// parseRequest decodes and checks a request body.
func parseRequest(body []byte) (Request, error) {
	var req Request
	if !utf8.Valid(body) {
		return req, errors.New("body is not valid UTF-8")
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return req, fmt.Errorf("body is not the request JSON: %w", err)
	}
	switch {
	case req.Version != 1:
		return req, fmt.Errorf("version %d: this receiver speaks version 1", req.Version)
	case req.RequestID == "" || len(req.RequestID) > 128:
		return req, errors.New("request_id must hold 1 to 128 characters")
	case req.Action != "erase" && req.Action != "verify":
		return req, errors.New(`action must be "erase" or "verify"`)
	case req.Tenant == "":
		return req, errors.New("tenant is empty")
	case req.Scope == "tenant":
		return req, nil
	case req.Scope != "subject":
		return req, errors.New(`scope must be "subject" or "tenant"`)
	case req.Subject == nil || req.Subject.ID == "" && req.Subject.Hash == "" && len(req.Subject.Sessions) == 0:
		return req, errors.New("a subject-scoped request names no identifier")
	}
	return req, nil
}

func reply(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body) // the status is sent; a client that went away is no error of ours
}

func fail(w http.ResponseWriter, code int, reason string) {
	b, _ := json.Marshal(Answer{Status: "failed", Error: reason})
	reply(w, code, b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
