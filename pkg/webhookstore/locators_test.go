package webhookstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good, short := filepath.Join(dir, "good"), filepath.Join(dir, "short")
	os.WriteFile(good, []byte(strings.Repeat("s", 32)+"\n"), 0o600)
	os.WriteFile(short, []byte("too-short\n"), 0o600)
	t.Setenv("LETHE_TEST_WEBHOOK_SECRET", strings.Repeat("e", 40))
	base := inventory.Locators{"url": "https://vendor.example/lethe/erasures", "secret_file": good}
	for _, tc := range []struct {
		name string
		loc  inventory.Locators
		want string // "" = valid; else a fragment of the error
	}{
		{"https", base, ""},
		{"secret from env", inventory.Locators{"url": "https://v.example/", "secret_env": "LETHE_TEST_WEBHOOK_SECRET"}, ""},
		{"loopback http allowed", base.With("url", "http://127.0.0.1:8080/x").With("insecure_http", true), ""},
		{"http refused", base.With("url", "http://vendor.example/x"), "locators.url"},
		{"loopback http without the flag", base.With("url", "http://127.0.0.1:8080/x"), "insecure_http"},
		{"http to a remote host with the flag", base.With("url", "http://vendor.example/x").With("insecure_http", true), "loopback"},
		{"placeholder in the url", base.With("url", "https://v.example/{subject}"), "locators.url"},
		{"credentials in the url", base.With("url", "https://u:p@v.example/"), "user information"},
		{"relative url", base.With("url", "/lethe"), "absolute"},
		{"both secrets", base.With("secret_env", "X"), "exactly one"},
		{"no secret", inventory.Locators{"url": "https://v.example/"}, "exactly one"},
		{"short secret", base.With("secret_file", short), "at least 32"},
		{"missing secret file", base.With("secret_file", filepath.Join(dir, "none")), "locators.secret_file"},
		{"empty env secret", inventory.Locators{"url": "https://v.example/", "secret_env": "LETHE_TEST_UNSET_SECRET"}, "locators.secret_env"},
		{"unknown identifier", base.With("identifiers", []string{"email"}), "locators.identifiers"},
		{"unknown field", base.With("secret", "inline"), `unknown field "secret"`},
		{"bad duration", base.With("deadline", "soon"), `field "deadline"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := New(nil).Validate(inventory.Entry{Name: "vendor", Kind: Kind, Locators: tc.loc})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate = %v, want valid", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate = %v, want an error naming %q", err, tc.want)
			case err != nil && !retry.IsPermanent(err):
				t.Errorf("Validate = %v: not permanent", err)
			case err != nil && strings.Contains(err.Error(), strings.Repeat("s", 32)):
				t.Errorf("Validate error %q holds the secret", err)
			}
		})
	}
}

func TestLocatorsDefaults(t *testing.T) {
	l, err := LocatorsOf(inventory.Entry{Name: "v", Kind: Kind, Locators: inventory.Locators{"url": "https://v.example/", "secret_env": "X", "timeout": "5s"}})
	if err != nil {
		t.Fatal(err)
	}
	if l.Timeout.String() != "5s" || l.Deadline.String() != "10m0s" || l.Attempts != 3 || strings.Join(l.Identifiers, ",") != "subject,sessions" {
		t.Errorf("LocatorsOf = %+v", l)
	}
}

// TestExampleInventory: the shipped example entries are valid webhook stores.
func TestExampleInventory(t *testing.T) {
	inv, err := inventory.Load("../../deploy/examples/inventory-webhook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stores := inv.OfKinds(Kind)
	if len(stores) != 2 {
		t.Fatalf("%d webhook stores, want 2", len(stores))
	}
	for _, st := range stores {
		if _, err := LocatorsOf(st); err != nil {
			t.Errorf("%s: %v", st.Name, err)
		}
	}
}

// TestValidateOffline: the package's Validate checks the locators only; the Store's also
// reads the secret, as the deleter does at start.
func TestValidateOffline(t *testing.T) {
	st := inventory.Entry{Name: "v", Kind: Kind, Locators: inventory.Locators{"url": "https://v.example/", "secret_file": filepath.Join(t.TempDir(), "absent")}}
	if err := Validate(st); err != nil {
		t.Errorf("Validate = %v, want the locators accepted", err)
	}
	if err := New(nil).Validate(st); err == nil || !strings.Contains(err.Error(), "locators.secret_file") {
		t.Errorf("Store.Validate = %v, want the missing secret file named", err)
	}
	if err := Validate(inventory.Entry{Name: "v", Kind: Kind, Locators: inventory.Locators{"url": "http://v.example/", "secret_env": "X"}}); err == nil {
		t.Error("Validate accepts an http URL")
	}
}
