// Package apiclient calls Lethe's intake HTTP API (docs/http-api.md): submit an erasure,
// read its status, receipt and addenda, list requests and re-drive one. A Client is safe
// for concurrent use; answers other than 2xx are *APIError, whose Message is the server's
// reason (it never holds an identifier).
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
)

// MaxAnswerBytes bounds an answer read from the server.
const MaxAnswerBytes = 8 << 20

// Client calls the intake HTTP API. It is safe for concurrent use.
type Client struct {
	base  string // scheme://host[:port][/prefix], without a trailing slash
	token string
	http  *http.Client
	agent string
}

// New returns a client of the API at base (http:// or https://, with an optional path
// prefix) sending token as a bearer token ("" for none) and agent as its User-Agent.
func New(base, token, agent string, timeout time.Duration) (*Client, error) {
	base = strings.TrimRight(base, "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http:// or https:// URL", base)
	}
	return &Client{base: base, token: token, http: &http.Client{Timeout: timeout}, agent: agent}, nil
}

// APIError is an answer other than the expected 2xx. Message is the server's "error" text,
// which never holds an identifier; TokenSet says whether the request carried a token.
type APIError struct {
	Method, Path string
	Status       int
	Message      string
	RetryAfter   string
	TokenSet     bool
}

func (e *APIError) Error() string {
	switch e.Status {
	case http.StatusUnauthorized:
		if !e.TokenSet {
			return "the server requires a bearer token (401 unauthenticated)"
		}
		return "the server refused the bearer token (401 unauthenticated: unknown, expired or malformed)"
	case http.StatusForbidden:
		if e.Message != "" {
			return "forbidden (403): " + strings.TrimPrefix(e.Message, "forbidden: ")
		}
		return "forbidden (403): the token may not act for this tenant"
	case http.StatusTooManyRequests:
		return fmt.Sprintf("rate limited (429): retry after %ss", e.RetryAfter)
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Message)
}

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// Do sends a request with in as JSON body (nil: none) and decodes a 2xx answer into out.
func (cl *Client) Do(ctx context.Context, method, path string, q url.Values, hdr http.Header, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	target := cl.base + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", cl.agent)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cl.token != "" {
		req.Header.Set("Authorization", "Bearer "+cl.token)
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("cannot reach the Lethe server at %s: %w", cl.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		ae := &APIError{Method: method, Path: path, Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"), TokenSet: cl.token != ""}
		var msg struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &msg) == nil && msg.Error != "" {
			ae.Message = msg.Error
		} else {
			ae.Message = strings.TrimSpace(string(raw[:min(len(raw), 200)]))
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the expected JSON: %w", method, path, err)
	}
	return nil
}

func requestPath(id string) string { return "/v1/erasures/" + url.PathEscape(id) }

// Submit posts a request; key is the Idempotency-Key ("" for none).
func (cl *Client) Submit(ctx context.Context, r intake.SubmitRequest, key string) (intake.Accepted, error) {
	hdr := http.Header{}
	if key != "" {
		hdr.Set("Idempotency-Key", key)
	}
	var acc intake.Accepted
	err := cl.Do(ctx, http.MethodPost, "/v1/erasures", nil, hdr, r, &acc)
	return acc, err
}

// Act posts the workflow verb (confirm, cancel, approve or reject) for a request and
// returns its status.
func (cl *Client) Act(ctx context.Context, id, verb string) (intake.Status, error) {
	var st intake.Status
	err := cl.Do(ctx, http.MethodPost, requestPath(id)+"/"+url.PathEscape(verb), nil, nil, nil, &st)
	return st, err
}

// Review posts a decision on an item of a request's receipt's review list.
func (cl *Client) Review(ctx context.Context, id string, r intake.ReviewRequest) (intake.ReviewResponse, error) {
	var out intake.ReviewResponse
	err := cl.Do(ctx, http.MethodPost, requestPath(id)+"/review", nil, nil, r, &out)
	return out, err
}

// Status returns a request's status.
func (cl *Client) Status(ctx context.Context, id string) (intake.Status, error) {
	var st intake.Status
	err := cl.Do(ctx, http.MethodGet, requestPath(id), nil, nil, nil, &st)
	return st, err
}

// Receipt returns a request's receipt.
func (cl *Client) Receipt(ctx context.Context, id string) (event.Receipt, error) {
	var rc event.Receipt
	err := cl.Do(ctx, http.MethodGet, requestPath(id)+"/receipt", nil, nil, nil, &rc)
	return rc, err
}

// Addenda returns the addenda of a request's receipt, oldest first.
func (cl *Client) Addenda(ctx context.Context, id string) ([]auditlog.Addendum, error) {
	var out struct {
		Addenda []auditlog.Addendum `json:"addenda"`
	}
	err := cl.Do(ctx, http.MethodGet, requestPath(id)+"/addenda", nil, nil, nil, &out)
	return out.Addenda, err
}

// List returns the requests f selects.
func (cl *Client) List(ctx context.Context, f intake.ListFilter) ([]intake.Status, error) {
	q := url.Values{}
	if f.Tenant != "" {
		q.Set("tenant", f.Tenant)
	}
	if f.State != "" {
		q.Set("state", f.State)
	}
	if f.Overdue {
		q.Set("overdue", "true")
	}
	if f.Limit > 0 {
		q.Set("limit", fmt.Sprint(f.Limit))
	}
	var out struct {
		Requests []intake.Status `json:"requests"`
	}
	err := cl.Do(ctx, http.MethodGet, "/v1/erasures", q, nil, nil, &out)
	return out.Requests, err
}

// ByKey returns the request tenant submitted with the idempotency key, or the refusal of
// an erasure.intake record with that key (state REJECTED); an error satisfying IsNotFound
// when there is neither.
func (cl *Client) ByKey(ctx context.Context, tenant, key string) (intake.Status, error) {
	var out struct {
		Requests []intake.Status `json:"requests"`
	}
	q := url.Values{"tenant": {tenant}, "idempotency_key": {key}}
	if err := cl.Do(ctx, http.MethodGet, "/v1/erasures", q, nil, nil, &out); err != nil {
		return intake.Status{}, err
	}
	if len(out.Requests) == 0 {
		return intake.Status{}, &APIError{Method: http.MethodGet, Path: "/v1/erasures", Status: http.StatusNotFound,
			Message: "no request of tenant " + tenant + " has that idempotency key"}
	}
	return out.Requests[0], nil
}

// Retried is the answer of POST /v1/erasures/{id}/retry.
type Retried struct {
	RequestID string   `json:"request_id"`
	Attempt   int      `json:"attempt"`
	Stores    []string `json:"stores"`
	StatusURL string   `json:"status_url"`
}

// Retry re-drives a request.
func (cl *Client) Retry(ctx context.Context, id string, r intake.RetryRequest) (Retried, error) {
	var out Retried
	err := cl.Do(ctx, http.MethodPost, requestPath(id)+"/retry", nil, nil, r, &out)
	return out, err
}
