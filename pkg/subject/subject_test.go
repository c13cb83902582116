package subject

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func testKey(t *testing.T) Key {
	t.Helper()
	k, err := NewKey("k1", []byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestNewKeyRejectsShortSecrets(t *testing.T) {
	for _, n := range []int{0, 1, 31} {
		if _, err := NewKey("k", make([]byte, n)); err == nil {
			t.Errorf("secret of %d bytes accepted", n)
		}
	}
	if _, err := NewKey("", make([]byte, 32)); err == nil {
		t.Error("empty key id accepted")
	}
}

func TestPseudonymIsKeyedAndTenantScoped(t *testing.T) {
	k := testKey(t)
	k2, _ := NewKey("k2", []byte(strings.Repeat("t", 32)))
	a := k.Pseudonym("shop", "alice@example.com")
	if len(a) != 64 || strings.Contains(a, "alice") {
		t.Fatalf("pseudonym %q", a)
	}
	if a != k.Pseudonym("shop", "alice@example.com") {
		t.Error("not deterministic")
	}
	for name, other := range map[string]string{
		"other tenant":     k.Pseudonym("shop2", "alice@example.com"),
		"other key":        k2.Pseudonym("shop", "alice@example.com"),
		"shifted boundary": k.Pseudonym("sho", "palice@example.com"),
	} {
		if other == a {
			t.Errorf("%s gives the same pseudonym", name)
		}
	}
	if k.Fingerprint("a", "b", "c", "d") == k.Fingerprint("a", "b", "cd", "") {
		t.Error("fingerprint parts are ambiguous")
	}
}

func TestKeyNeverPrints(t *testing.T) {
	k := testKey(t)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k)} {
		if strings.Contains(s, "ssss") {
			t.Fatalf("secret printed: %s", s)
		}
	}
}

func TestKeyFromEnv(t *testing.T) {
	t.Setenv("LETHE_HMAC_KEY", "")
	t.Setenv("LETHE_HMAC_KEY_FILE", "")
	if _, err := KeyFromEnv(); err == nil {
		t.Error("missing key accepted")
	}
	t.Setenv("LETHE_HMAC_KEY", "short")
	if _, err := KeyFromEnv(); err == nil {
		t.Error("short key accepted")
	}
	t.Setenv("LETHE_HMAC_KEY", strings.Repeat("x", 32))
	t.Setenv("LETHE_HMAC_KEY_ID", "2026-11")
	k, err := KeyFromEnv()
	if err != nil || k.ID() != "2026-11" {
		t.Fatalf("KeyFromEnv = %v, %v", k, err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		tenant string
		ok     bool
	}{
		{"shop", true}, {"shop_2-b", true}, {"9lives", true},
		{"", false}, {"Shop", false}, {"../etc", false}, {"a/b", false}, {"{tenant}", false},
		{"a b", false}, {"-a", false}, {strings.Repeat("a", 64), false}, {"é", false},
	} {
		if err := ValidateTenant(tc.tenant); (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateTenant(%q) = %v", tc.tenant, err)
		}
	}
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"alice", true}, {"a*b?[c]\\:d", true}, {"Zoë", true}, {"用户", true}, {" alice ", true}, {"a b", true},
		{" ", false}, {"   ", false}, {"\u00a0", false}, {"\u3000\u2003", false}, {"\u200b", false}, {"\ufeff ", false},
		{"", false}, {"a\nb", false}, {"a\x00", false}, {"\xff", false}, {strings.Repeat("a", 257), false},
	} {
		if err := ValidateID("subject_id", tc.id); (err == nil) != tc.ok {
			t.Errorf("ValidateID(%q) = %v", tc.id, err)
		}
	}
}

