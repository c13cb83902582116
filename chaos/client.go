package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/lethe-erasure/lethe/pkg/intake"
)

// errRejected marks a submission refused with a 4xx answer: retrying cannot help.
var errRejected = errors.New("rejected")

// httpClient keeps an idle connection for each of the harness's concurrent submitters (16
// in a scaling burst): with net/http's default of 2, most submissions opened a connection.
var httpClient = &http.Client{Timeout: 10 * time.Second, Transport: func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 32
	return t
}()}

// Submit posts the erasure of sub with the Idempotency-Key key until the intake answers
// 202, retrying connection errors and 5xx answers with the same key every 50–250 ms until
// ctx ends. It returns the request id and the number of tries.
func (s *System) Submit(ctx context.Context, sub *Subject, key string) (string, int, error) {
	body, _ := json.Marshal(intake.SubmitRequest{TenantID: sub.Tenant, SubjectID: sub.ID, SessionIDs: sub.Sessions, Regulation: "GDPR"})
	for try := 1; ; try++ {
		var acc intake.Accepted
		code, err := s.call(ctx, http.MethodPost, "/v1/erasures", key, body, &acc)
		switch {
		case err == nil && code == http.StatusAccepted:
			return acc.RequestID, try, nil
		case err == nil && code < 500 && code != http.StatusTooManyRequests:
			return "", try, fmt.Errorf("submit: %w: status %d", errRejected, code)
		}
		select {
		case <-ctx.Done():
			return "", try, fmt.Errorf("submit: not acknowledged after %d tries: %w", try, ctx.Err())
		case <-time.After(time.Duration(50+try%5*50) * time.Millisecond):
		}
	}
}

// Status returns the intake's status of a request.
func (s *System) Status(ctx context.Context, id string) (intake.Status, error) {
	var st intake.Status
	code, err := s.call(ctx, http.MethodGet, "/v1/erasures/"+id, "", nil, &st)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status: %d", code)
	}
	return st, err
}

// Retry re-drives a request over POST /v1/erasures/{id}/retry for the named stores (none:
// every store), supplying the subject's identifiers again.
func (s *System) Retry(ctx context.Context, id string, sub *Subject, stores []string) error {
	body, _ := json.Marshal(intake.RetryRequest{SubjectID: sub.ID, SessionIDs: sub.Sessions, Stores: stores})
	code, err := s.call(ctx, http.MethodPost, "/v1/erasures/"+id+"/retry", "", body, nil)
	if err == nil && code != http.StatusAccepted {
		err = fmt.Errorf("retry: status %d", code)
	}
	return err
}

func (s *System) call(ctx context.Context, method, path, key string, body []byte, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.IntakeURL+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if v != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, v); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", path, err)
		}
	}
	return resp.StatusCode, nil
}
