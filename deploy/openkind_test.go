package deploy

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	lethe "github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// TestNewKindNeedsNothingRebuilt is the acceptance test of open kinds: intake, aggregator
// and lethectl are built from this tree as they are, and the only new code is a deleter for
// kind "helpdesk", which no Lethe package defines (testdata/helpdesk-deleter: its store and
// a main that is one service.Deleter call). With an inventory naming that kind, lethectl
// validates it, and a request runs through the processes on a kfake broker and moto's DynamoDB to
// a COMPLETE receipt that lists the helpdesk store; only the subject's tickets are gone.
// The same deleter refuses to start on an entry of its kind with a misspelt locator.
func TestNewKindNeedsNothingRebuilt(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator),
		"./services/intake", "./services/aggregator", "./cmd/lethectl", "./deploy/testdata/helpdesk-deleter")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	tickets := t.TempDir()
	inv := filepath.Join(t.TempDir(), "inventory.yaml")
	writeFile(t, inv, fmt.Sprintf(`version: "open-kinds-1"
stores:
  - name: support-tickets
    kind: helpdesk
    locators:
      dir: %q
    physical: The tenant's file is replaced; older copies live in its backups.
`, tickets))
	writeFile(t, filepath.Join(tickets, "acme.json"), `[
  {"requester": "cust-1", "text": "my order never came"},
  {"requester": "cust-10", "text": "wrong size"},
  {"requester": "cust-1", "text": "refund please"}
]`)

	validate := exec.Command(filepath.Join(bin, "lethectl"), "inventory", "validate", inv)
	out, err := validate.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("support-tickets  helpdesk")) || !bytes.Contains(out, []byte("checked by each kind's deleter at start")) {
		t.Fatalf("lethectl inventory validate: %v\n%s", err, out)
	}

	s := &standIns{kafka: testenv.KafkaEmpty(t, 1, lethe.Topics...).Brokers, dynamo: testenv.DynamoDB(t)}
	s.createTables(t, "us-east-1", "lethe-audit", "lethe-keys")
	const token = "open-kinds-token"
	sum := sha256.Sum256([]byte(token))
	common := []string{
		"LETHE_KAFKA_BROKERS=" + strings.Join(s.kafka, ","),
		"LETHE_INVENTORY=" + inv,
		"LETHE_HMAC_KEY=" + hex.EncodeToString(randomBytes(t, 32)),
		"LETHE_KEK=" + base64.StdEncoding.EncodeToString(randomBytes(t, 32)),
		"LETHE_MAC_KEY=" + base64.StdEncoding.EncodeToString(randomBytes(t, 32)),
		"LETHE_AUDIT_TABLE=lethe-audit", "LETHE_KEYS_TABLE=lethe-keys", "LETHE_DYNAMODB_ENDPOINT=" + s.dynamo,
		"AWS_ACCESS_KEY_ID=contract", "AWS_SECRET_ACCESS_KEY=contract", "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true",
		"LETHE_LOG_LEVEL=info",
	}
	run := func(name string, extra ...string) (*proc, string) {
		metricsAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		env := append(append([]string{"LETHE_METRICS_ADDR=" + metricsAddr}, common...), extra...)
		return start(t, name, filepath.Join(bin, name), nil, env, writableDir(t), nil), metricsAddr
	}

	// A misspelt locator of its own kind: the deleter refuses to start and says where.
	badInv := filepath.Join(t.TempDir(), "inventory.yaml")
	writeFile(t, badInv, strings.Replace(readFile(t, inv), "dir:", "dri:", 1))
	bad, _ := run("helpdesk-deleter", "LETHE_INVENTORY="+badInv)
	select {
	case <-bad.done:
	case <-time.After(time.Minute):
		t.Fatal("helpdesk-deleter with a misspelt locator kept running")
	}
	if bad.cmd.ProcessState.Success() {
		t.Error("helpdesk-deleter with a misspelt locator exited 0")
	}
	if o := bad.output(); !strings.Contains(o, `inventory store "support-tickets" of kind "helpdesk"`) || !strings.Contains(o, `unknown field "dri"`) {
		t.Errorf("helpdesk-deleter with a misspelt locator said:\n%s", o)
	}

	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	in, inMetrics := run("intake", "LETHE_HTTP_ADDR="+httpAddr, "LETHE_TOKENS=acceptance:"+hex.EncodeToString(sum[:])+":acme")
	agg, aggMetrics := run("aggregator", "LETHE_CHAIN_KEY="+base64.StdEncoding.EncodeToString(randomBytes(t, 32)))
	del, delMetrics := run("helpdesk-deleter")
	in.waitHTTP(t, "http://"+inMetrics+"/readyz")
	agg.waitHTTP(t, "http://"+aggMetrics+"/readyz")
	del.waitHTTP(t, "http://"+delMetrics+"/readyz")

	code, acc := submit(t, "http://"+httpAddr, token, "", `{"tenant_id":"acme","subject_id":"cust-1","regulation":"GDPR"}`)
	if code != http.StatusAccepted {
		t.Fatalf("submit: %d", code)
	}
	st := awaitOutcome(t, "http://"+httpAddr, token, acc.RequestID)
	var rc event.Receipt
	if st.State != intake.StateComplete || getJSON(t, "http://"+httpAddr+"/v1/erasures/"+acc.RequestID+"/receipt", token, &rc) != http.StatusOK {
		t.Fatalf("status %+v: want COMPLETE with a receipt", st)
	}
	if rc.Status != event.ReceiptComplete || rc.InventoryVersion != "open-kinds-1" || len(rc.Stores) != 1 {
		t.Fatalf("receipt %+v", rc)
	}
	if s := rc.Stores[0]; s.Store != "support-tickets" || s.Kind != "helpdesk" || s.Status != event.StatusDeleted || s.Deleted != 2 || !s.Verification.Clean() {
		t.Errorf("receipt store %+v, want support-tickets (helpdesk) DELETED 2, clean", s)
	}
	var left []struct{ Requester string }
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(tickets, "acme.json"))), &left); err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Requester != "cust-10" {
		t.Errorf("tickets left %+v, want only cust-10's", left)
	}
}

// randomBytes returns n bytes from crypto/rand.
func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
