// Package webhookstore erases data subjects held by processors and vendors (an embedding
// provider, a tracing service, a hosted vector database) that erase on Lethe's signed
// request: inventory stores of kind "webhook".
//
// For Erase it POSTs an "erase" request and for Verify a "verify" request to the store's
// URL, signed with HMAC-SHA-256 over the timestamp and the body under the store's shared
// secret (docs/webhook-contract.md). The processor answers 200 with its counts and an
// attestation id, or 202 with a status URL on the same origin, which Store polls with
// backoff until the store's deadline. Verification is the processor's own read-back:
// Method "processor attestation", Remaining the processor's remaining count (a required
// field), Unexamined what it could not examine, Attestation its attestation id, which the
// receipt records.
//
// Each Erase or Verify call mints one request id and re-sends under it on transient
// failures; processors must treat the id as an idempotency key (a re-sent request gets the
// first answer and is not carried out twice), so a lost answer does not lose or double the
// count. Errors are classified here: connection failures, timeouts, 5xx, 409 and 429 are
// transient; other 4xx, redirects, an answer that breaks the contract and a processor that
// reports the request failed are permanent. A verify answer that breaks the contract is no
// error: the store is reported unexamined. Identifiers travel only in the body, never in a
// URL, a header or an error.
//
// One processor may hold the data of every tenant: scoping to the tenant is the
// processor's. Every request names the tenant and the scope in the signed body, and the
// processor matches the tenant exactly on every item it erases, counts or verifies, for a
// subject and for a whole tenant.
package webhookstore

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Method is the verification method of a webhook store.
const Method = "processor attestation"

// Header names of a signed request.
const (
	HeaderTimestamp = "Lethe-Timestamp"
	HeaderSignature = "Lethe-Signature"
	HeaderRequestID = "Lethe-Request-Id"
)

// Store is the deletion.Store of kind "webhook". It is safe for concurrent use.
type Store struct {
	client *http.Client
	now    func() time.Time
	newID  func() string
}

var _ deletion.Store = (*Store)(nil)

