package deploy

import (
	"path/filepath"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
)

// validators check an inventory entry as the deleter of its kind does at start. A kind
// shipped with Lethe adds its package's Validate here.
var validators = map[string]func(inventory.Store) error{
	qdrantstore.Kind:  qdrantstore.Validate,
	redisstore.Kind:   redisstore.Validate,
	datasetstore.Kind: datasetstore.Validate,
	auditlog.Kind:     auditlog.NewVerifier(nil).Validate,
}

// TestShippedInventoriesValidate loads every inventory the repository ships and checks each
// entry with its kind's validator, so that no deleter refuses to start on one of them.
func TestShippedInventoriesValidate(t *testing.T) {
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
		for _, st := range inv.Stores {
			validate, ok := validators[st.Kind]
			if !ok {
				t.Errorf("%s: store %q has kind %q, which no Lethe deleter serves", f, st.Name, st.Kind)
				continue
			}
			if err := validate(st); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
}
