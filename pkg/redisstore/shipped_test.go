package redisstore_test

import (
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
)

// TestShippedInventories: every shipped inventory entry of this kind passes the validator
// the deleter runs at start.
func TestShippedInventories(t *testing.T) {
	deletiontest.ShippedInventories(t, redisstore.Kind, redisstore.Validate)
}
