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

// goldenVerdict is one case of testdata/validation.json: whether ValidateTenant (for a
// tenant) or ValidateID (for an id) accepts value.
type goldenVerdict struct {
	Kind  string `json:"kind"` // tenant or id
	Value string `json:"value"`
	Valid bool   `json:"valid"`
}

// TestGoldenValidation pins the verdicts of ValidateTenant and ValidateID on the edges of
// their rules (blank ids of every kind of white space and invisible character, control
// characters, lengths in bytes, tenant characters): testdata/validation.json, which the
// Python client checks its own validation against.
func TestGoldenValidation(t *testing.T) {
	ids := []string{
		"cust-42", " alice", "alice ", "", " ", "\t", "\u00a0", "\u0085", "\u1680", "\u2000", "\u200a",
		"\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff",
		"\u00ad", "\u180e", " \u200b\u00a0 ", "\u3164", "\u115f", "a\u0000b", "a\nb", "a\u007fb", "a\u0085b",
		"a\u009fb", "a\u200bb", "*", "?", "[x]", "a:b", "{subject}", "山田", "😀",
		strings.Repeat("x", 256), strings.Repeat("x", 257), strings.Repeat("é", 128), strings.Repeat("é", 128) + "x",
		strings.Repeat("😀", 64), strings.Repeat("😀", 64) + "x",
	}
	tenants := []string{"acme", "a", "0acme", "acme_eu-1", "", "Acme", "-acme", "_acme", "acme!", "acme tenant", "acmé",
		strings.Repeat("a", 63), strings.Repeat("a", 64)}
	var got []goldenVerdict
	for _, v := range tenants {
		got = append(got, goldenVerdict{Kind: "tenant", Value: v, Valid: ValidateTenant(v) == nil})
	}
	for _, v := range ids {
		got = append(got, goldenVerdict{Kind: "id", Value: v, Valid: ValidateID("subject_id", v) == nil})
	}
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	path := filepath.Join("testdata", "validation.json")
	if *update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(b) {
		t.Errorf("%s differs from the verdicts now: the rules changed (run with -update only if intended)", path)
	}
}
