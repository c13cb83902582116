package webhookstore

import (
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
)

// TestShippedInventories: every shipped inventory entry of this kind passes the validator
// the deleter runs at start.
func TestShippedInventories(t *testing.T) {
	deletiontest.ShippedInventories(t, Kind, Validate)
}
