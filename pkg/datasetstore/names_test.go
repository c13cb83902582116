package datasetstore

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
)

// TestReportsNameNoObject: object names holding an email, a customer id or a plain name
// reach no report: unexamined, excluded and mention items name each object by its prefix
// template, its shape (a known extension kept) and a keyed reference that the key's
// holder finds again from the object's full name; column names are masked too.
func TestReportsNameNoObject(t *testing.T) {
	objects := map[string]string{
		"uploads/anna.schmidt@example.de.bin": "not a dataset",
		"exports/cust-4711.xlsx":              "PK\x03\x04 a spreadsheet",
		"notes/annaschmidt":                   "plain text",
		"photos/anna.schmidt@example.de.png":  "\x89PNG excluded",
		"people/anna.schmidt@example.de.csv":  "customer_id,anna.schmidt@example.de\ncust-2,ticket from cust-1.\n",
	}
	raw := []string{"anna", "schmidt", "example", "4711", "uploads", "exports", "notes", "photos", "people", "acme"}
	for _, tc := range []struct {
		name   string
		prefix string
		full   string
		setup  func(t *testing.T) (*Store, world)
	}{
		{"s3", "s3://" + testBucket + "/{tenant}/", "s3://" + testBucket + "/acme/", func(t *testing.T) (*Store, world) {
			c := newS3Client(t)
			return New(c, "", WithKey(deletiontest.Key)), s3World{c}
		}},
		{"dir", "file://{tenant}/", "file://acme/", func(t *testing.T) (*Store, world) {
			w := dirWorld{t.TempDir()}
			return New(nil, w.root, WithKey(deletiontest.Key)), w
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, w := tc.setup(t)
			for rel, data := range objects {
				w.put(t, "acme/"+rel, []byte(data))
			}
			st := testInventory(tc.prefix)
			st.Locators = st.Locators.With("exclude", []string{"*.png"})
			v, err := store.Verify(context.Background(), st, deletiontest.NewSubject("acme", "cust-1"))
			if err != nil {
				t.Fatal(err)
			}
			if v.Unexamined != 3 || len(v.Excluded) != 1 || v.Mentions != 1 {
				t.Fatalf("verification %+v; want 3 unexamined, 1 excluded, 1 mention", v)
			}
			names := deletion.NewItemNames(deletiontest.Key)
			var refs []string
			for rel := range objects {
				refs = append(refs, names.Ref(tc.full+rel))
			}
			reported := append(slices.Clone(v.UnexaminedItems), v.Excluded...)
			for _, item := range reported {
				for _, r := range raw {
					if strings.Contains(strings.ToLower(item), r) {
						t.Errorf("item %q holds %q", item, r)
					}
				}
				i := strings.Index(item, " [ref ")
				if i < 0 || !slices.Contains(refs, item[i+6:i+22]) || !strings.HasPrefix(item, tc.prefix+"*/*") {
					t.Errorf("item %q does not name its object by its shape and a reference", item)
				}
			}
			for _, want := range []string{"*/*.bin [ref ", "*/*.xlsx [ref ", "*/* [ref ", "*/*.png [ref ", "*/*.csv [ref ", "(columns [email])"} {
				if !slices.ContainsFunc(reported, func(s string) bool { return strings.Contains(s, want) }) {
					t.Errorf("no item holds %q: %q", want, reported)
				}
			}
		})
	}
}
