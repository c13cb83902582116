package intake_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// subj is the raw subject id of the tests; no answer may contain it.
const subj = "alice@example.com"

func (e *env) do(t *testing.T, method, path, body string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: content type %q", method, path, ct)
	}
	if strings.Contains(string(b), "alice") {
		t.Errorf("%s %s: answer echoes the subject id: %s", method, path, b)
	}
	return resp.StatusCode, b
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return v
}

// body is a valid submission with the changes in mod applied.
func body(t *testing.T, mod func(m map[string]any)) string {
	t.Helper()
	m := map[string]any{"tenant_id": "acme", "subject_id": subj, "session_ids": []string{"s1", "s2"}, "regulation": "gdpr"}
	if mod != nil {
		mod(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (e *env) submit(t *testing.T, b string, header ...string) intake.Accepted {
	t.Helper()
	code, resp := e.do(t, "POST", "/v1/erasures", b, header...)
	if code != http.StatusAccepted {
		t.Fatalf("POST: %d %s", code, resp)
	}
	return decode[intake.Accepted](t, resp)
}

// A valid request is published, stamped, before the 202 answer.
func TestSubmit(t *testing.T) {
	e := setup(t)
	acc := e.submit(t, body(t, nil))
	pub := e.published(t) // read right after the answer: it was acknowledged
	if len(pub) != 1 {
		t.Fatalf("%d requests published, want 1", len(pub))
	}
	r, inv := pub[0], inventory.Reference()
	if !strings.HasPrefix(acc.RequestID, "er_") || r.RequestID != acc.RequestID || acc.SubjectHash != r.SubjectHash ||
		acc.KeyID != "k1" || !acc.DueAt.Equal(r.DueAt) || acc.StatusURL != "/v1/erasures/"+r.RequestID ||
		acc.ReceiptURL != "/v1/erasures/"+r.RequestID+"/receipt" {
		t.Errorf("answer %+v for %+v", acc, r)
	}
	if r.Identifiers.SubjectID != subj || !slices.Equal(r.Identifiers.SessionIDs, []string{"s1", "s2"}) ||
		r.TenantID != "acme" || r.SubjectHash != e.key.Pseudonym("acme", subj) || r.KeyID != "k1" ||
		r.Scope != event.ScopeSubject || r.Regulation != "GDPR" || !r.RequestedAt.Equal(start) ||
		!r.DueAt.Equal(start.Add(30*24*time.Hour)) || r.InventoryVersion != inv.Version ||
		!slices.Equal(r.ExpectedStores, inv.Names()) || len(r.OnlyStores) != 0 || r.Attempt != 1 {
		t.Errorf("published %+v", r)
	}
	if stored, err := e.store.GetRequest(context.Background(), r.RequestID); err != nil || stored.SubjectHash != r.SubjectHash {
		t.Errorf("stored request %+v (%v)", stored, err)
	}

	// A TENANT request names the tenant, not a subject.
	acc = e.submit(t, body(t, func(m map[string]any) { delete(m, "subject_id"); delete(m, "session_ids"); m["scope"] = "TENANT" }))
	if pub := e.of(t, acc.RequestID); len(pub) != 1 || pub[0].Scope != event.ScopeTenant || pub[0].SubjectHash != e.key.Pseudonym("acme", "") ||
		pub[0].Identifiers.SubjectID != "" || len(pub[0].Identifiers.SessionIDs) != 0 {
		t.Errorf("TENANT request published as %+v", pub)
	}
}

// Malformed requests are 400 with a reason that names the problem and not the values, and
// nothing is published or recorded.
func TestSubmitRejects(t *testing.T) {
	e := setup(t)
	set := func(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
	many := make([]string, 1001)
	for i := range many {
		many[i] = fmt.Sprint("s", i)
	}
	for _, tc := range []struct {
		name, body, reason string
	}{
		{"empty body", "", "empty body"},
		{"invalid JSON", `{"tenant_id" "acme"}`, "syntax error at byte"},
		{"truncated JSON", `{"tenant_id": "acme",`, "unexpected EOF"},
		{"not an object", `["acme"]`, "must be"},
		{"wrong type", body(t, set("session_ids", "s1")), `field "session_ids" must be []string`},
		{"unknown field", body(t, set("subject", subj)), `unknown field "subject"`},
		{"second JSON value", body(t, nil) + `{"tenant_id":"acme"}`, "more than one JSON value"},
		{"trailing garbage", body(t, nil) + `]`, "more than one JSON value"},
		{"empty tenant", body(t, set("tenant_id", "")), "tenant_id must be 1-63 characters"},
		{"uppercase tenant", body(t, set("tenant_id", "Acme")), "tenant_id may hold only"},
		{"path tenant", body(t, set("tenant_id", "../x")), "tenant_id may hold only"},
		{"template tenant", body(t, set("tenant_id", "{tenant}")), "tenant_id may hold only"},
		{"empty subject", body(t, set("subject_id", "")), "subject_id is empty"},
		{"missing subject", body(t, func(m map[string]any) { delete(m, "subject_id") }), "subject_id is empty"},
		{"control character", body(t, set("subject_id", subj+"\x00")), "subject_id holds a control character"},
		{"control character in a session", body(t, set("session_ids", []string{"s\t1"})), "session_ids[] holds a control character"},
		{"empty session", body(t, set("session_ids", []string{""})), "session_ids[] is empty"},
		{"blank subject", body(t, set("subject_id", " ")), "subject_id is blank"},
		{"blank subject of several spaces", body(t, set("subject_id", "  \u00a0\u3000")), "subject_id is blank"},
		{"invisible subject", body(t, set("subject_id", "\u200b")), "subject_id is blank"},
		{"blank session", body(t, set("session_ids", []string{"s1", "  "})), "session_ids[] is blank"},
		{"invalid UTF-8", `{"tenant_id":"acme","subject_id":"alice@example.com` + "\xff" + `","regulation":"GDPR"}`, "not valid UTF-8"},
		{"lone high surrogate", `{"tenant_id":"acme","subject_id":"alice@example.com\ud800","regulation":"GDPR"}`, "not valid UTF-8"},
		{"lone low surrogate", `{"tenant_id":"acme","subject_id":"alice@example.com\udc00x","regulation":"GDPR"}`, "not valid UTF-8"},
		{"high surrogate without its pair", `{"tenant_id":"acme","subject_id":"alice@example.com\ud83d\u0041","regulation":"GDPR"}`, "not valid UTF-8"},
		{"over-long subject", body(t, set("subject_id", subj+strings.Repeat("x", 256))), "subject_id is longer than 256 bytes"},
		{"too many sessions", body(t, set("session_ids", many)), "more than 1000 session_ids"},
		{"unknown regulation", body(t, set("regulation", "HIPAA")), "regulation must be one of CCPA, GDPR, LGPD, PDPA"},
		{"no regulation", body(t, func(m map[string]any) { delete(m, "regulation") }), "regulation must be one of"},
		{"TENANT scope with a subject", body(t, set("scope", "TENANT")), "a TENANT scope request names no subject_id"},
		{"TENANT scope with sessions", body(t, func(m map[string]any) { delete(m, "subject_id"); m["scope"] = "TENANT" }), "a TENANT scope request names no"},
		{"unknown scope", body(t, set("scope", "tenant")), "scope must be SUBJECT or TENANT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, resp := e.do(t, "POST", "/v1/erasures", tc.body)
			if code != http.StatusBadRequest {
				t.Fatalf("status %d %s, want 400", code, resp)
			}
			if got := decode[map[string]string](t, resp)["error"]; !strings.Contains(got, tc.reason) {
				t.Errorf("reason %q, want it to say %q", got, tc.reason)
			}
		})
	}
	if n := len(e.published(t)); n != 0 {
		t.Errorf("%d rejected requests published", n)
	}
	if n := e.store.puts.Load(); n != 0 {
		t.Errorf("%d rejected requests recorded", n)
	}
}

// Escapes that are not lone surrogates pass and decode to exactly what was sent.
func TestSubmitEscapes(t *testing.T) {
	e := setup(t)
	for _, tc := range []struct{ escaped, want string }{
		{`alice\ud83d\ude00`, "alice\U0001F600"}, // a surrogate pair
		{`alice\\ud800`, `alice\ud800`},          // an escaped backslash, then text
		{`alice\u00e9\"\/`, `aliceé"/`},
	} {
		acc := e.submit(t, `{"tenant_id":"acme","subject_id":"`+tc.escaped+`","regulation":"GDPR"}`)
		pub := e.of(t, acc.RequestID)
		if got := pub[0].Identifiers.SubjectID; len(pub) != 1 || got != tc.want {
			t.Errorf("%s decoded to %q, want %q", tc.escaped, got, tc.want)
		}
	}
}

// Any body over MaxBodyBytes is 413, whatever it holds.
func TestSubmitTooLarge(t *testing.T) {
	e := setup(t)
	for name, b := range map[string]string{
		"long subject":          body(t, func(m map[string]any) { m["subject_id"] = strings.Repeat("x", intake.MaxBodyBytes) }),
		"valid request, padded": body(t, nil) + strings.Repeat(" ", intake.MaxBodyBytes),
		"no JSON":               strings.Repeat("x", intake.MaxBodyBytes+1),
	} {
		code, resp := e.do(t, "POST", "/v1/erasures", b)
		if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(resp), "larger than 65536 bytes") {
			t.Errorf("%s: %d %s, want 413", name, code, resp)
		}
	}
	code, _ := e.do(t, "POST", "/v1/erasures", body(t, nil)+strings.Repeat(" ", intake.MaxBodyBytes-len(body(t, nil))))
	if code != http.StatusAccepted {
		t.Errorf("a body of exactly %d bytes: %d", intake.MaxBodyBytes, code)
	}
}

// The answer waits for the broker: with the broker down (nothing listens where the producer
// looks for it) it is 503 naming the broker, the refusal is logged without identifiers, and
// nothing is recorded.
func TestSubmitBrokerDown(t *testing.T) {
	e := setup(t)
	core, logs := observer.New(zap.InfoLevel)
	e.svc.Log = zap.New(core)
	e.svc.Producer = brokerProducer(t, broker.Config{Brokers: []string{fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))}})
	begin := time.Now()
	code, resp := e.do(t, "POST", "/v1/erasures", body(t, nil), "Idempotency-Key", "k-1")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("status %d %s, want 503", code, resp)
	}
	if got := decode[map[string]string](t, resp)["error"]; got != intake.ErrBrokerUnavailable.Error() || got != "request not accepted: broker unavailable" {
		t.Errorf("reason %q", got)
	}
	if got := refusals(t, logs); len(got) != 1 || got[0]["component"] != "broker" || got[0]["tenant"] != "acme" {
		t.Errorf("logged refusals %v, want one of the broker", got)
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("503 after %v", d)
	}
	if n := e.store.puts.Load(); n != 0 {
		t.Errorf("%d requests recorded without an acknowledgement", n)
	}
}

