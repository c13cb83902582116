package deletion

import (
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/subject"
)

func TestItemNamesHoldNoName(t *testing.T) {
	k, err := subject.NewKey("k1", []byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	names := NewItemNames(k)
	for _, tc := range []struct {
		rel, want string
		raw       []string
	}{
		{"uploads/anna.schmidt@example.de.png", "*/*.png", []string{"anna", "schmidt", "example", ".de"}},
		{"exports/cust-4711/orders.csv.gz", "*/*/*.csv.gz", []string{"cust", "4711", "orders", "exports"}},
		{"notes/annaschmidt", "*/*", []string{"annaschmidt", "notes"}},
		{"anna.schmidt", "*", []string{"anna", "schmidt"}},
		{"Anna Schmidt.PDF", "*.PDF", []string{"Anna", "Schmidt"}},
		{"dir/", "*/", []string{"dir"}},
		{".env", "*", []string{"env"}},
	} {
		full := "s3://uploads/acme/" + tc.rel
		got := names.Name("s3://uploads/{tenant}/", tc.rel, full)
		ref := names.Ref(full)
		if want := "s3://uploads/{tenant}/" + tc.want + " [ref " + ref + "]"; got != want || len(ref) != 16 {
			t.Errorf("%q named %q, want %q", tc.rel, got, want)
		}
		for _, r := range tc.raw {
			if strings.Contains(got, r) {
				t.Errorf("%q named %q, which holds %q", tc.rel, got, r)
			}
		}
		if (ItemNames{}).Name("s3://uploads/{tenant}/", tc.rel, full) != "s3://uploads/{tenant}/"+tc.want {
			t.Errorf("%q: the zero ItemNames gives a reference", tc.rel)
		}
	}
	a, b := names.Ref("s3://uploads/acme/a.png"), names.Ref("s3://uploads/acme/b.png")
	k2, _ := subject.NewKey("k2", []byte(strings.Repeat("j", 32)))
	if a == b || a != names.Ref("s3://uploads/acme/a.png") || a == NewItemNames(k2).Ref("s3://uploads/acme/a.png") {
		t.Errorf("references %q %q are not stable, distinct and keyed", a, b)
	}
	if a == k.Fingerprint("s3://uploads/acme/a.png", "", "", "")[:16] {
		t.Error("a reference is a fingerprint under the pseudonym key itself")
	}
}
