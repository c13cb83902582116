package receiver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

var secret = []byte("receiver-test-secret-0123456789abcdef")

type fixture struct {
	h   *Handler
	now time.Time
}

func newFixture(async bool) *fixture {
	f := &fixture{now: time.Unix(1796115600, 0)}
	f.h = &Handler{Secrets: [][]byte{secret}, Store: NewStore(), Async: async, Now: func() time.Time { return f.now }}
	return f
}

// post sends body signed at ts under id.
func (f *fixture) post(t *testing.T, body string, ts time.Time, id string) (int, Answer) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, ErasuresPath, strings.NewReader(body))
	stamp := strconv.FormatInt(ts.Unix(), 10)
	r.Header.Set(HeaderTimestamp, stamp)
	r.Header.Set(HeaderSignature, Sign(secret, stamp, []byte(body)))
	r.Header.Set(HeaderRequestID, id)
	return f.serve(t, r)
}

func (f *fixture) serve(t *testing.T, r *http.Request) (int, Answer) {
	t.Helper()
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	var a Answer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatalf("answer %d %q: %v", w.Code, w.Body, err)
	}
	return w.Code, a
}

func eraseBody(id, subject string) string {
	b, _ := json.Marshal(Request{Version: 1, RequestID: id, Action: "erase", Store: "v", Tenant: "acme", Scope: "subject", Subject: &Subject{ID: subject}})
	return string(b)
}

func TestSignedRequestErasesOnlyTheSubject(t *testing.T) {
	f := newFixture(false)
	for _, id := range []string{"a", "ab", "A", "a%", "zoe\u0301", "zo\u00e9"} {
		f.h.Store.Put(Item{Tenant: "acme", Subject: id})
	}
	f.h.Store.Put(Item{Tenant: "globex", Subject: "a"})
	code, a := f.post(t, eraseBody("r1", "a"), f.now, "r1")
	if code != 200 || a.Deleted == nil || *a.Deleted != 1 || a.Remaining == nil || *a.Remaining != 0 || a.AttestationID == "" {
		t.Fatalf("erase = %d %+v", code, a)
	}
	if n := f.h.Store.Count(Query{Tenant: "acme", WholeTenant: true}); n != 5 {
		t.Errorf("%d items left in the tenant, want 5", n)
	}
	if n := f.h.Store.Count(Query{Tenant: "globex", Subject: "a"}); n != 1 {
		t.Error("the same id in another tenant was erased")
	}
}

func TestReplayedAndLateRequestsAreRefused(t *testing.T) {
	f := newFixture(false)
	body := eraseBody("r1", "a")
	if code, _ := f.post(t, body, f.now, "r1"); code != 200 {
		t.Fatalf("first request: %d", code)
	}
	if code, a := f.post(t, body, f.now, "r1"); code != 401 || a.Error != "replayed request" {
		t.Errorf("replayed request = %d %q, want 401 replayed request", code, a.Error)
	}
	for name, ts := range map[string]time.Time{"late": f.now.Add(-6 * time.Minute), "early": f.now.Add(6 * time.Minute)} {
		if code, a := f.post(t, eraseBody("r-"+name, "a"), ts, "r-"+name); code != 401 || a.Error != ErrTimestamp.Error() {
			t.Errorf("%s request = %d %q, want 401", name, code, a.Error)
		}
	}
	r := httptest.NewRequest(http.MethodPost, ErasuresPath, strings.NewReader(body))
	r.Header.Set(HeaderTimestamp, strconv.FormatInt(f.now.Unix(), 10))
	r.Header.Set(HeaderSignature, Sign([]byte("another-secret-0123456789abcdef0123"), strconv.FormatInt(f.now.Unix(), 10), []byte(body)))
	r.Header.Set(HeaderRequestID, "r1")
	if code, _ := f.serve(t, r); code != 401 {
		t.Errorf("wrong secret = %d, want 401", code)
	}
	// A replay cache entry expires with the tolerance: by then the timestamp is late anyway.
	f.now = f.now.Add(11 * time.Minute)
	if code, a := f.post(t, body, f.now.Add(-11*time.Minute), "r1"); code != 401 || a.Error != ErrTimestamp.Error() {
		t.Errorf("old replay = %d %q, want refused as late", code, a.Error)
	}
}

func TestRequestIDIsAnIdempotencyKey(t *testing.T) {
	f := newFixture(false)
	f.h.Store.Put(Item{Tenant: "acme", Subject: "a"})
	f.h.Store.Put(Item{Tenant: "acme", Subject: "a"})
	body := eraseBody("r1", "a")
	_, first := f.post(t, body, f.now, "r1")
	f.h.Store.Put(Item{Tenant: "acme", Subject: "a"}) // written after the first erasure
	code, again := f.post(t, body, f.now.Add(time.Second), "r1")
	if code != 200 || *again.Deleted != 2 || again.AttestationID != first.AttestationID {
		t.Errorf("re-sent request = %d %+v, want the first answer %+v", code, again, first)
	}
	if n := f.h.Store.Count(Query{Tenant: "acme", Subject: "a"}); n != 1 {
		t.Errorf("the re-sent request was carried out again: %d items left, want 1", n)
	}
	if code, _ := f.post(t, eraseBody("r1", "b"), f.now.Add(2*time.Second), "r1"); code != 422 {
		t.Errorf("same id, other body = %d, want 422", code)
	}
	if code, _ := f.post(t, body, f.now.Add(3*time.Second), "other"); code != 400 {
		t.Errorf("header id differing from the body's = %d, want 400", code)
	}
}

