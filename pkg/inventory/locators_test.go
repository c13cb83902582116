package inventory_test

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

type fakeLocators struct {
	Keys      []string `yaml:"keys,omitempty"`
	Index     string   `yaml:"index"`
	IndexOnly bool     `yaml:"index_only"`
	Limit     int      `yaml:"limit"`
	ignored   string
}

func parseOne(t *testing.T, locators string) inventory.Entry {
	t.Helper()
	inv, err := inventory.Parse([]byte("version: \"1\"\nstores:\n  - name: s\n    kind: any\n    locators: " + locators + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return inv.Stores[0]
}

func TestDecode(t *testing.T) {
	st := parseOne(t, `{keys: ["k:{subject}:*", "h:{subject_hash}"], index: "i:{subject}", index_only: true, limit: 7}`)
	var l fakeLocators
	if err := st.Locators.Decode(&l); err != nil {
		t.Fatal(err)
	}
	want := fakeLocators{Keys: []string{"k:{subject}:*", "h:{subject_hash}"}, Index: "i:{subject}", IndexOnly: true, Limit: 7}
	if !reflect.DeepEqual(l, want) {
		t.Errorf("Decode = %+v, want %+v", l, want)
	}
	// Cached: the second decoding gives the same value, into a dirty target too.
	l2 := fakeLocators{Index: "stale", ignored: "x"}
	if err := st.Locators.Decode(&l2); err != nil || !reflect.DeepEqual(l2, want) {
		t.Errorf("second Decode = %+v, %v", l2, err)
	}
	// Another type over the same map is decoded on its own.
	var only struct {
		Index string `yaml:"index"`
	}
	if err := st.Locators.Decode(&only); err == nil || !strings.Contains(err.Error(), `unknown field "index_only"`) {
		t.Errorf("Decode into a type without index_only: %v", err)
	}
	// No locators decode to the zero value.
	var z fakeLocators
	if err := (inventory.Locators(nil)).Decode(&z); err != nil || !reflect.DeepEqual(z, fakeLocators{}) {
		t.Errorf("nil locators: %+v, %v", z, err)
	}
}

func TestDecodeErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		locators string
		want     []string
	}{
		{`{key: ["k:{subject}"]}`, []string{`locators: unknown field "key"`, "known: index, index_only, keys, limit"}},
		{`{keys: "k:{subject}"}`, []string{`field "keys"`, "cannot unmarshal"}},
		{`{limit: many, extra: 1}`, []string{`field "limit"`, `unknown field "extra"`}},
	} {
		var l fakeLocators
		err := parseOne(t, tc.locators).Locators.Decode(&l)
		if err == nil {
			t.Errorf("%s: Decode succeeded: %+v", tc.locators, l)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tc.locators, err, w)
			}
		}
		if strings.Contains(err.Error(), "line ") {
			t.Errorf("%s: error %q names a line of a re-encoded value", tc.locators, err)
		}
	}
	var notStruct []string
	if err := (inventory.Locators{"a": 1}).Decode(&notStruct); err == nil {
		t.Error("Decode into a slice succeeded")
	}
}

func TestLocatorsWithCopies(t *testing.T) {
	st := parseOne(t, `{keys: ["k:{subject}:*"]}`)
	var before, after fakeLocators
	if err := st.Locators.Decode(&before); err != nil {
		t.Fatal(err)
	}
	changed := st.Locators.With("index_only", true)
	if err := changed.Decode(&after); err != nil || !after.IndexOnly || before.IndexOnly {
		t.Errorf("With: %+v, %v", after, err)
	}
	if _, ok := st.Locators["index_only"]; ok {
		t.Error("With changed the original map")
	}
}

func TestDecodeConcurrent(t *testing.T) {
	st := parseOne(t, `{keys: ["k:{subject}:*"], limit: 3}`)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				var l fakeLocators
				if err := st.Locators.Decode(&l); err != nil || l.Limit != 3 {
					t.Errorf("Decode = %+v, %v", l, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCheckTemplate(t *testing.T) {
	all := []string{inventory.Tenant, inventory.Subject, inventory.SubjectHash, inventory.Session}
	for _, tc := range []struct {
		tmpl    string
		allowed []string
		wantErr string
	}{
		{"session:{tenant}:{subject}:*", all, ""},
		{"static", nil, ""},
		{"kb_{org}", all, "uses placeholder {org}"},
		{"s3://b/{tenant}/{subject}/", []string{inventory.Tenant}, "{subject}, not one of {tenant}"},
		{"x{tenant}", nil, "it may use none"},
		{"{tenant", all, ""}, // no placeholder: an unmatched brace is literal text
	} {
		err := inventory.CheckTemplate(tc.tmpl, tc.allowed...)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("CheckTemplate(%q, %q) = %v, want %q", tc.tmpl, tc.allowed, err, tc.wantErr)
		}
	}
}

func BenchmarkDecodeCached(b *testing.B) {
	l := inventory.Locators{"keys": []any{"k:{subject}:*"}, "index": "i:{subject}"}
	for b.Loop() {
		var v fakeLocators
		if err := l.Decode(&v); err != nil {
			b.Fatal(err)
		}
	}
}

// DecodeChecked names the store in its error and marks it permanent, for a field the type
// does not declare and for a check that fails alike.
func TestDecodeChecked(t *testing.T) {
	type locs struct {
		Keys []string `yaml:"keys"`
	}
	check := func(l locs) error {
		if len(l.Keys) == 0 {
			return errors.New("locators.keys is empty")
		}
		return nil
	}
	good := inventory.Entry{Name: "s", Locators: inventory.Locators{"keys": []string{"a"}}}
	if l, err := inventory.DecodeChecked(good, "kind: store", check); err != nil || len(l.Keys) != 1 {
		t.Fatalf("DecodeChecked = %+v, %v", l, err)
	}
	for _, st := range []inventory.Entry{
		{Name: "s", Locators: inventory.Locators{"key": []string{"a"}}},
		{Name: "s", Locators: inventory.Locators{"keys": []string{}}},
	} {
		_, err := inventory.DecodeChecked(st, "kind: store", check)
		if err == nil || !retry.IsPermanent(err) || !strings.HasPrefix(err.Error(), `kind: store "s": `) {
			t.Errorf("DecodeChecked(%v) = %v, want a permanent error naming the store", st.Locators, err)
		}
	}
}
