// Package suppression is the client an ingestion pipeline uses to ask Lethe, before it
// writes a document, a chunk or a session, whether its data subject or session was erased.
//
// Lethe keeps a tenant-scoped suppression list of the keyed pseudonyms of every erased
// subject and session (and of every offboarded tenant). Client.Check sends identifiers in
// the body of POST /v1/suppressions/check (never in the URL); the intake pseudonymises
// them with its key and answers, per identifier in the order given, whether it is
// suppressed and by which erasure (request and receipt ids). Answers never echo an
// identifier. A pipeline that would rather consume can read the compacted topic
// erasure.suppressions (see docs/suppression.md), keyed by tenant and pseudonym, but it then needs
// the pseudonym key to match its own identifiers, which the check keeps inside Lethe.
//
// The package depends on the standard library only. A Client is safe for concurrent use.
package suppression

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Client calls the check endpoint of a Lethe intake.
type Client struct {
	BaseURL string       // the intake, e.g. "https://lethe.internal:8080"
	Token   string       // bearer token scoped to the tenant (never logged)
	HTTP    *http.Client // default: a client with a 10 s timeout
}

// Result is the answer for one identifier.
type Result struct {
	Pseudonym    string     `json:"pseudonym"`
	Suppressed   bool       `json:"suppressed"`
	By           string     `json:"by,omitempty"` // SUBJECT, SESSION or TENANT
	RequestID    string     `json:"request_id,omitempty"`
	ReceiptID    string     `json:"receipt_id,omitempty"`
	SuppressedAt *time.Time `json:"suppressed_at,omitempty"`
	Lifted       bool       `json:"lifted,omitempty"` // erased once, suppression lifted by consent
}

// Answer holds one Result per identifier, in the order of the call's arguments.
type Answer struct {
	TenantID string   `json:"tenant_id"`
	KeyID    string   `json:"key_id"`
	Subjects []Result `json:"subjects"`
	Sessions []Result `json:"sessions"`
}

// AnySuppressed reports whether any identifier of the answer is suppressed: the record
// that carries them must not be written.
func (a *Answer) AnySuppressed() bool {
	for _, r := range append(append([]Result{}, a.Subjects...), a.Sessions...) {
		if r.Suppressed {
			return true
		}
	}
	return false
}

// Error is a refusal of the intake: its HTTP status and reason. RetryAfter is set on 429
// (rate limited): wait that long before asking again.
type Error struct {
	Status     int
	Message    string
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("suppression: check refused: %d %s", e.Status, e.Message)
}

var defaultHTTP = &http.Client{Timeout: 10 * time.Second}

// Check asks which of the subject and session ids of tenant are suppressed. At least one
// identifier is required and at most 1000 in all. A refusal is an *Error; a network
// failure is returned wrapped. When in doubt (an error), do not write.
func (c *Client) Check(ctx context.Context, tenant string, subjectIDs, sessionIDs []string) (*Answer, error) {
	body, err := json.Marshal(map[string]any{"tenant_id": tenant, "subject_ids": nonNil(subjectIDs), "session_ids": nonNil(sessionIDs)})
	if err != nil {
		return nil, fmt.Errorf("suppression: encode: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+"/v1/suppressions/check", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("suppression: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("suppression: check: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("suppression: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		e := &Error{Status: resp.StatusCode}
		var msg struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &msg) == nil {
			e.Message = msg.Error
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		return nil, e
	}
	var a Answer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("suppression: decode answer: %w", err)
	}
	if len(a.Subjects) != len(subjectIDs) || len(a.Sessions) != len(sessionIDs) {
		return nil, errors.New("suppression: the answer does not hold one result per identifier")
	}
	return &a, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
