package integrity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/envconf"
)

var (
	secret1 = []byte("0123456789abcdef0123456789abcdef-one")
	secret2 = []byte("0123456789abcdef0123456789abcdef-two")
)

func ring(t *testing.T, current string, secrets map[string][]byte) *Ring {
	t.Helper()
	r, err := NewRing(current, secrets)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRingRotation(t *testing.T) {
	old := ring(t, "m1", map[string][]byte{"m1": secret1})
	rotated := ring(t, "m2", map[string][]byte{"m2": secret2, "m1": secret1})
	id, mac := old.Sum("use", []byte("data"))
	if id != "m1" {
		t.Fatalf("signed with %q, want m1", id)
	}
	if err := rotated.Check("use", id, []byte("data"), mac); err != nil {
		t.Errorf("the rotated ring does not verify a MAC of the old key: %v", err)
	}
	if id, _ := rotated.Sum("use", []byte("data")); id != "m2" {
		t.Errorf("the rotated ring signs with %q, want m2", id)
	}
	dropped := ring(t, "m2", map[string][]byte{"m2": secret2})
	if err := dropped.Check("use", id, []byte("data"), mac); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("a ring without the old key: %v, want ErrUnknownKey", err)
	}
}

func TestRingSeparatesUsesAndData(t *testing.T) {
	r := ring(t, "m1", map[string][]byte{"m1": secret1})
	id, mac := r.Sum("use-a", []byte("data"))
	for name, err := range map[string]error{
		"other use":  r.Check("use-b", id, []byte("data"), mac),
		"other data": r.Check("use-a", id, []byte("datA"), mac),
		"other key":  ring(t, "m1", map[string][]byte{"m1": secret2}).Check("use-a", id, []byte("data"), mac),
	} {
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: %v, want ErrMismatch", name, err)
		}
	}
	if err := r.Check("use-a", id, []byte("data"), mac); err != nil {
		t.Errorf("own MAC: %v", err)
	}
}

func TestNewRingRefusesWeakSecrets(t *testing.T) {
	for name, secrets := range map[string]map[string][]byte{
		"short":    {"m1": []byte("short")},
		"constant": {"m1": []byte(strings.Repeat("a", 40))},
		"bad id":   {"m/1": secret1},
	} {
		if _, err := NewRing(firstKey(secrets), secrets); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewRing("m2", map[string][]byte{"m1": secret1}); err == nil {
		t.Error("a current id outside the ring: accepted")
	}
}

func firstKey(m map[string][]byte) string {
	for k := range m {
		return k
	}
	return ""
}

func TestMACSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, append(secret2, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		env     map[string]string
		current string
		ids     string
		fail    string
	}{
		{name: "unset", env: map[string]string{}},
		{name: "value", env: map[string]string{"K": string(secret1)}, current: "mac1", ids: "[mac1]"},
		{name: "file and old", env: map[string]string{"K_FILE": file, "K_ID": "k2", "K_OLD": "k1:" + string(secret1)}, current: "k2", ids: "[k1 k2]"},
		{name: "both", env: map[string]string{"K": string(secret1), "K_FILE": file}, fail: "not both"},
		{name: "short", env: map[string]string{"K": "too-short"}, fail: "at least 32"},
		{name: "old malformed", env: map[string]string{"K": string(secret1), "K_OLD": "nocolon"}, fail: "LETHE_MAC_KEY_OLD entry 1"},
		{name: "old duplicate", env: map[string]string{"K": string(secret1), "K_OLD": "mac1:" + string(secret2)}, fail: "appears twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s MACSettings
			err := envconf.Load(&s, func(k string) string { return c.env[strings.Replace(k, "LETHE_MAC_KEY", "K", 1)] })
			var r *Ring
			if err == nil {
				r, err = s.Ring()
			}
			if c.fail != "" {
				if err == nil || !strings.Contains(err.Error(), c.fail) {
					t.Fatalf("error %v, want one saying %q", err, c.fail)
				}
				for _, s := range [][]byte{secret1, secret2} {
					if strings.Contains(err.Error(), string(s)) {
						t.Errorf("the error holds a secret: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.current == "" {
				if r != nil {
					t.Fatalf("ring %v from an empty environment", r)
				}
				return
			}
			if r.CurrentID() != c.current || fmt.Sprint(r.IDs()) != c.ids {
				t.Errorf("ring %v, want current %s of %s", r, c.current, c.ids)
			}
		})
	}
}

func TestRingNeverPrintsSecrets(t *testing.T) {
	r := ring(t, "m1", map[string][]byte{"m1": secret1})
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q", "%d"} {
		if out := fmt.Sprintf(verb, r); strings.Contains(out, string(secret1)) || strings.Contains(out, fmt.Sprintf("%x", secret1)) || !strings.Contains(out, "m1") {
			t.Errorf("%s prints %q", verb, out)
		}
	}
}
