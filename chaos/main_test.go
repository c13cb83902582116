package chaos

import (
	"os"
	"testing"
)

// TestMain removes the service binaries the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	RemoveBuilds()
	os.Exit(code)
}
