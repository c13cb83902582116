package datasetstore

import (
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

func TestValidate(t *testing.T) {
	ref := inventory.Reference().OfKinds(Kind)[0]
	if err := New(nil, "").Validate(ref); err != nil {
		t.Fatalf("reference store: %v", err)
	}
	for _, tc := range []struct {
		locators inventory.Locators
		want     string
	}{
		{inventory.Locators{"prefixes": []string{"s3://b/{tenant}/"}}, "needs subject_columns or session_columns"},
		{inventory.Locators{"subject_columns": []string{"customer_id"}}, "locators.prefixes is empty"},
		{inventory.Locators{"prefixes": []string{"s3://b/{tenant}/"}, "subject_columns": []string{"c"}, "exclude": []string{"*.png", "[a-"}}, `locators.exclude: pattern "[a-" is not a valid glob`},
		{inventory.Locators{"prefixes": []string{"s3://b/{tenant}/{subject}/"}, "subject_columns": []string{"c"}}, "identifiers must not reach object names"},
		{inventory.Locators{"prefixes": []string{"s3://b/{tennant}/"}, "subject_columns": []string{"c"}}, "placeholder {tennant}"},
		{inventory.Locators{"prefix": []string{"s3://b/"}, "subject_columns": []string{"c"}}, `unknown field "prefix"`},
	} {
		err := Validate(inventory.Store{Name: "d", Kind: Kind, Locators: tc.locators})
		if err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), `store "d"`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%v) = %v, want a permanent error naming the store and %q", tc.locators, err, tc.want)
		}
	}
}