func TestIdempotencyKey(t *testing.T) {
	e := setup(t)
	first := e.submit(t, body(t, nil), "Idempotency-Key", "order-42")
	e.setNow(start.Add(time.Minute))
	again := e.submit(t, body(t, nil), "Idempotency-Key", "order-42")
	if again != first {
		t.Errorf("second answer %+v, want %+v", again, first)
	}
	if n := len(e.published(t)); n != 1 {
		t.Errorf("%d requests published for one idempotency key, want 1", n)
	}

	code, resp := e.do(t, "POST", "/v1/erasures", body(t, func(m map[string]any) { m["subject_id"] = "bob" }), "Idempotency-Key", "order-42")
	if code != http.StatusConflict {
		t.Errorf("same key, another subject: %d %s, want 409", code, resp)
	}
	code, resp = e.do(t, "POST", "/v1/erasures", body(t, func(m map[string]any) { m["regulation"] = "CCPA" }), "Idempotency-Key", "order-42")
	if code != http.StatusConflict {
		t.Errorf("same key, another regulation: %d %s, want 409", code, resp)
	}
	other := e.submit(t, body(t, func(m map[string]any) { m["tenant_id"] = "globex" }), "Idempotency-Key", "order-42")
	if other.RequestID == first.RequestID {
		t.Error("the same key in two tenants names one request")
	}
	code, _ = e.do(t, "POST", "/v1/erasures", body(t, nil), "Idempotency-Key", strings.Repeat("k", 201))
	if code != http.StatusBadRequest {
		t.Errorf("over-long idempotency key: %d, want 400", code)
	}
	if n := len(e.published(t)); n != 2 {
		t.Errorf("%d requests published, want 2", n)
	}
}