// New returns a Store sending with a copy of client (nil: a client trusting the system
// roots) that never follows redirects: a signed request goes only where the inventory says.
func New(client *http.Client) *Store {
	c := &http.Client{}
	if client != nil {
		*c = *client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Store{client: c, now: time.Now, newID: newRequestID}
}

// Sign returns the Lethe-Signature value for a request sent at timestamp (Unix seconds)
// with payload (a POST's body, a GET's request target): "v1=" and the hex of
// HMAC-SHA-256(secret, decimal timestamp + "." + payload).
func Sign(secret []byte, timestamp int64, payload []byte) string {
	mac := hmac.New(sha256.New, secret)
	_, _ = fmt.Fprintf(mac, "%d.", timestamp) // a hash.Hash never fails to write
	_, _ = mac.Write(payload)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

// request is the body of a POST.
type request struct {
	Version   int          `json:"version"`
	RequestID string       `json:"request_id"`
	Action    string       `json:"action"`
	Store     string       `json:"store"`
	Tenant    string       `json:"tenant"`
	Scope     string       `json:"scope"`
	Subject   *subjectBody `json:"subject,omitempty"`
}

type subjectBody struct {
	ID       string   `json:"id,omitempty"`
	Hash     string   `json:"hash,omitempty"`
	Sessions []string `json:"sessions,omitempty"`
}

// answer is a processor's answer; pointers tell a missing field from zero.
type answer struct {
	RequestID       string   `json:"request_id"`
	Status          string   `json:"status"`
	Deleted         *int64   `json:"deleted"`
	Remaining       *int64   `json:"remaining"`
	Unexamined      *int64   `json:"unexamined"`
	UnexaminedItems []string `json:"unexamined_items"`
	AttestationID   string   `json:"attestation_id"`
	StatusURL       string   `json:"status_url"`
	Error           string   `json:"error"`
}

// Erase asks the processor to erase s and returns its count at the store's URL.
func (s *Store) Erase(ctx context.Context, st inventory.Entry, subj deletion.Subject) (deletion.Result, error) {
	l, a, err := s.call(ctx, st, subj, "erase")
	if err != nil {
		return deletion.Result{}, err
	}
	if a.Deleted == nil || *a.Deleted < 0 {
		return deletion.Result{}, retry.Permanent(fmt.Errorf("webhook: store %q: erase answer without a valid deleted count", st.Name))
	}
	return deletion.Result{Locations: []event.LocationCount{{Location: location(l.URL), Deleted: *a.Deleted}}}, nil
}

// Verify asks the processor to read s back and returns its attestation.
func (s *Store) Verify(ctx context.Context, st inventory.Entry, subj deletion.Subject) (event.Verification, error) {
	_, a, err := s.call(ctx, st, subj, "verify")
	var bad *badAnswer
	if errors.As(err, &bad) {
		return event.Verification{Method: Method, Unexamined: 1, UnexaminedItems: []string{st.Name + ": " + bad.reason}}, nil
	}
	if err != nil {
		return event.Verification{}, err
	}
	v := event.Verification{Method: Method, Remaining: *a.Remaining, Attestation: a.AttestationID}
	if a.Unexamined != nil {
		v.Unexamined = *a.Unexamined
	}
	for _, it := range a.UnexaminedItems {
		v.UnexaminedItems = append(v.UnexaminedItems, st.Name+": "+redact(it, subj))
	}
	if v.Unexamined > 0 && len(v.UnexaminedItems) == 0 {
		v.UnexaminedItems = []string{fmt.Sprintf("%s: %d items the processor could not examine", st.Name, v.Unexamined)}
	}
	return v, nil
}

// badAnswer is a 2xx answer that breaks the contract; it is permanent.
type badAnswer struct{ reason string }

func (b *badAnswer) Error() string   { return "webhook: " + b.reason }
func (b *badAnswer) Permanent() bool { return true }

// call sends one request (re-sending it under the same id on transient failures), follows a
// 202 to its completed answer, and checks that answer.
func (s *Store) call(ctx context.Context, st inventory.Entry, subj deletion.Subject, action string) (Locators, answer, error) {
	l, err := LocatorsOf(st)
	if err != nil {
		return l, answer{}, err
	}
	body, id, err := s.body(st, l, subj, action)
	if err != nil {
		return l, answer{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, l.Deadline)
	defer cancel()
	var a answer
	var code int
	var last int64 // the timestamp of the last send: a re-send waits for a later second
	backoff := retry.Backoff{Base: l.PollInterval, Max: l.PollMaxInterval}
	for try := 1; ; try++ {
		code, a, err = s.send(ctx, st, l, http.MethodPost, l.URL, id, body, &last)
		if err == nil || retry.IsPermanent(err) || try >= l.Attempts {
			break
		}
		if werr := wait(ctx, backoff.Delay(try), err); werr != nil {
			return l, answer{}, werr
		}
	}
	if err == nil && code == http.StatusAccepted {
		a, err = s.poll(ctx, st, l, id, a)
	}
	if err != nil {
		// A processor's reason may echo what it was sent: keep identifiers out of reports.
		var se *statusError
		if errors.As(err, &se) {
			se.reason = redact(se.reason, subj)
		}
		return l, answer{}, err
	}
	a.Error = redact(a.Error, subj)
	if err := check(a, id); err != nil {
		return l, answer{}, &badAnswer{reason: fmt.Sprintf("store %q: %s", st.Name, err)}
	}
	return l, a, nil
}

// body builds the signed request body.
func (s *Store) body(st inventory.Entry, l Locators, subj deletion.Subject, action string) ([]byte, string, error) {
	req := request{Version: 1, RequestID: s.newID(), Action: action, Store: st.Name, Tenant: subj.Tenant, Scope: "subject"}
	if subj.TenantScope() {
		req.Scope = "tenant"
	} else {
		sb := &subjectBody{}
		if slices.Contains(l.Identifiers, IdentSubject) {
			sb.ID = subj.ID
		}
		if slices.Contains(l.Identifiers, IdentSubjectHash) {
			sb.Hash = subj.Hash
		}
		if slices.Contains(l.Identifiers, IdentSessions) {
			sb.Sessions = slices.DeleteFunc(slices.Clone(subj.Sessions), func(s string) bool { return s == "" })
		}
		if sb.ID == "" && sb.Hash == "" && len(sb.Sessions) == 0 {
			return nil, "", retry.Permanent(fmt.Errorf("webhook: store %q: the subject has none of the identifiers the store receives (%s)", st.Name, strings.Join(l.Identifiers, ", ")))
		}
		req.Subject = sb
	}
	// JSON would turn invalid UTF-8 into U+FFFD, so two different identifiers could reach
	// the processor as one: refuse them instead.
	for _, v := range append([]string{subj.Tenant, subj.ID, subj.Hash}, subj.Sessions...) {
		if !utf8.ValidString(v) {
			return nil, "", retry.Permanent(fmt.Errorf("webhook: store %q: an identifier is not valid UTF-8", st.Name))
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, "", retry.Permanent(fmt.Errorf("webhook: encode request: %w", err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), req.RequestID, nil
}

// maxAnswer bounds the answer read from a processor.
const maxAnswer = 1 << 20

// send signs and sends one request and classifies the outcome; it returns the status code
// (200 or 202) of a successful exchange and the decoded answer. For a POST, last holds the
// timestamp of the previous send of the same body (nil for a GET, which is not replay-checked).
func (s *Store) send(ctx context.Context, st inventory.Entry, l Locators, method, target, id string, body []byte, last *int64) (int, answer, error) {
	secret, err := l.secret(st.Name)
	if err != nil {
		return 0, answer{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return 0, answer{}, retry.Permanent(fmt.Errorf("webhook: store %q: %w", st.Name, err))
	}
	ts := s.now().Unix()
	if last != nil && ts <= *last {
		// Same timestamp and body would give the same signature, which the processor
		// refuses as a replay: wait for the next second.
		if err := wait(ctx, time.Until(time.Unix(*last+1, 0)), nil); err != nil {
			return 0, answer{}, err
		}
		ts = max(s.now().Unix(), *last+1)
	}
	if last != nil {
		*last = ts
	}
	payload := body
	if method == http.MethodGet {
		payload = []byte(req.URL.RequestURI())
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(secret, ts, payload))
	req.Header.Set(HeaderRequestID, id)
	req.Header.Set("User-Agent", "lethe-webhook/1")
	resp, err := s.client.Do(req)
	if err != nil {
		// Down, refused, reset, timed out, TLS: transient. The error names the URL, which
		// holds no identifier.
		return 0, answer{}, fmt.Errorf("webhook: store %q: %s %s: %w", st.Name, method, location(target), ctxOr(ctx, err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return 0, answer{}, fmt.Errorf("webhook: store %q: read answer: %w", st.Name, err)
	}
	var a answer
	decodeErr := json.Unmarshal(raw, &a)
	if len(raw) > maxAnswer {
		decodeErr = errors.New("answer over 1 MiB")
	}
	switch code := resp.StatusCode; {
	case code == http.StatusOK || code == http.StatusAccepted:
		if decodeErr != nil {
			return 0, answer{}, &badAnswer{reason: fmt.Sprintf("store %q: answer %d is not the contract's JSON: %v", st.Name, code, decodeErr)}
		}
		return code, a, nil
	case code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500:
		return 0, answer{}, &statusError{store: st.Name, code: code, reason: a.Error, retryAfter: retryAfter(resp.Header)}
	default:
		return 0, answer{}, retry.Permanent(&statusError{store: st.Name, code: code, reason: a.Error})
	}
}

// statusError is an HTTP answer other than 200 and 202; transient unless marked permanent.
type statusError struct {
	store      string
	code       int
	reason     string
	retryAfter time.Duration
}

func (e *statusError) Error() string {
	msg := fmt.Sprintf("webhook: store %q: processor answered %d", e.store, e.code)
	if e.reason != "" {
		msg += ": " + clip(e.reason)
	}
	return msg
}

// poll follows a 202 answer: GET its status URL with backoff until the answer is no longer
// pending or ctx (bounded by the store's deadline) ends.
func (s *Store) poll(ctx context.Context, st inventory.Entry, l Locators, id string, a answer) (answer, error) {
	target, err := statusURL(l.URL, a.StatusURL)
	if err != nil {
		return answer{}, &badAnswer{reason: fmt.Sprintf("store %q: 202 answer: %s", st.Name, err)}
	}
	backoff := retry.Backoff{Base: l.PollInterval, Max: l.PollMaxInterval}
	var hint time.Duration
	for n := 1; ; n++ {
		if err := wait(ctx, max(backoff.Delay(n), min(hint, l.PollMaxInterval)), nil); err != nil {
			return answer{}, fmt.Errorf("webhook: store %q: still pending after polling %d times: %w", st.Name, n-1, err)
		}
		code, got, err := s.send(ctx, st, l, http.MethodGet, target, id, nil, nil)
		var se *statusError
		switch {
		case errors.As(err, &se) && !retry.IsPermanent(err):
			hint = se.retryAfter
			continue
		case err != nil && !retry.IsPermanent(err) && ctx.Err() == nil:
			continue // a poll lost to the network: poll again
		case err != nil:
			return answer{}, err
		case code != http.StatusOK:
			return answer{}, &badAnswer{reason: fmt.Sprintf("store %q: status poll answered %d", st.Name, code)}
		case got.Status == "pending":
			continue
		}
		return got, nil
	}
}

// check holds a completed answer to the contract.
func check(a answer, id string) error {
	switch {
	case a.RequestID != id:
		return errors.New("answer names another request id")
	case a.Status == "failed":
		return fmt.Errorf("processor reports the request failed: %s", clip(a.Error))
	case a.Status != "completed":
		return fmt.Errorf("answer status %q, want completed", clip(a.Status))
	case a.Remaining == nil:
		return errors.New("answer without the remaining count")
	case *a.Remaining < 0:
		return errors.New("answer with a negative remaining count")
	case a.Unexamined != nil && *a.Unexamined < 0:
		return errors.New("answer with a negative unexamined count")
	case a.AttestationID == "" || len(a.AttestationID) > 200 || !printable(a.AttestationID):
		return errors.New("answer without a valid attestation_id (1 to 200 printable ASCII characters)")
	}
	return nil
}

// statusURL resolves a status URL against the endpoint and keeps it on the endpoint's origin:
// the signed poll must not go to another host.
func statusURL(endpoint, status string) (string, error) {
	if status == "" {
		return "", errors.New("no status_url")
	}
	base, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	ref, err := url.Parse(status)
	if err != nil {
		return "", errors.New("status_url does not parse")
	}
	u := base.ResolveReference(ref)
	if u.Scheme != base.Scheme || u.Host != base.Host || u.User != nil {
		return "", errors.New("status_url leaves the endpoint's origin")
	}
	u.Fragment = ""
	return u.String(), nil
}

// location is a URL as reports name it: scheme, host and path.
func location(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "webhook"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

// retryAfter reads a Retry-After header in seconds (0 when absent or a date).
func retryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// wait sleeps d or until ctx ends; cause, when set, is wrapped in the context's error so a
// deadline reports what was being retried.
func wait(ctx context.Context, d time.Duration, cause error) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		if cause != nil {
			return fmt.Errorf("%w (last: %w)", ctx.Err(), cause)
		}
		return ctx.Err()
	}
}

func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return err
}

// redact replaces processor-supplied text (an item name, a reason) that holds one of s's
// identifiers.
func redact(text string, s deletion.Subject) string {
	for _, id := range append([]string{s.ID, s.Hash}, s.Sessions...) {
		if id != "" && strings.Contains(text, id) {
			return "(processor text holding an identifier, redacted)"
		}
	}
	return clip(text)
}

// clip bounds processor-supplied text in reports and errors.
func clip(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func newRequestID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "lethe-" + hex.EncodeToString(b)
}
