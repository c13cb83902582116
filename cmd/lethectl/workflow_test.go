package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// submit --dry-run counts and deletes nothing; confirm runs it; a LGPD request waits out
// its window and cancel stops it; a TENANT request waits for approve by a second approver;
// hold places, lists and releases a hold. No output names the subject.
func TestWorkflowCommands(t *testing.T) {
	opsToken, opsHash := auth.NewToken()
	dpoToken, dpoHash := auth.NewToken()
	authn, err := auth.New(auth.Config{Tokens: []auth.Token{
		{Name: "ops", SHA256: opsHash, Tenants: []string{"acme"}, Roles: []string{auth.RoleHolds}},
		{Name: "dpo", SHA256: dpoHash, Tenants: []string{"acme"}, Roles: []string{auth.RoleApprover}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := embedded.DefaultConfig()
	cfg.Intake.CancelWindow = intake.Windows{"LGPD": time.Hour}
	sys, err := embedded.Start(context.Background(), embedded.Options{Key: testKey(), DataDir: t.TempDir(), Auth: authn, Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })
	as := func(token string, args ...string) result {
		t.Helper()
		r := invocation{env: map[string]string{"LETHE_TOKEN": token}, sys: sys}.run(t, args...)
		if strings.Contains(r.stdout+r.stderr, "cust-wf-42") {
			t.Errorf("output names the subject: %s", r)
		}
		return r
	}
	var st intake.Status
	r := as(opsToken, "submit", "--tenant", "acme", "--subject", "cust-wf-42", "--dry-run", "--wait", "-o", "json")
	wantCode(t, r, exitOK)
	decode(t, r, &st)
	if st.State != intake.StatePreviewed {
		t.Fatalf("dry run: %+v", st)
	}
	for _, s := range st.Stores {
		if !s.DryRun {
			t.Errorf("store %s did not count: %+v", s.Store, s)
		}
	}
	wantCode(t, as(opsToken, "confirm", st.RequestID), exitOK)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		decode(t, as(opsToken, "status", st.RequestID, "-o", "json"), &st)
		if st.State == intake.StateComplete || time.Now().After(deadline) {
			break
		}
	}
	if st.State != intake.StateComplete {
		t.Fatalf("confirmed dry run: %s", st.State)
	}

	r = as(opsToken, "submit", "--tenant", "acme", "--subject", "cust-wf-42", "--regulation", "LGPD", "-o", "json")
	var acc intake.Accepted
	decode(t, r, &acc)
	if acc.State != intake.StateScheduled {
		t.Fatalf("LGPD request: %+v", acc)
	}
	r = as(opsToken, "cancel", acc.RequestID, "-o", "json")
	wantCode(t, r, exitOK)
	decode(t, r, &st)
	if st.State != intake.StateCancelled {
		t.Errorf("after cancel: %s", st.State)
	}

	r = as(opsToken, "submit", "--tenant", "acme", "--scope", "TENANT", "-o", "json")
	decode(t, r, &acc)
	if acc.State != intake.StateAwaitingApproval {
		t.Fatalf("TENANT request: %+v", acc)
	}
	wantCode(t, as(opsToken, "approve", acc.RequestID), exitError) // 403: no approver role
	wantCode(t, as(dpoToken, "approve", acc.RequestID), exitOK)

	r = as(opsToken, "hold", "--tenant", "acme", "--subject", "cust-wf-42", "--store", "dataset", "--basis", "litigation", "-o", "json")
	wantCode(t, r, exitOK)
	var h workflow.Hold
	decode(t, r, &h)
	r = as(opsToken, "hold", "--list", "--tenant", "acme")
	if !strings.Contains(r.stdout, h.ID) || !strings.Contains(r.stdout, "active") {
		t.Errorf("hold --list: %s", r)
	}
	wantCode(t, as(opsToken, "hold", "--release", h.ID), exitOK)
	wantCode(t, as(opsToken, "hold", "--release", "hold_nope"), exitNotFound)
}
