package intake_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

const (
	dpo1Token = "lt_dpo-one-token-0123456789abcdefghijklmnopqr"
	dpo2Token = "lt_dpo-two-token-0123456789abcdefghijklmnopqr"
	dpoGlobex = "lt_dpo-globex-token-0123456789abcdefghijklmno"
)

// gated returns an environment whose intake has a workflow file, a sealer, the given
// windows and approvals for TENANT requests, and tokens: shopbot (acme), dpo-1 and dpo-2
// (acme, approvers), dpo-globex (globex, approver).
func gated(t *testing.T, windows intake.Windows) (*env, string) {
	t.Helper()
	e := setup(t)
	a, err := auth.New(auth.Config{Tokens: []auth.Token{
		{Name: "shopbot", SHA256: auth.HashToken(acmeToken), Tenants: []string{"acme"}},
		{Name: "dpo-1", SHA256: auth.HashToken(dpo1Token), Tenants: []string{"acme"}, Roles: []string{auth.RoleApprover, auth.RoleHolds}},
		{Name: "dpo-2", SHA256: auth.HashToken(dpo2Token), Tenants: []string{"acme"}, Roles: []string{auth.RoleApprover}},
		{Name: "dpo-globex", SHA256: auth.HashToken(dpoGlobex), Tenants: []string{"globex"}, Roles: []string{auth.RoleApprover}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.Auth = a
	path := filepath.Join(t.TempDir(), "workflow.json")
	e.svc.Workflow = openWorkflow(t, path)
	e.svc.Sealer = testenv.Sealer(t)
	e.svc.Windows = windows
	e.svc.RequireApproval = true
	return e, path
}

func openWorkflow(t *testing.T, path string) *workflow.FileStore {
	t.Helper()
	w, err := workflow.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func (e *env) status(t *testing.T, id, token string) intake.Status {
	t.Helper()
	code, b := e.do(t, "GET", "/v1/erasures/"+id, "", bearer(token)...)
	if code != http.StatusOK {
		t.Fatalf("status %s: %d %s", id, code, b)
	}
	return decode[intake.Status](t, b)
}

// opened returns the identifiers of a published request, opened with the sealer.
func opened(t *testing.T, s *envelope.Sealer, r event.Requested) event.Identifiers {
	t.Helper()
	ids, err := s.Identifiers(context.Background(), &r)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// A dry run is published as one (DryRun set), recorded PREVIEWED, and confirming it
// publishes the real erasure at a higher attempt with the same identifiers.
func TestDryRunThenConfirm(t *testing.T) {
	e, _ := gated(t, nil)
	acc := e.submit(t, body(t, func(m map[string]any) { m["dry_run"] = true }), bearer(acmeToken)...)
	pub := e.of(t, acc.RequestID)
	if len(pub) != 1 || !pub[0].DryRun || pub[0].Attempt != 1 {
		t.Fatalf("dry run published %+v", pub)
	}
	if st := e.status(t, acc.RequestID, acmeToken); st.State != intake.StatePreviewed || st.ReceiptID != "" {
		t.Errorf("dry run state %s", st.State)
	}
	code, b := e.do(t, "POST", "/v1/erasures/"+acc.RequestID+"/confirm", "", bearer(acmeToken)...)
	if code != http.StatusOK {
		t.Fatalf("confirm: %d %s", code, b)
	}
	pub = e.of(t, acc.RequestID)
	if len(pub) != 2 || pub[1].DryRun || pub[1].Attempt != 2 {
		t.Fatalf("confirmed: %+v", pub)
	}
	if ids := opened(t, e.svc.Sealer, pub[1]); ids.SubjectID != subj {
		t.Errorf("confirmed erasure's subject %q", ids.SubjectID)
	}
	if st := e.status(t, acc.RequestID, acmeToken); st.State != intake.StatePending {
		t.Errorf("confirmed state %s", st.State)
	}
	if code, _ := e.do(t, "POST", "/v1/erasures/"+acc.RequestID+"/confirm", "", bearer(acmeToken)...); code != http.StatusConflict {
		t.Errorf("second confirm: %d, want 409", code)
	}
}

// SCHEDULED → CANCELLED within the window: nothing is published, the key is destroyed,
// the audit trail records who cancelled, and the due sweep releases nothing.
func TestCancelWithinWindow(t *testing.T) {
	e, _ := gated(t, intake.Windows{"GDPR": time.Hour})
	acc := e.submit(t, body(t, nil), bearer(acmeToken)...)
	st := e.status(t, acc.RequestID, acmeToken)
	if st.State != intake.StateScheduled || !st.Workflow.ExecuteAt.Equal(start.Add(time.Hour)) {
		t.Fatalf("state %s workflow %+v", st.State, st.Workflow)
	}
	if n := len(e.of(t, acc.RequestID)); n != 0 {
		t.Fatalf("a scheduled request was published %d times", n)
	}
	if code, _ := e.do(t, "POST", "/v1/erasures/"+acc.RequestID+"/cancel", "", bearer(globexToken)...); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("another tenant's cancel: %d", code)
	}
	e.setNow(start.Add(59 * time.Minute))
	code, b := e.do(t, "POST", "/v1/erasures/"+acc.RequestID+"/cancel", "", bearer(acmeToken)...)
	if code != http.StatusOK || decode[intake.Status](t, b).State != intake.StateCancelled {
		t.Fatalf("cancel: %d %s", code, b)
	}
	e.setNow(start.Add(2 * time.Hour))
	if err := e.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.of(t, acc.RequestID)); n != 0 {
		t.Errorf("a cancelled request was published %d times", n)
	}
	evs, _ := e.store.Events(context.Background(), "acme", acc.SubjectHash)
	if len(evs) != 1 || evs[0].Type != "erasure_cancelled" || evs[0].Actor != "shopbot" {
		t.Errorf("audit trail %+v", evs)
	}
	if _, err := e.svc.Sealer.Keys.Get(context.Background(), acc.RequestID); !errors.Is(err, envelope.ErrShredded) {
		t.Errorf("identifiers key of the cancelled request: %v, want shredded", err)
	}
}

// After the window the request runs as any other: the sweep publishes it (once, even
// after a restart of the intake over the same workflow file), and cancelling is 409.
// A crash while SCHEDULED loses nothing: the schedule is durable.
func TestWindowEndsAndSurvivesRestart(t *testing.T) {
	e, path := gated(t, intake.Windows{"tenant:acme": time.Minute})
	acc := e.submit(t, body(t, nil), bearer(acmeToken)...)
	// The intake crashes while the request is SCHEDULED; a new one opens the same files.
	restarted := *e.svc
	e.svc.Workflow.(*workflow.FileStore).Close() // a process that dies releases the store's lock
	restarted.Workflow = openWorkflow(t, path)
	e.svc = &restarted
	e.setNow(start.Add(30 * time.Second))
	if err := e.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.of(t, acc.RequestID)); n != 0 {
		t.Fatalf("published within the window: %d", n)
	}
	e.setNow(start.Add(time.Minute))
	for range 2 {
		if err := e.svc.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	pub := e.of(t, acc.RequestID)
	if len(pub) != 1 || pub[0].DryRun || opened(t, e.svc.Sealer, pub[0]).SubjectID != subj {
		t.Fatalf("released: %+v", pub)
	}
	rec, _ := e.svc.Workflow.Get(context.Background(), acc.RequestID)
	if rec.State != workflow.Released || rec.History[len(rec.History)-1].Action != workflow.Due {
		t.Errorf("record %+v", rec)
	}
	e.srv.Config.Handler = e.svc.Handler()
	if code, _ := e.do(t, "POST", "/v1/erasures/"+acc.RequestID+"/cancel", "", bearer(acmeToken)...); code != http.StatusConflict {
		t.Errorf("cancel after the window: %d, want 409", code)
	}
}

// AWAITING_APPROVAL: a TENANT request waits, unpublished, until a second principal with
// the approver role in its tenant approves; the submitter, a principal without the role
// and another tenant's approver cannot. It survives a restart; rejecting is final.
func TestApproval(t *testing.T) {
	e, path := gated(t, nil)
	offboard := `{"tenant_id": "acme", "scope": "TENANT", "regulation": "GDPR"}`
	acc := e.submit(t, offboard, bearer(dpo1Token)...)
	if st := e.status(t, acc.RequestID, acmeToken); st.State != intake.StateAwaitingApproval || !st.Workflow.NeedsApproval {
		t.Fatalf("state %s", st.State)
	}
	if n := len(e.of(t, acc.RequestID)); n != 0 {
		t.Fatalf("published before approval: %d", n)
	}
	for _, tc := range []struct {
		token string
		want  int
	}{{dpo1Token, http.StatusForbidden}, {acmeToken, http.StatusForbidden}, {dpoGlobex, http.StatusForbidden}} {
		if code, b := e.do(t, "POST", "/v1/erasures/"+acc.RequestID+"/approve", "", bearer(tc.token)...); code != tc.want {
			t.Errorf("approve with %s: %d %s, want %d", tc.token[:8], code, b, tc.want)
		}
	}
	// The aggregator and the intake restart while the request awaits approval.
	restarted := *e.svc
	e.svc.Workflow.(*workflow.FileStore).Close() // a process that dies releases the store's lock
	restarted.Workflow = openWorkflow(t, path)
	e.svc = &restarted
	e.srv.Config.Handler = e.svc.Handler()
	code, b := e.do(t, "POST", "/v1/erasures/"+acc.RequestID+"/approve", "", bearer(dpo2Token)...)
	if code != http.StatusOK {
		t.Fatalf("approve by the second person: %d %s", code, b)
	}
	pub := e.of(t, acc.RequestID)
	if len(pub) != 1 || pub[0].Scope != event.ScopeTenant {
		t.Fatalf("approved: %+v", pub)
	}
	if st := e.status(t, acc.RequestID, acmeToken); st.State != intake.StatePending || st.Workflow.ApprovedBy != "dpo-2" {
		t.Errorf("after approval: %s %+v", st.State, st.Workflow)
	}

	rej := e.submit(t, offboard, bearer(dpo1Token)...)
	if code, b := e.do(t, "POST", "/v1/erasures/"+rej.RequestID+"/reject", "", bearer(dpo2Token)...); code != http.StatusOK || decode[intake.Status](t, b).State != intake.StateRejected {
		t.Fatalf("reject: %d %s", code, b)
	}
	if code, _ := e.do(t, "POST", "/v1/erasures/"+rej.RequestID+"/approve", "", bearer(dpo2Token)...); code != http.StatusConflict {
		t.Errorf("approve after reject: %d, want 409", code)
	}
	if n := len(e.of(t, rej.RequestID)); n != 0 {
		t.Errorf("a rejected request was published %d times", n)
	}
	evs, _ := e.store.Events(context.Background(), "acme", rej.SubjectHash)
	types := []string{}
	for _, ev := range evs {
		types = append(types, ev.Type+"/"+ev.Actor)
	}
	if s := strings.Join(types, ","); !strings.Contains(s, "erasure_rejected/dpo-2") || !strings.Contains(s, "erasure_approved/dpo-2") {
		t.Errorf("audit trail %s", s)
	}
}

// A hold of a store exempts it from requests published while it holds; releasing it
// re-drives the held store of every request whose report was EXEMPT under it.
func TestHoldExemptsAndReleaseRedrives(t *testing.T) {
	e, _ := gated(t, nil)
	hold := `{"tenant_id": "acme", "subject_id": "` + subj + `", "store": "dataset", "reason": "litigation 2026-17", "legal_basis": "GDPR Art. 17(3)(e)"}`
	if code, _ := e.do(t, "POST", "/v1/holds", hold, bearer(acmeToken)...); code != http.StatusForbidden {
		t.Errorf("a hold by the app token, without the holds role: %d, want 403", code)
	}
	code, b := e.do(t, "POST", "/v1/holds", hold, bearer(dpo1Token)...)
	if code != http.StatusCreated {
		t.Fatalf("hold: %d %s", code, b)
	}
	h := decode[workflow.Hold](t, b)
	if h.SubjectHash != e.key.Pseudonym("acme", subj) || h.Store != "dataset" {
		t.Errorf("hold %+v", h)
	}
	if code, _ := e.do(t, "POST", "/v1/holds", `{"tenant_id": "acme", "store": "dataset", "legal_basis": "x"}`, bearer(globexToken)...); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("another tenant's hold: %d", code)
	}
	acc := e.submit(t, body(t, nil), bearer(acmeToken)...)
	other := e.submit(t, body(t, func(m map[string]any) { m["subject_id"] = "bob" }), bearer(acmeToken)...)
	pub := e.of(t, acc.RequestID)
	if len(pub) != 1 || len(pub[0].Exempt) != 1 || pub[0].Exempt[0].Store != "dataset" || pub[0].Exempt[0].LegalBasis != "GDPR Art. 17(3)(e)" {
		t.Fatalf("held request published %+v", pub)
	}
	if p := e.of(t, other.RequestID); len(p[0].Exempt) != 0 {
		t.Errorf("another subject's request exempts %+v", p[0].Exempt)
	}
	// The dataset deleter reports the store EXEMPT, as pkg/worker does.
	if err := e.store.PutReport(context.Background(), event.StoreDone{RequestID: acc.RequestID, TenantID: "acme", Store: "dataset", Kind: "dataset",
		Status: event.StatusExempt, Attempt: 1, Verification: event.Verification{Method: "legal hold: GDPR Art. 17(3)(e) (hold " + h.ID + ")"}}); err != nil {
		t.Fatal(err)
	}
	if code, _ := e.do(t, "POST", "/v1/holds/"+h.ID+"/release", "", bearer(acmeToken)...); code != http.StatusForbidden {
		t.Errorf("a release by the app token, without the holds role: %d, want 403", code)
	}
	code, b = e.do(t, "POST", "/v1/holds/"+h.ID+"/release", "", bearer(dpo1Token)...)
	if code != http.StatusOK {
		t.Fatalf("release: %d %s", code, b)
	}
	if rel := decode[intake.ReleaseResponse](t, b); len(rel.Redriven) != 1 || rel.Redriven[0] != acc.RequestID {
		t.Errorf("release %+v", rel)
	}
	pub = e.of(t, acc.RequestID)
	if len(pub) != 2 || len(pub[1].OnlyStores) != 1 || pub[1].OnlyStores[0] != "dataset" || len(pub[1].Exempt) != 0 || pub[1].Attempt != 2 {
		t.Fatalf("re-drive after release %+v", pub)
	}
	if opened(t, e.svc.Sealer, pub[1]).SubjectID != subj {
		t.Error("re-drive lost the identifiers")
	}
	if code, _ := e.do(t, "POST", "/v1/holds/"+h.ID+"/release", "", bearer(dpo1Token)...); code != http.StatusConflict {
		t.Errorf("second release: %d, want 409", code)
	}
}

// A hold placed while a request has no receipt (INCOMPLETE or FAILED) binds its
// re-drive: the held store is exempt, and a re-drive naming only held stores is refused.
func TestHoldBindsTheRedriveOfAnIncompleteRequest(t *testing.T) {
	e, _ := gated(t, nil)
	acc := e.submit(t, body(t, nil), bearer(acmeToken)...)
	if pub := e.of(t, acc.RequestID); len(pub) != 1 || len(pub[0].Exempt) != 0 {
		t.Fatalf("first attempt published %+v", pub)
	}
	hold := `{"tenant_id": "acme", "subject_id": "` + subj + `", "store": "dataset", "legal_basis": "GDPR Art. 17(3)(e)"}`
	if code, b := e.do(t, "POST", "/v1/holds", hold, bearer(dpo1Token)...); code != http.StatusCreated {
		t.Fatalf("hold: %d %s", code, b)
	}
	retry := func(stores string) (int, []byte) {
		return e.do(t, "POST", "/v1/erasures/"+acc.RequestID+"/retry", `{"subject_id":"`+subj+`","stores":`+stores+`}`, bearer(acmeToken)...)
	}
	if code, b := retry(`["dataset"]`); code != http.StatusConflict {
		t.Errorf("a re-drive of the held store alone: %d %s, want 409", code, b)
	}
	if code, b := retry(`["dataset","qdrant"]`); code != http.StatusAccepted {
		t.Fatalf("re-drive: %d %s", code, b)
	}
	pub := e.of(t, acc.RequestID)
	if len(pub) != 2 || pub[1].Attempt != 2 || len(pub[1].Exempt) != 1 || pub[1].Exempt[0].Store != "dataset" {
		t.Fatalf("re-drive published %+v; want attempt 2 with dataset exempt", pub)
	}
}

// Two replicas sharing the workflow store sweep the same due request: it is published
// once. A release whose publish fails stays RELEASED and unpublished, and a later sweep
// publishes it.
func TestReplicasReleaseOnce(t *testing.T) {
	e, _ := gated(t, intake.Windows{"GDPR": time.Minute})
	acc := e.submit(t, body(t, nil), bearer(acmeToken)...)
	replica := *e.svc
	e.setNow(start.Add(time.Minute))
	var wg sync.WaitGroup
	for _, svc := range []*intake.Service{e.svc, &replica} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := svc.Sweep(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if pub := e.of(t, acc.RequestID); len(pub) != 1 {
		t.Fatalf("published %d times, want once", len(pub))
	}

	second := e.submit(t, body(t, func(m map[string]any) { m["subject_id"] = "bob" }), bearer(acmeToken)...)
	e.setNow(start.Add(2 * time.Minute))
	down := *e.svc
	down.Producer = failingProducer{}
	if err := down.Sweep(context.Background()); err == nil {
		t.Fatal("a sweep whose publish failed reported no error")
	}
	rec, err := e.svc.Workflow.Get(context.Background(), second.RequestID)
	if err != nil || rec.State != workflow.Released || !rec.Unpublished {
		t.Fatalf("after a failed publish: %+v %v", rec, err)
	}
	if err := e.svc.Sweep(context.Background()); err != nil || len(e.of(t, second.RequestID)) != 0 {
		t.Fatalf("published within the grace period (%v)", err)
	}
	e.setNow(start.Add(3 * time.Minute))
	if err := e.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if pub := e.of(t, second.RequestID); len(pub) != 1 || pub[0].DryRun {
		t.Fatalf("republished: %+v", pub)
	}
	if rec, _ := e.svc.Workflow.Get(context.Background(), second.RequestID); rec.Unpublished {
		t.Error("still marked unpublished")
	}
}
