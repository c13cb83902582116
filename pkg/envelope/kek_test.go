package envelope_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/envelope"
)

func TestNewKEKValidates(t *testing.T) {
	good := bytes.Repeat([]byte{1, 2}, 16)
	for _, tc := range []struct {
		name    string
		current string
		keys    map[string][]byte
		ok      bool
	}{
		{"one key", "k1", map[string][]byte{"k1": good}, true},
		{"ring", "k2", map[string][]byte{"k1": good, "k2": bytes.Repeat([]byte{3, 4}, 16)}, true},
		{"current missing", "k2", map[string][]byte{"k1": good}, false},
		{"short", "k1", map[string][]byte{"k1": good[:31]}, false},
		{"long", "k1", map[string][]byte{"k1": append(bytes.Clone(good), 0)}, false},
		{"zeros", "k1", map[string][]byte{"k1": make([]byte, 32)}, false},
		{"weak old key", "k1", map[string][]byte{"k1": good, "k0": bytes.Repeat([]byte{'a'}, 32)}, false},
		{"empty id", "", map[string][]byte{"": good}, false},
		{"id with a colon", "k:1", map[string][]byte{"k:1": good}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := envelope.NewKEK(tc.current, tc.keys)
			if (err == nil) != tc.ok {
				t.Fatalf("NewKEK = %v, %v; want ok=%v", k, err, tc.ok)
			}
			if tc.ok && k.CurrentID() != tc.current {
				t.Fatalf("CurrentID = %q", k.CurrentID())
			}
		})
	}
}

func TestKEKFromEnv(t *testing.T) {
	k1, k0 := randKey(t), randKey(t)
	b64 := base64.StdEncoding.EncodeToString
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b64File := write("b64", []byte(b64(k1)+"\n"))
	rawFile := write("raw", k1)
	shortFile := write("short", []byte("0123456789"))
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantIDs []string // nil: an error is expected
		current string
	}{
		{"missing", nil, nil, ""},
		{"base64", map[string]string{"LETHE_KEK": b64(k1)}, []string{"kek1"}, "kek1"},
		{"url base64 unpadded", map[string]string{"LETHE_KEK": base64.RawURLEncoding.EncodeToString(k1), "LETHE_KEK_ID": "k7"}, []string{"k7"}, "k7"},
		{"short", map[string]string{"LETHE_KEK": b64(k1[:16])}, nil, ""},
		{"raw text", map[string]string{"LETHE_KEK": "correct horse battery staple!!!"}, nil, ""},
		{"constant", map[string]string{"LETHE_KEK": b64(make([]byte, 32))}, nil, ""},
		{"file base64", map[string]string{"LETHE_KEK_FILE": b64File}, []string{"kek1"}, "kek1"},
		{"file raw", map[string]string{"LETHE_KEK_FILE": rawFile}, []string{"kek1"}, "kek1"},
		{"file short", map[string]string{"LETHE_KEK_FILE": shortFile}, nil, ""},
		{"file missing", map[string]string{"LETHE_KEK_FILE": filepath.Join(dir, "nope")}, nil, ""},
		{"both", map[string]string{"LETHE_KEK": b64(k1), "LETHE_KEK_FILE": b64File}, nil, ""},
		{"rotation", map[string]string{"LETHE_KEK": b64(k1), "LETHE_KEK_ID": "k2", "LETHE_KEK_OLD": " k0:" + b64(k0) + " "}, []string{"k0", "k2"}, "k2"},
		{"old short", map[string]string{"LETHE_KEK": b64(k1), "LETHE_KEK_OLD": "k0:" + b64(k0[:8])}, nil, ""},
		{"old malformed", map[string]string{"LETHE_KEK": b64(k1), "LETHE_KEK_OLD": b64(k0)}, nil, ""},
		{"old repeats current", map[string]string{"LETHE_KEK": b64(k1), "LETHE_KEK_OLD": "kek1:" + b64(k0)}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []string{"LETHE_KEK", "LETHE_KEK_FILE", "LETHE_KEK_ID", "LETHE_KEK_OLD"} {
				t.Setenv(v, tc.env[v])
			}
			k, err := envelope.KEKFromEnv()
			if tc.wantIDs == nil {
				if err == nil {
					t.Fatalf("KEKFromEnv = %v, want an error", k)
				}
				for _, v := range tc.env {
					if len(v) >= 16 && strings.Contains(err.Error(), v) && !strings.HasPrefix(v, dir) {
						t.Fatalf("error prints a secret: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("KEKFromEnv: %v", err)
			}
			if fmt.Sprint(k.IDs()) != fmt.Sprint(tc.wantIDs) || k.CurrentID() != tc.current {
				t.Fatalf("ring = %v current %q, want %v current %q", k.IDs(), k.CurrentID(), tc.wantIDs, tc.current)
			}
		})
	}
}

func TestKEKNeverPrintsSecrets(t *testing.T) {
	k1, k0 := randKey(t), randKey(t)
	t.Setenv("LETHE_KEK", base64.StdEncoding.EncodeToString(k1))
	t.Setenv("LETHE_KEK_FILE", "")
	t.Setenv("LETHE_KEK_ID", "k2")
	t.Setenv("LETHE_KEK_OLD", "k0:"+base64.StdEncoding.EncodeToString(k0))
	k, err := envelope.KEKFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	s := envelope.Sealer{KEK: k, Keys: dirStore(t)}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
		out = append(out, fmt.Sprintf(verb, k), fmt.Sprintf(verb, *k), fmt.Sprintf(verb, s), fmt.Sprintf(verb, &s))
	}
	all := strings.Join(out, "\n")
	if !strings.Contains(all, "k2") || !strings.Contains(all, "****") {
		t.Fatalf("masked form lacks the ids: %s", out[0])
	}
	for _, secret := range [][]byte{k1, k0} {
		for _, form := range []string{
			base64.StdEncoding.EncodeToString(secret), hex.EncodeToString(secret),
			strings.ToUpper(hex.EncodeToString(secret)), fmt.Sprint(secret), string(secret),
			strings.Trim(fmt.Sprint(secret[:8]), "[]"), fmt.Sprintf("%#v", secret[:8]),
		} {
			if strings.Contains(all, form) {
				t.Fatalf("a secret is printed (%q) in:\n%s", form, all)
			}
		}
	}
}
