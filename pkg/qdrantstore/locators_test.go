package qdrantstore_test

import (
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

func TestValidate(t *testing.T) {
	ref := inventory.Reference().OfKinds(qdrantstore.Kind)[0]
	if err := qdrantstore.New(nil).Validate(ref); err != nil {
		t.Fatalf("reference store: %v", err)
	}
	for _, tc := range []struct {
		locators inventory.Locators
		want     []string
	}{
		{inventory.Locators{"collection": []string{"kb_{tenant}"}, "subject_fields": []string{"c"}}, []string{`unknown field "collection"`}},
		{inventory.Locators{"subject_fields": []string{"customer_id"}}, []string{"locators.collections is empty"}},
		{inventory.Locators{"collections": []string{"kb_{tenant}"}}, []string{"at least one of subject_fields, hash_fields, session_fields"}},
		{inventory.Locators{"collections": []string{"kb_{org}"}, "subject_fields": []string{"c"}}, []string{"locators.collections", "placeholder {org}"}},
		{inventory.Locators{"collections": []string{"kb_{tenant}"}, "subject_fields": []string{"metadata.customer_id", "user id"}, "session_fields": []string{"meta..sid"}},
			[]string{`locators.subject_fields: qdrant payload key "user id"`, "unexpected ' ' at byte 4", "locators.session_fields"}},
		{inventory.Locators{"collections": "kb_{tenant}", "subject_fields": []string{"c"}}, []string{`field "collections"`}},
	} {
		err := qdrantstore.Validate(inventory.Entry{Name: "q", Kind: qdrantstore.Kind, Locators: tc.locators})
		if err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), `store "q"`) {
			t.Errorf("Validate(%v) = %v, want a permanent error naming the store", tc.locators, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%v) = %v, want it to name %q", tc.locators, err, w)
			}
		}
	}
}
