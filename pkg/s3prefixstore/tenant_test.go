package s3prefixstore

import (
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// TestValidateRequiresTenantPrefix: a template whose part before the first identifier
// holds no "{tenant}/" has no tenant prefix (a tenant erasure could not be told apart
// from every tenant's) and is refused; the error names the store and the template.
func TestValidateRequiresTenantPrefix(t *testing.T) {
	for _, tc := range []struct{ prefix, want string }{
		{"s3://uploads/users/{subject}/", `s3prefix store "docs": locators.prefixes[0]: prefix "s3://uploads/users/{subject}/": {tenant} must come before the first identifier placeholder`},
		{"s3://uploads/{subject}/{tenant}/", `prefix "s3://uploads/{subject}/{tenant}/": {tenant} must come before`},
		{"s3://uploads/{tenant}x/{subject}/", `prefix "s3://uploads/{tenant}x/{subject}/": {tenant} must be followed by "/"`},
		{"s3://uploads/{tenant}/", `prefix "s3://uploads/{tenant}/" uses none of {subject}, {session}, {subject_hash}`},
	} {
		err := New(nil).Validate(inventory.Entry{Name: "docs", Kind: Kind, Locators: inventory.Locators{"prefixes": []any{tc.prefix}}})
		if err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%q) = %v, want a permanent error with %q", tc.prefix, err, tc.want)
		}
	}
}

// TestCrossTenant runs the cross-tenant checks over two buckets that every tenant shares,
// each tenant's uploads and documents under its own "{tenant}/" prefix.
func TestCrossTenant(t *testing.T) {
	w := newWorld(t)
	deletiontest.CrossTenant(t, deletiontest.Fixture{
		Impl:  New(w.client),
		Store: testStore(),
		Seed:  func(t *testing.T, s deletion.Subject, n int) int { return w.seed(t, s, n) },
		Count: func(t *testing.T, s deletion.Subject) int { return w.countSubject(t, s) },
	})
}
