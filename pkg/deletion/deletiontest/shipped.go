package deletiontest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// ShippedInventories validates, with validate, every store of kind in every inventory the
// repository ships (deploy/inventory.yaml, the Kubernetes base's copy, the embedded
// reference and deploy/examples/*.yaml), so that a deleter never refuses to start on one of
// them. Each kind's package runs it for its own kind: no list of kinds is kept elsewhere.
// It fails t when a shipped inventory does not load.
func ShippedInventories(t *testing.T, kind string, validate func(inventory.Entry) error) {
	t.Helper()
	root := repoRoot(t)
	files := []string{
		filepath.Join(root, "deploy", "inventory.yaml"),
		filepath.Join(root, "deploy", "k8s", "base", "inventory.yaml"),
		filepath.Join(root, "pkg", "inventory", "reference.yaml"),
	}
	examples, err := filepath.Glob(filepath.Join(root, "deploy", "examples", "*.yaml"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("deploy/examples: %v, %v", examples, err)
	}
	for _, f := range append(files, examples...) {
		inv, err := inventory.Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for _, st := range inv.OfKinds(kind) {
			if err := validate(st); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
}

// repoRoot is the directory above the working directory that holds go.work.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("deletiontest: no go.work above the working directory")
		}
		dir = parent
	}
}
