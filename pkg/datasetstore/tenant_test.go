package datasetstore

import (
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
)

// TestCrossTenant runs the cross-tenant checks over one bucket (and one directory) that
// every tenant shares, each tenant's datasets under its own "{tenant}/" prefix: tenant
// acme's erasures never reach globex's datasets, nor those of acme-eu, whose prefix
// "acme-eu/" starts with "acme".
func TestCrossTenant(t *testing.T) {
	t.Run("s3", func(t *testing.T) {
		f, _, _ := s3Fixture(t)
		deletiontest.CrossTenant(t, f)
	})
	t.Run("dir", func(t *testing.T) {
		f, _, _ := dirFixture(t)
		deletiontest.CrossTenant(t, f)
	})
}
