package deploy

import (
	"path/filepath"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// TestShippedInventoriesLoad loads every inventory the repository ships and checks what is
// common to every kind. Each kind's locators are checked by the package serving it
// (deletiontest.ShippedInventories in that package's tests), so no list of kinds is kept
// here.
func TestShippedInventoriesLoad(t *testing.T) {
	files := []string{"inventory.yaml", "k8s/base/inventory.yaml", "../pkg/inventory/reference.yaml"}
	examples, err := filepath.Glob("examples/*.yaml")
	if err != nil || len(examples) == 0 {
		t.Fatalf("examples: %v, %v", examples, err)
	}
	for _, f := range append(files, examples...) {
		inv, err := inventory.Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(inv.Stores) == 0 {
			t.Errorf("%s: no stores", f)
		}
	}
}
