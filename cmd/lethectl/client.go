package main

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

// maxAnswerBytes bounds an answer read from the server.
const maxAnswerBytes = 8 << 20

// client calls the intake HTTP API. It is safe for concurrent use.
type client struct {
	base  string // scheme://host[:port][/prefix], without a trailing slash
	token string
	http  *http.Client
}

// apiClient returns a client for --server and --token.
func (c *cli) apiClient() (*client, error) {
	base := strings.TrimRight(c.env(c.g.server, "LETHE_SERVER", defaultServer), "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErrorf("--server %q is not an http:// or https:// URL", base)
	}
	return &client{base: base, token: c.env(c.g.token, "LETHE_TOKEN", ""), http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// apiError is an answer other than the expected 2xx. Message is the server's "error" text,
// which never holds an identifier.
type apiError struct {
	Method, Path string
	Status       int
	Message      string
	RetryAfter   string
	tokenSet     bool
}

func (e *apiError) Error() string {
	switch e.Status {
	case http.StatusUnauthorized:
		if !e.tokenSet {
			return "the server requires a bearer token: pass --token or set LETHE_TOKEN (401 unauthenticated)"
		}
		return "the server refused the bearer token from --token or LETHE_TOKEN (401 unauthenticated: unknown, expired or malformed)"
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

func (e *apiError) exitCode() int {
	switch e.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return exitUsage
	case http.StatusNotFound:
		return exitNotFound
	}
	return exitError
}

// isNotFound reports whether err is a 404 answer.
func isNotFound(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// do sends a request with in as JSON body (nil: none) and decodes a 2xx answer into out.
func (cl *client) do(ctx context.Context, method, path string, q url.Values, hdr http.Header, in, out any) error {
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
	req.Header.Set("User-Agent", "lethectl")
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
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		ae := &apiError{Method: method, Path: path, Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"), tokenSet: cl.token != ""}
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

// submit posts a request; key is the Idempotency-Key ("" for none).
func (cl *client) submit(ctx context.Context, r intake.SubmitRequest, key string) (intake.Accepted, error) {
	hdr := http.Header{}
	if key != "" {
		hdr.Set("Idempotency-Key", key)
	}
	var acc intake.Accepted
	err := cl.do(ctx, http.MethodPost, "/v1/erasures", nil, hdr, r, &acc)
	return acc, err
}

func (cl *client) status(ctx context.Context, id string) (intake.Status, error) {
	var st intake.Status
	err := cl.do(ctx, http.MethodGet, requestPath(id), nil, nil, nil, &st)
	return st, err
}

func (cl *client) receipt(ctx context.Context, id string) (event.Receipt, error) {
	var rc event.Receipt
	err := cl.do(ctx, http.MethodGet, requestPath(id)+"/receipt", nil, nil, nil, &rc)
	return rc, err
}

// addenda returns the addenda of a request's receipt, oldest first.
func (cl *client) addenda(ctx context.Context, id string) ([]auditlog.Addendum, error) {
	var out struct {
		Addenda []auditlog.Addendum `json:"addenda"`
	}
	err := cl.do(ctx, http.MethodGet, requestPath(id)+"/addenda", nil, nil, nil, &out)
	return out.Addenda, err
}

func (cl *client) list(ctx context.Context, f intake.ListFilter) ([]intake.Status, error) {
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
	err := cl.do(ctx, http.MethodGet, "/v1/erasures", q, nil, nil, &out)
	return out.Requests, err
}

// retried is the answer of POST /v1/erasures/{id}/retry.
type retried struct {
	RequestID string   `json:"request_id"`
	Attempt   int      `json:"attempt"`
	Stores    []string `json:"stores"`
	StatusURL string   `json:"status_url"`
}

func (cl *client) retry(ctx context.Context, id string, r intake.RetryRequest) (retried, error) {
	var out retried
	err := cl.do(ctx, http.MethodPost, requestPath(id)+"/retry", nil, nil, r, &out)
	return out, err
}
