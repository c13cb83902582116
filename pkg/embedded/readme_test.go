package embedded_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/event"
)

// The README's kcat line works as written against the local stack: run with only the
// broker address replaced (make serve's is 127.0.0.1:9092), its request reaches a
// COMPLETE receipt.
func TestReadmeKcatLine(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed (Debian package kcat)")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "echo '") && strings.Contains(l, "| kcat -P -b 127.0.0.1:9092 -t erasure.intake") {
			line = l
			break
		}
	}
	if line == "" {
		t.Fatal("README has no kcat line producing to erasure.intake on 127.0.0.1:9092")
	}
	sys := start(t)
	cmd := exec.Command("bash", "-c", strings.ReplaceAll(line, "127.0.0.1:9092", sys.Stack.Addrs.Kafka))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	id := waitRequest(t, sys, "vastralaya")
	if r := waitReceipt(t, sys, id); r.Status != event.ReceiptComplete {
		t.Fatalf("receipt %s, want COMPLETE", r.Status)
	}
}
