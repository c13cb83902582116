package intake_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// Every path that can publish an erasure, tried by the tenant's app token (no role)
// against every gate a request can stand at: none deletes what the gate holds back.
// A gated request may be moved to another gate (a confirmed TENANT dry run then awaits
// approval); it is never published to delete, and a held store is never erased.
func TestNoPathBypassesAGate(t *testing.T) {
	subject := func(map[string]any) {}
	tenant := func(m map[string]any) {
		delete(m, "subject_id")
		delete(m, "session_ids")
		m["scope"] = "TENANT"
	}
	gates := []struct {
		name    string
		windows intake.Windows
		body    func(map[string]any)
		dryRun  bool
		// then moves the request to its gate after the submission, as a person would.
		then func(t *testing.T, e *env, id string)
	}{
		{name: "dry run (PREVIEWED)", body: tenant, dryRun: true},
		{name: "dry run in a window (PREVIEWED)", windows: intake.Windows{"GDPR": time.Hour}, body: subject, dryRun: true},
		{name: "cancellation window (SCHEDULED)", windows: intake.Windows{"GDPR": time.Hour}, body: subject},
		{name: "approval (AWAITING_APPROVAL)", body: tenant},
		{name: "cancelled (CANCELLED)", windows: intake.Windows{"GDPR": time.Hour}, body: subject,
			then: func(t *testing.T, e *env, id string) {
				e.expect(t, "POST", "/v1/erasures/"+id+"/cancel", "", acmeToken, http.StatusOK)
			}},
		{name: "rejected (REJECTED)", body: tenant,
			then: func(t *testing.T, e *env, id string) {
				e.expect(t, "POST", "/v1/erasures/"+id+"/reject", "", dpo1Token, http.StatusOK)
			}},
		{name: "legal hold on dataset", body: subject},
	}
	paths := []struct {
		name string
		try  func(t *testing.T, e *env, id, body string)
	}{
		{"submit again", func(t *testing.T, e *env, id, body string) {
			e.do(t, "POST", "/v1/erasures", body, append(bearer(acmeToken), "Idempotency-Key", "k-1")...)
		}},
		{"erasure.intake record again", func(t *testing.T, e *env, id, body string) {
			in := decode[event.IntakeRequest](t, []byte(body))
			in.IdempotencyKey = "k-1"
			if in.Scope == "" {
				in.Scope = event.ScopeSubject
			}
			rec := encodeIntake(t, in)
			rec.Headers = append(rec.Headers, recordAuth(acmeToken))
			_ = e.svc.HandleIntake(context.Background(), rec)
		}},
		{"confirm", func(t *testing.T, e *env, id, _ string) {
			e.do(t, "POST", "/v1/erasures/"+id+"/confirm", "", bearer(acmeToken)...)
		}},
		{"approve", func(t *testing.T, e *env, id, _ string) {
			e.do(t, "POST", "/v1/erasures/"+id+"/approve", "", bearer(acmeToken)...)
		}},
		{"retry every store", func(t *testing.T, e *env, id, _ string) {
			e.do(t, "POST", "/v1/erasures/"+id+"/retry", e.retryBody(t, id, nil), bearer(acmeToken)...)
		}},
		{"retry the held store by name", func(t *testing.T, e *env, id, _ string) {
			e.do(t, "POST", "/v1/erasures/"+id+"/retry", e.retryBody(t, id, []string{"dataset"}), bearer(acmeToken)...)
		}},
		{"release the hold", func(t *testing.T, e *env, id, _ string) {
			e.do(t, "POST", "/v1/holds/"+e.holdID+"/release", "", bearer(acmeToken)...)
		}},
		{"schedule sweep", func(t *testing.T, e *env, _, _ string) {
			_ = e.svc.Sweep(context.Background())
		}},
	}
	for _, g := range gates {
		for _, p := range paths {
			t.Run(g.name+"/"+p.name, func(t *testing.T) {
				e, _ := gated(t, g.windows)
				h := e.expect(t, "POST", "/v1/holds", `{"tenant_id": "acme", "store": "dataset", "legal_basis": "GDPR Art. 17(3)(e)"}`, dpo1Token, http.StatusCreated)
				e.holdID = decode[workflow.Hold](t, h).ID
				b := body(t, func(m map[string]any) {
					g.body(m)
					if g.dryRun {
						m["dry_run"] = true
					}
				})
				acc := e.submit(t, b, append(bearer(acmeToken), "Idempotency-Key", "k-1")...)
				if g.then != nil {
					g.then(t, e, acc.RequestID)
				}
				p.try(t, e, acc.RequestID, body(t, g.body))
				for _, r := range e.of(t, acc.RequestID) {
					if r.DryRun {
						continue
					}
					if g.name != "legal hold on dataset" {
						t.Errorf("published to delete (attempt %d, stores %v)", r.Attempt, r.OnlyStores)
					}
					if _, held := r.ExemptionOf("dataset"); r.Acts("dataset") && !held {
						t.Errorf("published to erase the held store (attempt %d, stores %v)", r.Attempt, r.OnlyStores)
					}
				}
			})
		}
	}
}

