package intake_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// FuzzSubmit posts arbitrary bodies to POST /v1/erasures of one intake service (a kfake
// broker, a directory audit store) and checks every answer:
//   - it is one of 202, 400, 413 and 503 — never another 5xx — in JSON;
//   - 413 exactly when the body is over MaxBodyBytes;
//   - a 202 only for a body that decodes strictly to a request whose tenant, subject and
//     session ids pass subject.ValidateTenant and subject.ValidateID, and its subject_hash
//     is the pseudonym of exactly the decoded identifiers; a request is recorded for each
//     202 and for nothing else;
//   - a body of valid UTF-8 without \u escapes that is a valid request is accepted (202, or
//     503);
//   - no answer holds a subject or session id of the body (see echoes).
func FuzzSubmit(f *testing.F) {
	svc, store := fuzzService(f)
	h := svc.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		puts := store.puts.Load()
		rec := httptest.NewRecorder()
		post := httptest.NewRequest(http.MethodPost, "/v1/erasures", bytes.NewReader(body))
		post.Host = "127.0.0.1:8080"
		post.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, post)
		code, resp := rec.Code, rec.Body.Bytes()

		switch code {
		case http.StatusAccepted, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable:
		default:
			t.Fatalf("status %d for body %q: %s", code, body, resp)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("content type %q", ct)
		}
		var answer map[string]any
		if err := json.Unmarshal(resp, &answer); err != nil {
			t.Fatalf("answer %q is not a JSON object: %v", resp, err)
		}
		if tooBig := len(body) > intake.MaxBodyBytes; tooBig != (code == http.StatusRequestEntityTooLarge) {
			t.Errorf("status %d for a body of %d bytes", code, len(body))
		}
		if id := echoes(body, answer); id != "" {
			t.Errorf("answer %s echoes the identifier %q", resp, id)
		}

		req, strictErr := decodeStrict(body)
		wantPuts := puts
		if code == http.StatusAccepted {
			wantPuts++
			checkAccepted(t, svc.Key, body, req, strictErr, answer)
		} else if code != http.StatusServiceUnavailable && strictErr == nil && utf8.Valid(body) && !bytes.Contains(body, []byte(`\u`)) {
			in := intakeRequest(req)
			if err := svc.Validate(&in); err == nil {
				t.Errorf("valid request %q answered %d: %s", body, code, resp)
			}
		}
		if got := store.puts.Load(); got != wantPuts {
			t.Errorf("status %d recorded %d requests", code, got-puts)
		}
	})
}

var requestIDPattern = regexp.MustCompile(`^er_[0-9a-f]{32}$`)

// checkAccepted checks a 202 answer against the body, decoded independently of the handler.
func checkAccepted(t *testing.T, key subject.Key, body []byte, req intake.SubmitRequest, strictErr error, answer map[string]any) {
	t.Helper()
	if len(body) > intake.MaxBodyBytes || !utf8.Valid(body) || strictErr != nil {
		t.Fatalf("accepted body %q that does not decode strictly (%v)", body, strictErr)
	}
	if err := subject.ValidateTenant(req.TenantID); err != nil {
		t.Errorf("accepted tenant %q: %v", req.TenantID, err)
	}
	subj := req.SubjectID
	if req.Scope == event.ScopeTenant {
		if subj != "" || len(req.SessionIDs) > 0 {
			t.Errorf("accepted a TENANT request with identifiers: %q", body)
		}
	} else if err := subject.ValidateID("subject_id", subj); err != nil {
		t.Errorf("accepted subject %q: %v", subj, err)
	}
	for _, s := range req.SessionIDs {
		if err := subject.ValidateID("session_ids[]", s); err != nil {
			t.Errorf("accepted session %q: %v", s, err)
		}
	}
	id, _ := answer["request_id"].(string)
	if !requestIDPattern.MatchString(id) || answer["status_url"] != "/v1/erasures/"+id ||
		answer["receipt_url"] != "/v1/erasures/"+id+"/receipt" || answer["key_id"] != key.ID() || len(answer) != 6 {
		t.Errorf("accepted answer %v", answer)
	}
	if want := key.Pseudonym(req.TenantID, subj); answer["subject_hash"] != want {
		t.Errorf("subject_hash %v, want the pseudonym of %q in %q", answer["subject_hash"], subj, req.TenantID)
	}
}

// decodeStrict decodes body as the API defines it: one JSON object with only the fields of
// SubmitRequest.
func decodeStrict(body []byte) (intake.SubmitRequest, error) {
	var req intake.SubmitRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, errors.New("more than one JSON value")
	}
	return req, nil
}

func intakeRequest(r intake.SubmitRequest) event.IntakeRequest {
	return event.IntakeRequest{TenantID: r.TenantID, SubjectID: r.SubjectID, SessionIDs: r.SessionIDs,
		Regulation: r.Regulation, Scope: r.Scope, Source: "http"}
}

// unknownField is the one place an answer repeats input: the name (a key, not a value) of
// a field the API does not know.
var unknownField = regexp.MustCompile(`unknown field ".*"; the fields are [a-z_, ]+$`)

// echoes returns a subject or session id of body that one of the answer's strings holds,
// or "". It checks the identifiers that an answer could not hold by chance: those of at
// least three bytes with a character that no answer text uses (anything but ASCII letters,
// digits, space and "'(),-./:[]_). Other identifiers could match fixed wording ("must be")
// and are covered by the shape checks of the 202 answer instead.
func echoes(body []byte, answer map[string]any) string {
	var loose struct {
		SubjectID  any `json:"subject_id"`
		SessionIDs any `json:"session_ids"`
	}
	_ = json.Unmarshal(body, &loose) // fields decoded before a type error still count
	var ids []string
	collect(loose.SubjectID, &ids)
	collect(loose.SessionIDs, &ids)
	var texts []string
	collect(answer, &texts)
	for _, id := range ids {
		if len(id) < 3 || !strings.ContainsFunc(id, distinctive) {
			continue
		}
		for _, s := range texts {
			if strings.Contains(unknownField.ReplaceAllString(s, ""), id) {
				return id
			}
		}
	}
	return ""
}

func distinctive(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune(` "'(),-./:[]_`, r)
}

// collect appends every string in v (a decoded JSON value) to out.
func collect(v any, out *[]string) {
	switch v := v.(type) {
	case string:
		*out = append(*out, v)
	case []any:
		for _, e := range v {
			collect(e, out)
		}
	case map[string]any:
		for _, e := range v {
			collect(e, out)
		}
	}
}

// fuzzService is the intake of FuzzSubmit, shared by all its iterations.
func fuzzService(f *testing.F) (*intake.Service, *countingStore) {
	cl := testenv.Producer(f, testenv.Kafka(f, 1, event.TopicRequested), kgo.RecordDeliveryTimeout(5*time.Second))
	dir, err := auditlog.OpenDir(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	key, err := subject.NewKey("k1", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		f.Fatal(err)
	}
	store := &countingStore{Table: dir}
	wf, err := workflow.OpenFile("") // in memory: TENANT scope needs a workflow store
	if err != nil {
		f.Fatal(err)
	}
	return &intake.Service{
		Key: key, Inventory: inventory.Reference(), Producer: cl, Store: store,
		Policy: intake.DefaultPolicy(), Now: func() time.Time { return start }, Workflow: wf,
	}, store
}