// Without an Idempotency-Key, the same body submitted twice is two requests: two request
// ids, two events on erasure.requested, two recorded requests (each gets its own receipt).
func TestSubmitTwiceWithoutIdempotencyKey(t *testing.T) {
	e := setup(t)
	first := e.submit(t, body(t, nil))
	second := e.submit(t, body(t, nil))
	if first.RequestID == second.RequestID {
		t.Fatalf("both submissions answered request %s", first.RequestID)
	}
	if first.SubjectHash != second.SubjectHash {
		t.Errorf("subject hashes %s and %s for one subject", first.SubjectHash, second.SubjectHash)
	}
	for _, acc := range []intake.Accepted{first, second} {
		if pub := e.of(t, acc.RequestID); len(pub) != 1 || pub[0].Attempt != 1 {
			t.Errorf("request %s published %d times, want once", acc.RequestID, len(pub))
		}
		if _, err := e.store.GetRequest(context.Background(), acc.RequestID); err != nil {
			t.Errorf("request %s not recorded: %v", acc.RequestID, err)
		}
	}
	if n := len(e.published(t)); n != 2 {
		t.Errorf("%d requests published, want 2", n)
	}
}

// Identifiers are never trimmed: leading and trailing spaces are part of the id the
// stores match, and only a blank id is refused.
func TestSubmitKeepsSpaces(t *testing.T) {
	e := setup(t)
	acc := e.submit(t, body(t, func(m map[string]any) { m["subject_id"] = " " + subj + " "; m["session_ids"] = []string{" s1"} }))
	pub := e.of(t, acc.RequestID)
	if len(pub) != 1 || pub[0].Identifiers.SubjectID != " "+subj+" " || pub[0].Identifiers.SessionIDs[0] != " s1" {
		t.Fatalf("published %+v", pub)
	}
	if pub[0].SubjectHash == e.key.Pseudonym("acme", subj) {
		t.Error("the spaced id has the pseudonym of the trimmed one")
	}
}

