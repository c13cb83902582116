package webhookstore

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/examples/webhook-receiver/receiver"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// workedExample reads the "key: value" lines of the worked example in the contract.
func workedExample(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/webhook-contract.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "## Worked example")
	_, block, ok2 := strings.Cut(rest, "```\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/webhook-contract.md has no worked example block")
	}
	ex := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		k, v, _ := strings.Cut(line, ":")
		ex[k] = strings.TrimSpace(v)
	}
	return ex
}

// TestWorkedExample: the contract's worked example is what Lethe sends and signs, and the
// reference receiver accepts it.
func TestWorkedExample(t *testing.T) {
	ex := workedExample(t)
	secret := []byte(ex["secret"])
	ts, err := strconv.ParseInt(ex["timestamp"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	st := inventory.Entry{Name: "embeddings-vendor", Kind: Kind, Locators: inventory.Locators{"url": "https://erasure.vendor.example/lethe/erasures", "secret_env": "UNUSED"}}
	l, err := LocatorsOf(st)
	if err != nil {
		t.Fatal(err)
	}
	s := New(nil)
	s.newID = func() string { return "lethe-5f0c6a1e9b7d4c2a8e3f1b0d2c4a6e8f" }
	body, _, err := s.body(st, l, deletion.Subject{Tenant: "acme", ID: "cust-42", Hash: "h", Sessions: []string{"s1"}}, "erase")
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != ex["body"] {
		t.Errorf("Lethe sends\n%s\nthe contract's example says\n%s", body, ex["body"])
	}
	if got := Sign(secret, ts, []byte(ex["body"])); got != ex["signature"] {
		t.Errorf("Sign = %s, the example says %s", got, ex["signature"])
	}
	if got := receiver.Sign(secret, ex["timestamp"], []byte(ex["body"])); got != ex["signature"] {
		t.Errorf("receiver.Sign = %s, the example says %s", got, ex["signature"])
	}
	pts, _ := strconv.ParseInt(ex["poll timestamp"], 10, 64)
	if got := Sign(secret, pts, []byte(ex["poll target"])); got != ex["poll signature"] {
		t.Errorf("poll: Sign = %s, the example says %s", got, ex["poll signature"])
	}
	if _, err := receiver.CheckSignature([][]byte{secret}, ex["timestamp"], ex["signature"], []byte(ex["body"]), time.Unix(ts, 0), time.Minute); err != nil {
		t.Errorf("the receiver refuses the example: %v", err)
	}
}
