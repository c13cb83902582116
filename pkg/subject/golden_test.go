package subject

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// goldenPseudonym is one case of testdata/pseudonyms.json.
type goldenPseudonym struct {
	KeyID            string `json:"key_id"`
	Secret           string `json:"secret"`
	Tenant           string `json:"tenant"`
	ID               string `json:"id"`
	Pseudonym        string `json:"pseudonym"`
	SessionPseudonym string `json:"session_pseudonym"`
}

// TestGoldenPseudonyms pins subject and session pseudonyms of ids that exercise the
// length prefixes (multi-byte characters, ids longer than 127 bytes, delimiters and glob
// characters): testdata/pseudonyms.json, which the Python client (clients/python)
// recomputes with an implementation of its own.
func TestGoldenPseudonyms(t *testing.T) {
	secrets := map[string]string{"k1": "embedded-test-key-0123456789abcdef", "k2": strings.Repeat("s3cr3t-", 9)}
	cases := []struct{ key, tenant, id string }{
		{"k1", "acme", "cust-42"},
		{"k1", "vastralaya", "anna.schmidt@example.de"},
		{"k1", "acme", "sess-2026-11-a1"},
		{"k1", "a", "Zoë Ünal 山田"},
		{"k1", "tenant_x-1", "id:with:colons*and?[glob]"},
		{"k1", "acme", " cust-42"},
		{"k2", "acme", "cust-42"},
		{"k2", "acme", strings.Repeat("é", 100)},
		{"k2", strings.Repeat("t", 63), strings.Repeat("x", 256)},
	}
	var got []goldenPseudonym
	for _, c := range cases {
		k, err := NewKey(c.key, []byte(secrets[c.key]))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, goldenPseudonym{KeyID: c.key, Secret: secrets[c.key], Tenant: c.tenant, ID: c.id,
			Pseudonym: k.Pseudonym(c.tenant, c.id), SessionPseudonym: k.SessionPseudonym(c.tenant, c.id)})
	}
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	path := filepath.Join("testdata", "pseudonyms.json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(b) {
		t.Errorf("%s differs from the pseudonyms computed now: the pseudonym's form changed (run with -update only if intended)", path)
	}
}