// Status follows the reports and the receipt written to the audit table.
func TestStatusAndReceipt(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	if code, _ := e.do(t, "GET", "/v1/erasures/er_unknown", ""); code != http.StatusNotFound {
		t.Errorf("unknown request: %d, want 404", code)
	}
	acc := e.submit(t, body(t, nil))
	status := func(wantState string, wantOverdue bool) intake.Status {
		t.Helper()
		code, resp := e.do(t, "GET", acc.StatusURL, "")
		if code != http.StatusOK {
			t.Fatalf("status: %d %s", code, resp)
		}
		st := decode[intake.Status](t, resp)
		if st.State != wantState || st.Overdue != wantOverdue {
			t.Errorf("state %s overdue %v, want %s %v", st.State, st.Overdue, wantState, wantOverdue)
		}
		if st.RequestID != acc.RequestID || st.SubjectHash != acc.SubjectHash || st.KeyID != "k1" || st.TenantID != "acme" {
			t.Errorf("status %+v", st)
		}
		return st
	}
	report := func(store string, s event.Status, attempt int) event.StoreDone {
		d := event.StoreDone{RequestID: acc.RequestID, TenantID: "acme", Store: store, Kind: store, Status: s, Attempt: attempt,
			Locations: []event.LocationCount{}, Verification: event.Verification{Method: "read-back"}}
		switch s {
		case event.StatusDeleted:
			d.Locations = []event.LocationCount{{Location: "x:acme:{subject}", Deleted: 4}}
			ran := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
			d.Verification.Similar, d.Verification.DiscoveryRunAt, d.Verification.DiscoveryUncovered = []string{"7"}, &ran, 2
		case event.StatusFailed:
			d.Error, d.Verification.Remaining = "connection refused", -1
		}
		if store == "langgraph" {
			d.Kind = "redis"
		}
		if err := e.store.PutReport(ctx, d); err != nil {
			t.Fatal(err)
		}
		return d
	}

	st := status(intake.StatePending, false)
	var names []string
	for _, s := range st.Stores {
		names = append(names, s.Store)
		if s.Status != intake.Pending {
			t.Errorf("%s: %s before any report", s.Store, s.Status)
		}
	}
	if !slices.Equal(names, inventory.Reference().Names()) {
		t.Errorf("stores %v", names)
	}

	report("qdrant", event.StatusDeleted, 1)
	st = status(intake.StateInProgress, false)
	q := st.Stores[0]
	if q.Verification == nil || q.Verification.Method == "" {
		t.Errorf("qdrant without its verification: %+v", q)
	}
	if q.DiscoveryRunAt == nil || !q.DiscoveryRunAt.Equal(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("qdrant discovery run %v", q.DiscoveryRunAt)
	}
	q.DiscoveryRunAt, q.Verification = nil, nil
	if q != (intake.StoreState{Store: "qdrant", Status: event.StatusDeleted, Deleted: 4, Attempt: 1, Method: "read-back", Similar: 1, DiscoveryUncovered: 2}) {
		t.Errorf("qdrant %+v", st.Stores[0])
	}
	report("redis", event.StatusFailed, 1)
	st = status(intake.StateFailed, false)
	if st.Stores[1].Error != "connection refused" || st.Stores[1].Remaining != -1 {
		t.Errorf("redis %+v", st.Stores[1])
	}
	e.setNow(st.DueAt.Add(time.Second))
	status(intake.StateFailed, true)

	report("redis", event.StatusDeleted, 2)
	report("langgraph", event.StatusNothingFound, 1)
	report("dataset", event.StatusNothingFound, 1)
	report("audit_log", event.StatusNoPII, 1)
	status(intake.StateInProgress, true)
	// A store that found the subject outside the inventory makes the request INCOMPLETE
	// until a later attempt probes clean.
	outside := report("redis", event.StatusDeleted, 3)
	outside.Verification.OutsideInventory = []event.OutsideLocation{{Location: "crm:{tenant}:{id}", Found: 1}}
	if err := e.store.PutReport(ctx, outside); err != nil {
		t.Fatal(err)
	}
	if st := status(intake.StateIncomplete, true); st.Stores[1].Verification.OutsideInventory[0].Location != "crm:{tenant}:{id}" {
		t.Errorf("redis %+v", st.Stores[1])
	}
	outside.Attempt, outside.Verification.OutsideInventory[0].Found = 4, 0
	if err := e.store.PutReport(ctx, outside); err != nil {
		t.Fatal(err)
	}
	status(intake.StateInProgress, true)
	if code, _ := e.do(t, "GET", acc.ReceiptURL, ""); code != http.StatusNotFound {
		t.Errorf("receipt before it exists: %d, want 404", code)
	}

	req, err := e.store.GetRequest(ctx, acc.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	reports, err := e.store.Reports(ctx, acc.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := aggregator.Build(req, reports, e.clock())
	if !ok {
		t.Fatal("reports do not complete the request")
	}
	issued, err := auditlog.Issue(ctx, e.store, r)
	if err != nil {
		t.Fatal(err)
	}
	st = status(intake.StateComplete, false)
	if st.ReceiptID != issued.ReceiptID {
		t.Errorf("receipt id %q, want %q", st.ReceiptID, issued.ReceiptID)
	}
	code, resp := e.do(t, "GET", acc.ReceiptURL, "")
	if code != http.StatusOK {
		t.Fatalf("receipt: %d %s", code, resp)
	}
	if got := decode[event.Receipt](t, resp); got.ReceiptID != issued.ReceiptID || got.Hash != issued.Hash || auditlog.HashReceipt(got) != issued.Hash {
		t.Errorf("receipt %+v, want %+v", got, issued)
	}
	if code, resp := e.do(t, "GET", "/healthz", ""); code != http.StatusOK || !strings.Contains(string(resp), "ok") {
		t.Errorf("healthz: %d %s", code, resp)
	}
}
