package intake_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

const (
	acmeToken   = "lt_acme-token-0123456789abcdefghijklmnopqrstuv"
	globexToken = "lt_globex-token-0123456789abcdefghijklmnopqrst"
	// privacyToken is acme's privacy team: it may lift suppressions and hold stores.
	privacyToken = "lt_acme-privacy-token-0123456789abcdefghijklm"
	opsToken     = "lt_operator-token-0123456789abcdefghijklmnopq"
)

func secured(t *testing.T) *env {
	t.Helper()
	e := setup(t)
	a, err := auth.New(auth.Config{Tokens: []auth.Token{
		{Name: "shopbot", SHA256: auth.HashToken(acmeToken), Tenants: []string{"acme"}},
		{Name: "globex-portal", SHA256: auth.HashToken(globexToken), Tenants: []string{"globex"}},
		{Name: "ops", SHA256: auth.HashToken(opsToken), Tenants: []string{auth.Wildcard}, Roles: []string{auth.RoleApprover}},
		{Name: "acme-privacy", SHA256: auth.HashToken(privacyToken), Tenants: []string{"acme"}, Roles: []string{auth.RoleLift, auth.RoleHolds}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.Auth = a
	e.svc.Limiter = auth.NewLimiter(0.001, 3) // three submissions, then 429
	return e
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func TestAuthentication(t *testing.T) {
	e := secured(t)
	for name, h := range map[string][]string{
		"missing": nil,
		"invalid": bearer("lt_not-a-token"),
		"basic":   {"Authorization", "Basic YWxhZGRpbjpvcGVuc2VzYW1l"},
	} {
		code, _ := e.do(t, "POST", "/v1/erasures", body(t, nil), h...)
		if code != http.StatusUnauthorized {
			t.Errorf("%s credential: %d, want 401", name, code)
		}
	}
	if code, _ := e.do(t, "GET", "/v1/erasures/er_x", ""); code != http.StatusUnauthorized {
		t.Errorf("status without a token: %d, want 401", code)
	}
	if n := len(e.published(t)); n != 0 {
		t.Errorf("%d requests published without authentication", n)
	}
}

func TestTenantIsolation(t *testing.T) {
	e := secured(t)
	acme := e.submit(t, body(t, nil), bearer(acmeToken)...)
	if code, _ := e.do(t, "POST", "/v1/erasures", body(t, func(m map[string]any) { m["tenant_id"] = "globex" }), bearer(acmeToken)...); code != http.StatusForbidden {
		t.Errorf("acme token submitting for globex: %d, want 403", code)
	}
	for _, path := range []string{"/v1/erasures/" + acme.RequestID, "/v1/erasures/" + acme.RequestID + "/receipt", "/v1/erasures?tenant=acme"} {
		if code, _ := e.do(t, "GET", path, "", bearer(globexToken)...); code != http.StatusForbidden {
			t.Errorf("globex token GET %s: %d, want 403", path, code)
		}
	}
	if code, _ := e.do(t, "POST", "/v1/erasures/"+acme.RequestID+"/retry", `{"subject_id":"`+subj+`"}`, bearer(globexToken)...); code != http.StatusForbidden {
		t.Errorf("globex token retrying acme's request: %d, want 403", code)
	}
	if code, resp := e.do(t, "GET", "/v1/erasures/"+acme.RequestID, "", bearer(acmeToken)...); code != http.StatusOK {
		t.Errorf("acme token reading its own status: %d %s", code, resp)
	}
	// A single-tenant token lists its tenant; the operator lists every tenant.
	code, resp := e.do(t, "GET", "/v1/erasures", "", bearer(globexToken)...)
	if code != http.StatusOK || len(decode[struct{ Requests []any }](t, resp).Requests) != 0 {
		t.Errorf("globex list: %d %s", code, resp)
	}
	code, resp = e.do(t, "GET", "/v1/erasures", "", bearer(opsToken)...)
	if code != http.StatusOK || len(decode[struct{ Requests []any }](t, resp).Requests) != 1 {
		t.Errorf("operator list: %d %s", code, resp)
	}
	if p := e.published(t); len(p) != 1 || p[0].TenantID != "acme" {
		t.Errorf("published %+v", p)
	}
}

// The body is validated before the tenant is authorised: an invalid body is 400 with its
// reason whatever the token (an empty tenant too, even for an operator), and the answers
// are the same for a tenant with requests and one without, so they tell nothing about
// either. Authentication still comes first.
func TestSubmitValidatesBeforeAuthorising(t *testing.T) {
	e := secured(t)
	e.svc.Limiter = nil
	e.submit(t, body(t, func(m map[string]any) { m["tenant_id"] = "globex" }), bearer(globexToken)...)
	set := func(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
	for _, tc := range []struct {
		name, token string
		mod         func(map[string]any)
		code        int
		reason      string
	}{
		{"operator, empty tenant", opsToken, set("tenant_id", ""), 400, "tenant_id must be 1-63 characters"},
		{"tenant token, empty tenant", acmeToken, set("tenant_id", ""), 400, "tenant_id must be 1-63 characters"},
		{"operator, missing tenant", opsToken, func(m map[string]any) { delete(m, "tenant_id") }, 400, "tenant_id must be 1-63 characters"},
		{"operator, upper-case tenant", opsToken, set("tenant_id", "ACME"), 400, "tenant_id may hold only"},
		{"operator, blank subject", opsToken, set("subject_id", " "), 400, "subject_id is blank"},
		{"other tenant, blank subject", acmeToken, func(m map[string]any) { m["tenant_id"] = "globex"; m["subject_id"] = " " }, 400, "subject_id is blank"},
		{"other tenant, unknown regulation", acmeToken, func(m map[string]any) { m["tenant_id"] = "globex"; m["regulation"] = "X" }, 400, "regulation must be one of"},
		{"other tenant, valid body", acmeToken, set("tenant_id", "globex"), 403, "forbidden"},
	} {
		code, resp := e.do(t, "POST", "/v1/erasures", body(t, tc.mod), bearer(tc.token)...)
		if code != tc.code || !strings.Contains(decode[map[string]string](t, resp)["error"], tc.reason) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, code, resp, tc.code, tc.reason)
		}
	}
	if code, _ := e.do(t, "POST", "/v1/erasures", body(t, func(m map[string]any) { m["tenant_id"] = "" })); code != http.StatusUnauthorized {
		t.Errorf("no token, empty tenant: %d, want 401", code)
	}
	// globex has a request, initech none: a token for neither gets the same answers.
	for _, mod := range []func(map[string]any){nil, set("subject_id", " "), set("regulation", "X")} {
		answer := func(tenant string) string {
			code, resp := e.do(t, "POST", "/v1/erasures", body(t, func(m map[string]any) {
				if mod != nil {
					mod(m)
				}
				m["tenant_id"] = tenant
			}), bearer(acmeToken)...)
			return fmt.Sprint(code, " ", string(resp))
		}
		if a, b := answer("globex"), answer("initech"); a != b {
			t.Errorf("answers differ by tenant: %q and %q", a, b)
		}
	}
	if n := len(e.published(t)); n != 1 {
		t.Errorf("%d requests published, want only globex's own", n)
	}
}

// Over erasure.intake too, an invalid record is dead-lettered for what is wrong with it,
// not as forbidden.
func TestIntakeRecordValidatedBeforeAuthorising(t *testing.T) {
	e := secured(t)
	for name, in := range map[string]event.IntakeRequest{
		"empty tenant":  {TenantID: "", SubjectID: subj, Regulation: "GDPR"},
		"blank subject": {TenantID: "acme", SubjectID: "  ", Regulation: "GDPR"},
	} {
		in.SessionIDs, in.Scope, in.SubmittedAt = []string{}, event.ScopeSubject, start
		b, err := event.Intake.Encode(&in)
		if err != nil {
			t.Fatal(err)
		}
		rec := &kgo.Record{Topic: event.TopicIntake, Value: b, Headers: []kgo.RecordHeader{{Key: auth.RecordHeader, Value: []byte("Bearer " + opsToken)}}}
		err = e.svc.HandleIntake(context.Background(), rec)
		if !retry.IsPermanent(err) || !errors.Is(err, intake.ErrInvalid) || errors.Is(err, auth.ErrForbidden) {
			t.Errorf("%s: %v, want a permanent ErrInvalid", name, err)
		}
	}
}

func TestRateLimit(t *testing.T) {
	e := secured(t)
	for i := 0; i < 3; i++ {
		e.submit(t, body(t, nil), bearer(acmeToken)...)
	}
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/erasures", strings.NewReader(body(t, nil)))
	req.Header.Set("Authorization", "Bearer "+acmeToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("fourth submission: %d, want 429", resp.StatusCode)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	// Another tenant has its own budget.
	e.submit(t, body(t, func(m map[string]any) { m["tenant_id"] = "globex" }), bearer(globexToken)...)
}

func TestIntakeRecordsNeedAProducerToken(t *testing.T) {
	e := secured(t)
	rec := func(tenant, token string) *kgo.Record {
		b, err := event.Intake.Encode(&event.IntakeRequest{TenantID: tenant, SubjectID: subj, SessionIDs: []string{}, Regulation: "GDPR",
			Scope: event.ScopeSubject, IdempotencyKey: "k-" + tenant + token[:4], Source: "claims-to-be-ops", SubmittedAt: start})
		if err != nil {
			t.Fatal(err)
		}
		r := &kgo.Record{Topic: event.TopicIntake, Value: b}
		if token != "none" {
			r.Headers = []kgo.RecordHeader{{Key: auth.RecordHeader, Value: []byte("Bearer " + token)}}
		}
		return r
	}
	for name, r := range map[string]*kgo.Record{
		"no token":     rec("acme", "none"),
		"wrong tenant": rec("globex", acmeToken),
		"bad token":    rec("acme", "lt_forged-token-000000000000000000000000"),
	} {
		err := e.svc.HandleIntake(context.Background(), r)
		if err == nil || !retry.IsPermanent(err) {
			t.Errorf("%s: %v, want a permanent error", name, err)
		}
	}
	if err := e.svc.HandleIntake(context.Background(), rec("acme", acmeToken)); err != nil {
		t.Fatal(err)
	}
	p := e.published(t)
	if len(p) != 1 {
		t.Fatalf("published %d", len(p))
	}
	st, err := e.svc.Status(context.Background(), p[0].RequestID)
	if err != nil || st.TenantID != "acme" {
		t.Fatalf("status %+v %v", st, err)
	}
}