// A session pseudonym is keyed, tenant-scoped, and never equal to the subject pseudonym
// or the query fingerprint of the same strings.
func TestSessionPseudonymIsDomainSeparated(t *testing.T) {
	k := testKey(t)
	other, err := NewKey("k2", []byte(strings.Repeat("t", 32)))
	if err != nil {
		t.Fatal(err)
	}
	s := k.SessionPseudonym("acme", "sess-1")
	for name, v := range map[string]string{
		"the subject pseudonym of the same id":   k.Pseudonym("acme", "sess-1"),
		"another tenant":                         k.SessionPseudonym("globex", "sess-1"),
		"another key":                            other.SessionPseudonym("acme", "sess-1"),
		"another session":                        k.SessionPseudonym("acme", "sess-2"),
		"a subject spelt as the label":           k.Pseudonym("session", "acme"),
		"a fingerprint with the label as tenant": k.Fingerprint("session", "acme", "sess-1", ""),
	} {
		if v == s {
			t.Errorf("session pseudonym equals %s", name)
		}
	}
	if s != k.SessionPseudonym("acme", "sess-1") || len(s) != 64 {
		t.Errorf("session pseudonym %q is not a stable 64-digit hex", s)
	}
}

// TestPseudonymIsHMACOfLengthPrefixedParts pins the construction: HMAC-SHA-256 over each
// part preceded by its length as a uvarint, computed here without the package's pooled states,
// and the same answer from concurrent callers sharing a copy of the key.
func TestPseudonymIsHMACOfLengthPrefixedParts(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	k, err := NewKey("k1", secret)
	if err != nil {
		t.Fatal(err)
	}
	want := func(parts ...string) string {
		m := hmac.New(sha256.New, secret)
		for _, p := range parts {
			m.Write(binary.AppendUvarint(nil, uint64(len(p))))
			m.Write([]byte(p))
		}
		return hex.EncodeToString(m.Sum(nil))
	}
	long := strings.Repeat("x", 300) // a two-byte length prefix
	cases := [][3]string{{"acme", "alice", ""}, {"acme", long, "s1"}, {"t", "", "é"}}
	var wg sync.WaitGroup
	for range 8 {
		copyOfKey := k
		wg.Go(func() {
			for range 50 {
				for _, c := range cases {
					if got := copyOfKey.Pseudonym(c[0], c[1]); got != want(c[0], c[1]) {
						t.Errorf("Pseudonym(%q, %.10q) = %s, want %s", c[0], c[1], got, want(c[0], c[1]))
					}
					if got := copyOfKey.SessionPseudonym(c[0], c[2]); got != want("session", c[0], c[2]) {
						t.Errorf("SessionPseudonym(%q, %q) = %s", c[0], c[2], got)
					}
					if got := copyOfKey.Fingerprint(c[0], c[1], c[2], "q"); got != want(c[0], c[1], c[2], "q") {
						t.Errorf("Fingerprint = %s", got)
					}
					if got, w := copyOfKey.PseudonymPrefix(c[0], c[1]), want(c[0], c[1])[:16]; fmt.Sprintf("%016x", got) != w {
						t.Errorf("PseudonymPrefix = %016x, want %s", got, w)
					}
					if got, w := copyOfKey.SessionPseudonymPrefix(c[0], c[2]), want("session", c[0], c[2])[:16]; fmt.Sprintf("%016x", got) != w {
						t.Errorf("SessionPseudonymPrefix = %016x, want %s", got, w)
					}
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkPseudonym(b *testing.B) {
	k, err := NewKey("k1", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		k.Pseudonym("acme", "customer-000123")
	}
}

func TestDeriveIsLabelledAndKeyed(t *testing.T) {
	k := testKey(t)
	k2, _ := NewKey("k2", []byte(strings.Repeat("t", 32)))
	a, b := k.Derive("lethe-a-v1"), k.Derive("lethe-b-v1")
	if len(a) != 32 || string(a) == string(b) || string(a) == string(k2.Derive("lethe-a-v1")) {
		t.Fatalf("derived keys %x %x", a, b)
	}
	if string(a) != string(k.Derive("lethe-a-v1")) {
		t.Error("derivation is not stable")
	}
	if strings.Contains(string(a), strings.Repeat("s", 8)) {
		t.Error("derived key holds the secret")
	}
}
