package embedded_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// The whole system crashes (stops) while one request is SCHEDULED and another is
// AWAITING_APPROVAL; started again on the same data directory, the first runs when its
// window ends and the second still waits, is approved by a second person and runs: both
// end with one receipt.
func TestGatesSurviveARestart(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	key, _ := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
	secret := make([]byte, envelope.KeySize)
	rand.Read(secret)
	kek, err := envelope.NewKEK("kek1", map[string][]byte{"kek1": secret})
	if err != nil {
		t.Fatal(err)
	}
	authn, err := auth.New(auth.Config{Tokens: []auth.Token{
		{Name: "ops", SHA256: auth.HashToken("lt_ops"), Tenants: []string{"acme"}},
		{Name: "dpo", SHA256: auth.HashToken("lt_dpo"), Tenants: []string{"acme"}, Roles: []string{auth.RoleApprover}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	start := func() *embedded.System {
		cfg := embedded.DefaultConfig()
		cfg.Intake.CancelWindow = intake.Windows{"LGPD": 2 * time.Second}
		sys, err := embedded.Start(ctx, embedded.Options{Key: key, DataDir: dataDir, KEK: kek, Auth: authn, Config: &cfg})
		if err != nil {
			t.Fatal(err)
		}
		return sys
	}
	ops := auth.Principal{Name: "ops", Tenants: []string{"acme"}}
	sys := start()
	sched, err := sys.Intake.Submit(ctx, event.IntakeRequest{TenantID: "acme", SubjectID: "cust-1", Regulation: "LGPD", Source: ops.Name})
	if err != nil {
		t.Fatal(err)
	}
	off, err := sys.Intake.Submit(ctx, event.IntakeRequest{TenantID: "acme", Scope: event.ScopeTenant, Regulation: "GDPR", Source: ops.Name})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{sched.RequestID: intake.StateScheduled, off.RequestID: intake.StateAwaitingApproval} {
		if st, err := sys.Intake.Status(ctx, id); err != nil || st.State != want {
			t.Fatalf("%s before the crash: %s %v, want %s", id, st.State, err, want)
		}
	}
	sys.Stop()

	sys = start()
	defer sys.Stop()
	if st, _ := sys.Intake.Status(ctx, off.RequestID); st.State != intake.StateAwaitingApproval {
		t.Fatalf("after the restart the offboarding is %s", st.State)
	}
	if _, err := sys.Intake.Decide(ctx, auth.Principal{Name: "dpo", Tenants: []string{"acme"}, Roles: []string{auth.RoleApprover}}, off.RequestID, true); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{sched.RequestID, off.RequestID} {
		var st intake.Status
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if st, err = sys.Intake.Status(ctx, id); err == nil && st.State == intake.StateComplete {
				break
			}
		}
		if st.State != intake.StateComplete {
			t.Errorf("%s after the restart: %s %v", id, st.State, err)
		}
	}
}