// The gates open for those entitled to open them: a second person approves, the window
// ends, a re-drive of a released request runs with the holds of now.
func TestGatesOpenForTheEntitled(t *testing.T) {
	e, _ := gated(t, nil)
	acc := e.submit(t, `{"tenant_id": "acme", "scope": "TENANT", "regulation": "GDPR"}`, bearer(acmeToken)...)
	e.expect(t, "POST", "/v1/erasures/"+acc.RequestID+"/approve", "", dpo1Token, http.StatusOK)
	e.expect(t, "POST", "/v1/holds", `{"tenant_id": "acme", "store": "dataset", "legal_basis": "GDPR Art. 17(3)(e)"}`, dpo1Token, http.StatusCreated)
	e.expect(t, "POST", "/v1/erasures/"+acc.RequestID+"/retry", "{}", acmeToken, http.StatusAccepted)
	pub := e.of(t, acc.RequestID)
	if len(pub) != 2 || pub[1].DryRun {
		t.Fatalf("approved and re-driven: %+v", pub)
	}
	if _, held := pub[1].ExemptionOf("dataset"); !held {
		t.Errorf("the re-drive ignores the hold placed since: %+v", pub[1].Exempt)
	}
	e.expect(t, "POST", "/v1/erasures/"+acc.RequestID+"/retry", `{"stores": ["dataset"]}`, acmeToken, http.StatusConflict)
}

// Without a workflow store nobody can approve, so TENANT scope is refused.
func TestTenantScopeNeedsAWorkflowStore(t *testing.T) {
	e := setup(t)
	e.svc.Workflow = nil
	code, b := e.do(t, "POST", "/v1/erasures", `{"tenant_id": "acme", "scope": "TENANT", "regulation": "GDPR"}`)
	if code != http.StatusForbidden {
		t.Fatalf("TENANT scope without a workflow store: %d %s", code, b)
	}
	if n := len(e.published(t)); n != 0 {
		t.Errorf("published %d records", n)
	}
}

// expect sends a request with token and fails unless it is answered want.
func (e *env) expect(t *testing.T, method, path, body, token string, want int) []byte {
	t.Helper()
	code, b := e.do(t, method, path, body, bearer(token)...)
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
	return b
}

// retryBody is the body of a re-drive of id naming its subject again, and stores.
func (e *env) retryBody(t *testing.T, id string, stores []string) string {
	t.Helper()
	m := map[string]any{"stores": stores}
	if st, err := e.store.GetRequest(context.Background(), id); err != nil || st.Scope != event.ScopeTenant {
		m["subject_id"], m["session_ids"] = subj, []string{"s1", "s2"}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func recordAuth(token string) kgo.RecordHeader {
	return kgo.RecordHeader{Key: auth.RecordHeader, Value: []byte("Bearer " + token)}
}