func TestMalformedRequests(t *testing.T) {
	f := newFixture(false)
	for name, body := range map[string]string{
		"not json":     `nope`,
		"version":      `{"version":2,"request_id":"x","action":"erase","tenant":"t","scope":"tenant"}`,
		"action":       `{"version":1,"request_id":"x","action":"drop","tenant":"t","scope":"tenant"}`,
		"no subject":   `{"version":1,"request_id":"x","action":"erase","tenant":"t","scope":"subject"}`,
		"invalid utf8": "{\"version\":1,\"request_id\":\"x\",\"action\":\"erase\",\"tenant\":\"t\",\"scope\":\"subject\",\"subject\":{\"id\":\"\xff\"}}",
	} {
		if code, _ := f.post(t, body, f.now, "x"); code != 400 {
			t.Errorf("%s: %d, want 400", name, code)
		}
	}
}

func TestAsyncAnswersWithAStatusURL(t *testing.T) {
	f := newFixture(true)
	f.h.PendingPolls = 1
	f.h.Store.Put(Item{Tenant: "acme", Subject: "a"})
	code, a := f.post(t, eraseBody("r1", "a"), f.now, "r1")
	if code != 202 || !strings.HasPrefix(a.StatusURL, StatusPrefix) {
		t.Fatalf("erase = %d %+v, want 202 with a status URL", code, a)
	}
	poll := func(id string, sec []byte) (int, Answer) {
		r := httptest.NewRequest(http.MethodGet, a.StatusURL, nil)
		stamp := strconv.FormatInt(f.now.Unix(), 10)
		r.Header.Set(HeaderTimestamp, stamp)
		r.Header.Set(HeaderSignature, Sign(sec, stamp, []byte(a.StatusURL)))
		r.Header.Set(HeaderRequestID, id)
		return f.serve(t, r)
	}
	if code, _ := poll("r1", []byte("another-secret-0123456789abcdef0123")); code != 401 {
		t.Errorf("unsigned poll = %d, want 401", code)
	}
	if code, _ := poll("r2", secret); code != 404 {
		t.Errorf("poll for another request id = %d, want 404", code)
	}
	if _, p := poll("r1", secret); p.Status != "pending" || f.h.Store.Count(Query{Tenant: "acme", Subject: "a"}) != 1 {
		t.Errorf("first poll = %+v, want pending and nothing erased yet", p)
	}
	_, done := poll("r1", secret)
	if done.Status != "completed" || *done.Deleted != 1 || done.AttestationID == "" {
		t.Errorf("second poll = %+v, want completed with 1 deleted", done)
	}
	if _, again := poll("r1", secret); again.AttestationID != done.AttestationID {
		t.Errorf("a later poll = %+v, want the same completed answer", again)
	}
}

func TestUnreadableItemsAreUnexamined(t *testing.T) {
	f := newFixture(false)
	f.h.Store.Put(Item{Tenant: "acme", Subject: "secret-name", Unreadable: true})
	_, a := f.post(t, eraseBody("r1", "secret-name"), f.now, "r1")
	if *a.Deleted != 0 || a.Unexamined != 1 || len(a.UnexaminedItems) != 1 || strings.Contains(a.UnexaminedItems[0], "secret-name") {
		t.Errorf("erase next to an unreadable item = %+v", a)
	}
}

func TestFileStore(t *testing.T) {
	path := t.TempDir() + "/items.json"
	s, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Put(Item{Tenant: "acme", Subject: "a"})
	s.Put(Item{Tenant: "acme", Subject: "b"})
	if _, err := s.Erase(Query{Tenant: "acme", Subject: "a"}); err != nil {
		t.Fatal(err)
	}
	again, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if again.Count(Query{Tenant: "acme", WholeTenant: true}) != 1 || again.Count(Query{Tenant: "acme", Subject: "b"}) != 1 {
		t.Error("the reopened store does not hold exactly b")
	}
}

// TestWorkedExample: the contract's worked signatures are what Sign computes and what
// CheckSignature accepts.
func TestWorkedExample(t *testing.T) {
	b, err := os.ReadFile("../../../docs/webhook-contract.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), "## Worked example")
	_, block, _ := strings.Cut(rest, "```\n")
	block, _, _ = strings.Cut(block, "```")
	ex := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		k, v, _ := strings.Cut(line, ":")
		ex[k] = strings.TrimSpace(v)
	}
	if len(ex) < 7 {
		t.Fatalf("worked example: %v", ex)
	}
	key := []byte(ex["secret"])
	if got := Sign(key, ex["timestamp"], []byte(ex["body"])); got != ex["signature"] {
		t.Errorf("Sign = %s, the example says %s", got, ex["signature"])
	}
	if got := Sign(key, ex["poll timestamp"], []byte(ex["poll target"])); got != ex["poll signature"] {
		t.Errorf("poll: Sign = %s, the example says %s", got, ex["poll signature"])
	}
	ts, _ := strconv.ParseInt(ex["timestamp"], 10, 64)
	if _, err := CheckSignature([][]byte{[]byte("old-secret-0123456789abcdef0123456"), key}, ex["timestamp"], "v0=x, "+ex["signature"], []byte(ex["body"]), time.Unix(ts, 0), time.Minute); err != nil {
		t.Errorf("CheckSignature refuses the example: %v", err)
	}
	var req Request
	if err := json.Unmarshal([]byte(ex["body"]), &req); err != nil || req.Subject == nil || req.Subject.ID != "cust-42" {
		t.Errorf("the example body does not decode as a request: %+v, %v", req, err)
	}
}
