package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/intake"
)

// TestIntakeWorkflowStore: every deployment's intake keeps the privacy team's workflow in
// the DynamoDB audit table, which its replicas share (no workflow file, which one process
// owns), and authenticates its callers, so TENANT requests wait for approval.
func TestIntakeWorkflowStore(t *testing.T) {
	composeIntake := map[string]string{}
	for k, v := range get(readYAML(t, composeFile)[0], "services", "intake", "environment").(map[string]any) {
		composeIntake[k] = fmt.Sprint(v)
	}
	o := build(t, "k8s/overlays/example")
	k8sIntake := podEnv(t, o, get(o["Deployment"]["lethe-intake"], "spec", "template", "spec", "containers", "0"))
	for name, env := range map[string]map[string]string{"compose": composeIntake, "k8s": k8sIntake} {
		if env["LETHE_AUDIT_TABLE"] == "" || env["LETHE_WORKFLOW_FILE"] != "" {
			t.Errorf("%s intake: LETHE_AUDIT_TABLE=%q LETHE_WORKFLOW_FILE=%q; want the audit table set and no file, so the workflow lives in the table",
				name, env["LETHE_AUDIT_TABLE"], env["LETHE_WORKFLOW_FILE"])
		}
		if env["LETHE_TOKENS"] == "" && env["LETHE_TOKENS_FILE"] == "" && env["LETHE_JWKS_URL"] == "" && env["LETHE_JWKS_FILE"] == "" {
			t.Errorf("%s intake: no credentials configured: approval needs authentication", name)
		}
	}
}

// checkApproval checks on running intakes what their configuration must yield: the
// start-up log of logs names the audit table as the workflow store with approval on, a
// TENANT request submitted to baseURL with token waits for approval, and every intake
// of replicas (its own URL included) reports it waiting.
func checkApproval(t *testing.T, logs *proc, table, baseURL, token, tenant string, replicas ...string) {
	t.Helper()
	var line struct {
		Msg      string `json:"msg"`
		Store    string `json:"store"`
		Approval bool   `json:"approval"`
	}
	found := false
	sc := bufio.NewScanner(strings.NewReader(logs.output()))
	for sc.Scan() && !found {
		found = json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "workflow"
	}
	if !found || line.Store != "dynamodb:"+table || !line.Approval {
		t.Errorf("%s start-up log: workflow %+v (found %v), want store dynamodb:%s with approval", logs.name, line, found, table)
	}

	body := fmt.Sprintf(`{"tenant_id":%q,"scope":"TENANT","regulation":"GDPR"}`, tenant)
	code, acc := submit(t, baseURL, token, "", body)
	if code != http.StatusAccepted || acc.State != intake.StateAwaitingApproval {
		t.Fatalf("TENANT request: %d, state %q; want 202 %s", code, acc.State, intake.StateAwaitingApproval)
	}
	for _, url := range replicas {
		var st intake.Status
		code := getJSON(t, url+"/v1/erasures/"+acc.RequestID, token, &st)
		if code != http.StatusOK || st.State != intake.StateAwaitingApproval || st.Workflow == nil || !st.Workflow.NeedsApproval {
			t.Errorf("%s: the TENANT request's status %d %+v, want %s", url, code, st, intake.StateAwaitingApproval)
		}
	}
}
