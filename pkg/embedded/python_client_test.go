package embedded_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// python returns a Python interpreter that imports confluent_kafka (Debian's
// python3-confluent-kafka installs it for /usr/bin/python3).
func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import confluent_kafka").Run() == nil {
			return p
		}
	}
	t.Fatal("no python3 with confluent_kafka (install python3-confluent-kafka)")
	return ""
}

// The Python example for upstream apps, on confluent_kafka (librdkafka), produces JSON
// intake records with the authorization header to the embedded broker's port and waits
// for their receipts over HTTP: both requests reach COMPLETE receipts, which hold no raw
// identifier.
func TestPythonConfluentKafkaProducer(t *testing.T) {
	py := python(t)
	key, err := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	token, hash := auth.NewToken()
	authn, err := auth.New(auth.Config{Tokens: []auth.Token{{Name: "ragbot", SHA256: hash, Tenants: []string{"pyapp"}}}})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := embedded.Start(context.Background(), embedded.Options{Key: key, DataDir: t.TempDir(), Auth: authn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("..", "..", "examples", "python", "produce_erasure.py"),
		"--brokers", sys.Stack.Addrs.Kafka, "--intake", sys.BaseURL, "--token", token,
		"--tenant", "pyapp", "--subject", "py-cust-1@example.com", "--subject", "py-cust-2", "--timeout", "60")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("produce_erasure.py: %v\nstderr: %s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("receipts printed: %q, want 2", stdout.String())
	}
	for _, l := range lines {
		var r event.Receipt
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.Status != event.ReceiptComplete || r.TenantID != "pyapp" {
			t.Errorf("receipt %s", l)
		}
		if strings.Contains(l, "py-cust") {
			t.Errorf("receipt holds a raw subject id: %s", l)
		}
		if _, err := sys.Stack.Audit.GetReceipt(context.Background(), r.RequestID); err != nil {
			t.Errorf("receipt of %s not in the audit table: %v", r.RequestID, err)
		}
	}
	reqs, err := sys.Stack.Audit.ListRequests(context.Background(), "pyapp")
	if err != nil || len(reqs) != 2 {
		t.Fatalf("requests of pyapp: %d, %v; want 2", len(reqs), err)
	}
}
