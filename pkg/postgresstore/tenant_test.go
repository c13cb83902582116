package postgresstore_test

import (
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
)

// TestCrossTenant runs the cross-tenant checks over one PostgreSQL server: a chat table
// every tenant shares, told apart by its tenant column, beside a checkpoint table in a
// schema per tenant.
func TestCrossTenant(t *testing.T) {
	f, _ := newServer(t).deletionFixture(t)
	deletiontest.CrossTenant(t, f)
}
