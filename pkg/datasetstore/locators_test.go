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
		{inventory.Locators{"prefixes": []string{"s3://b/evals/"}, "subject_columns": []string{"c"}}, `prefix "s3://b/evals/": it names no {tenant}`},
		{inventory.Locators{"prefixes": []string{"s3://b/{tenant}/", "datasets/shared/"}, "subject_columns": []string{"c"}}, `prefix "datasets/shared/": it names no {tenant}`},
		{inventory.Locators{"prefixes": []string{"s3://b/{tenant}"}, "subject_columns": []string{"c"}}, `prefix "s3://b/{tenant}": {tenant} must be followed by "/"`},
		{inventory.Locators{"prefixes": []string{"s3://b/{tenant}-evals/"}, "subject_columns": []string{"c"}}, `{tenant} must be followed by "/"`},
		{inventory.Locators{"prefixes": []string{"s3://b/{tenant}/x/{tenant}.csv"}, "subject_columns": []string{"c"}}, `{tenant} must be followed by "/"`},
	} {
		err := Validate(inventory.Entry{Name: "d", Kind: Kind, Locators: tc.locators})
		if err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), `store "d"`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%v) = %v, want a permanent error naming the store and %q", tc.locators, err, tc.want)
		}
	}
}

// TestValidateTenantPrefixes: every prefix holds {tenant} as a whole path part or at the
// end of one, bucket names included.
func TestValidateTenantPrefixes(t *testing.T) {
	for _, p := range []string{"s3://b/{tenant}/", "s3://data-{tenant}/", "s3://b/evals/t-{tenant}/x/", "datasets/{tenant}/", "file://archive/{tenant}/", "s3://b/{subject_hash}/{tenant}/"} {
		st := inventory.Entry{Name: "d", Kind: Kind, Locators: inventory.Locators{"prefixes": []string{p}, "subject_columns": []string{"c"}}}
		if err := Validate(st); err != nil {
			t.Errorf("Validate(%q) = %v", p, err)
		}
	}
}
