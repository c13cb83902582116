package s3prefixstore

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		locators inventory.Locators
		err      string // "" when valid
	}{
		{inventory.Locators{"prefixes": []any{"s3://uploads/{tenant}/users/{subject}/"}}, ""},
		{inventory.Locators{"prefixes": []any{"s3://docs/{tenant}/sessions/{session}/", "s3://docs/{tenant}/h/{subject_hash}/"}}, ""},
		{inventory.Locators{"prefixes": []any{"s3://uploads/t/{tenant}/u/{subject}/s/{session}/x"}}, ""},
		{inventory.Locators{}, "locators.prefixes is empty"},
		{inventory.Locators{"prefix": "s3://uploads/{tenant}/{subject}/"}, `unknown field "prefix"`},
		{inventory.Locators{"prefixes": []any{"uploads/{tenant}/{subject}/"}}, "want s3://bucket/key-template"},
		{inventory.Locators{"prefixes": []any{"s3://uploads-{tenant}/{subject}/"}}, "no literal S3 bucket name"},
		{inventory.Locators{"prefixes": []any{"s3://uploads/{tenant}/users/"}}, "it would name the whole tenant"},
		{inventory.Locators{"prefixes": []any{"s3://uploads/{tenant}/users/{subject}"}}, `{subject} must be followed by "/"`},
		{inventory.Locators{"prefixes": []any{"s3://uploads/{tenant}/users/{subject}.pdf"}}, `{subject} must be followed by "/"`},
		{inventory.Locators{"prefixes": []any{"s3://uploads/{tenant}/{subject}/{session}-x/"}}, `{session} must be followed by "/"`},
		{inventory.Locators{"prefixes": []any{"s3://uploads/{tenant}-{subject}/"}}, `{tenant} must be followed by "/"`},
		{inventory.Locators{"prefixes": []any{"s3://uploads/users/{subject}/"}}, "names no tenant"},
		{inventory.Locators{"prefixes": []any{"s3://uploads/{subject}/{tenant}/"}}, "names no tenant"},
		{inventory.Locators{"prefixes": []any{"s3://uploads/{tennant}/{subject}/"}}, "placeholder {tennant}"},
	} {
		err := New(nil).Validate(inventory.Entry{Name: "docs", Kind: Kind, Locators: tc.locators})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.locators, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !retry.IsPermanent(err)):
			t.Errorf("%v: %v, want a permanent error with %q", tc.locators, err, tc.err)
		}
	}
}

// TestExampleInventory loads the shipped example inventory and validates its s3prefix stores.
func TestExampleInventory(t *testing.T) {
	inv, err := inventory.Load("../../deploy/examples/inventory-s3prefix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.OfKinds(Kind)) == 0 {
		t.Fatal("the example names no s3prefix store")
	}
	if err := deletion.ValidateStores(inv, Kind, New(nil)); err != nil {
		t.Fatal(err)
	}
}

func TestEncode(t *testing.T) {
	for in, want := range map[string]string{
		"cust-42_x~y.z": "cust-42_x~y.z",
		"a/b":           "a%2Fb",
		"%":             "%25",
		"%2F":           "%252F",
		".":             "%2E",
		"..":            "%2E%2E",
		"...":           "...",
		"../x":          "..%2Fx",
		"a b'\";*":      "a%20b%27%22%3B%2A",
		"zo\u00e9":      "zo%C3%A9",
		"zoe\u0301":     "zoe%CC%81",
	} {
		if got := Encode(in); got != want {
			t.Errorf("Encode(%+q) = %q, want %q", in, got, want)
		}
	}
	seen := map[string]string{}
	ids := append([]string{".", "..", "%2E", "%2E%2E", "a", "ab", "a/b", "a%2Fb"}, deletiontest.HostileAlphabet...)
	for _, p := range deletiontest.RandomPairs(1, 200) {
		ids = append(ids, p[0], p[1])
	}
	for _, id := range ids {
		e := Encode(id)
		if prev, ok := seen[e]; ok && prev != id {
			t.Errorf("Encode(%+q) = Encode(%+q) = %q", id, prev, e)
		}
		seen[e] = id
	}
}

// FuzzEncode: Encode is undone by percent-decoding (so it is injective), and what it writes
// is one path segment that is no relative step.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"a", ".", "..", "a/b", "%", "zoe\u0301", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		e := Encode(id)
		if strings.Contains(e, "/") || e == "." || e == ".." || !utf8.ValidString(e) {
			t.Fatalf("Encode(%+q) = %q", id, e)
		}
		back, err := url.PathUnescape(e)
		if err != nil || back != id {
			t.Fatalf("Encode(%+q) = %q decodes to %+q, %v", id, e, back, err)
		}
	})
}

// TestValidateStoresNamesStoreAndField: what the deleter checks before it starts names the
// store and the field at fault.
func TestValidateStoresNamesStoreAndField(t *testing.T) {
	inv := &inventory.Inventory{Version: "1", Stores: []inventory.Entry{
		{Name: "uploads", Kind: Kind, Locators: inventory.Locators{"prefixes": []any{"s3://uploads/{tenant}/{subject}/", "s3://uploads/{tenant}/{subject}"}}},
		{Name: "other", Kind: "dataset", Locators: inventory.Locators{"prefixes": []any{"whatever"}}},
	}}
	err := deletion.ValidateStores(inv, Kind, New(nil))
	if err == nil || !strings.Contains(err.Error(), `"uploads"`) || !strings.Contains(err.Error(), "locators.prefixes[1]") || strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("ValidateStores = %v; want store uploads, field locators.prefixes[1], and no other kind", err)
	}
}
