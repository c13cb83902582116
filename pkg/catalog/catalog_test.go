package catalog_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/catalog"
	"github.com/lethe-erasure/lethe/pkg/envconf"
)

// docs/configuration.md is what the declarations generate now: a setting added, renamed or
// documented anew without make docs fails here.
func TestConfigurationDocIsCurrent(t *testing.T) {
	var b bytes.Buffer
	if err := catalog.Markdown(&b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", "configuration.md")
	committed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, b.Bytes()) {
		t.Fatalf("%s is stale: run make docs (go generate ./catalog in pkg) and commit it", path)
	}
}

// Every service's declared defaults parse and validate, and every variable has a doc.
func TestDeclarations(t *testing.T) {
	for _, s := range catalog.Services {
		v := reflect.New(reflect.TypeOf(s.Config)).Interface()
		if err := envconf.Defaults(v); err != nil {
			t.Errorf("%s: defaults: %v", s.Name, err)
		}
		for _, x := range envconf.Vars(v) {
			if x.Doc == "" || x.Owner == "" {
				t.Errorf("%s: %s (%s) has no doc or no declaring type", s.Name, x.Name, x.Field)
			}
		}
	}
	if _, err := catalog.Vars(); err != nil {
		t.Fatal(err)
	}
}
