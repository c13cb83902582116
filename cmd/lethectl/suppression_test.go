package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/intake"
)

// securedSystem starts a system of its own that authenticates callers, stopped when t
// ends, with an operator's wildcard token and a token of tenant acme.
func securedSystem(t *testing.T) (sys *embedded.System, opsToken, acmeToken string) {
	t.Helper()
	opsToken, opsHash := auth.NewToken()
	acmeToken, acmeHash := auth.NewToken()
	authn, err := auth.New(auth.Config{Tokens: []auth.Token{
		{Name: "ops", SHA256: opsHash, Tenants: []string{auth.Wildcard}},
		{Name: "acme-privacy", SHA256: acmeHash, Tenants: []string{"acme"}, Roles: []string{auth.RoleLift}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sys, err = embedded.Start(context.Background(), embedded.Options{Key: testKey(), DataDir: t.TempDir(), Auth: authn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })
	return sys, opsToken, acmeToken
}

// An erased subject and its session are reported suppressed (exit 4) and a stranger not
// (exit 0); the ids never appear in the output; a lift needs the tenant's own token and
// makes the check pass again.
func TestSuppressionCommands(t *testing.T) {
	secured, opsToken, acmeToken := securedSystem(t)
	at := func(token string, args ...string) result {
		t.Helper()
		r := invocation{env: map[string]string{"LETHE_TOKEN": token}, sys: secured}.run(t, args...)
		for _, id := range []string{"cust-erased-42", "sess-erased-0001", "cust-stranger-7"} {
			if strings.Contains(r.stdout+r.stderr, id) {
				t.Errorf("output names %q: %s", id, r)
			}
		}
		return r
	}
	wantCode(t, at(acmeToken, "submit", "--tenant", "acme", "--subject", "cust-erased-42", "--session", "sess-erased-0001", "--wait"), exitOK)

	// The entries follow the receipt's write by a moment: --wait returns on the receipt.
	var r result
	var got intake.CheckResponse
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r = at(acmeToken, "suppression", "check", "--tenant", "acme", "--subject", "cust-erased-42", "--subject", "cust-stranger-7", "--session", "sess-erased-0001", "-o", "json")
		decode(t, r, &got)
		if len(got.Sessions) == 1 && got.Sessions[0].Suppressed || time.Now().After(deadline) {
			break
		}
	}
	wantCode(t, r, exitProblem)
	if len(got.Subjects) != 2 || !got.Subjects[0].Suppressed || got.Subjects[1].Suppressed || !got.Sessions[0].Suppressed {
		t.Errorf("check: %+v", got)
	}
	r = at(acmeToken, "suppression", "check", "--tenant", "acme", "--subject", "cust-stranger-7")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "not suppressed") {
		t.Errorf("table of a stranger: %s", r)
	}
	wantCode(t, at(acmeToken, "suppression", "check", "--tenant", "acme"), exitUsage)

	lift := []string{"suppression", "lift", "--tenant", "acme", "--subject", "cust-erased-42", "--reason", "consent record CR-1"}
	r = at(opsToken, lift...)
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "403") {
		t.Errorf("lift with an operator's token: %s", r)
	}
	r = at(acmeToken, lift...)
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, intake.LiftLifted) {
		t.Errorf("lift: %s", r)
	}
	r = at(acmeToken, "suppression", "check", "--tenant", "acme", "--subject", "cust-erased-42")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "lifted by consent") {
		t.Errorf("check after the lift: %s", r)
	}
}
