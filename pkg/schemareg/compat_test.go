package schemareg

import (
	"fmt"
	"sort"
	"testing"

	"github.com/iskorotkov/avro/v2"

	"github.com/lethe-erasure/lethe/pkg/event"
)

// forwardFrom names the schemas whose first versions cannot read what later ones write:
// erasure.store.done and erasure.completed v1 declare the store status enum without the
// EXEMPT of legal holds (added in v2) and without a default. From the version given on,
// every version reads every later one.
var forwardFrom = map[string]int{"completed": 2, "store_done": 2}

// TestRegisteredVersionsAreCompatible checks every released version of every schema, in
// the form Register sends to a registry (Full), against every earlier one with hamba/avro's
// resolution rules: BACKWARD (the later reads data the earlier wrote), for every pair, and
// FORWARD (the earlier reads data the later wrote), for every pair from forwardFrom on; a
// version before it must fail FORWARD, so the exception cannot outlive its cause.
func TestRegisteredVersionsAreCompatible(t *testing.T) {
	rel, err := event.Released()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(rel))
	for n := range rel {
		names = append(names, n)
	}
	sort.Strings(names)
	pairs := 0
	for _, name := range names {
		vs := registered(t, rel[name])
		for j := range vs {
			for i := range j {
				pairs++
				if err := avro.NewSchemaCompatibility().Compatible(vs[j], vs[i]); err != nil {
					t.Errorf("%s: v%d cannot read data written with v%d (BACKWARD): %v", name, j+1, i+1, err)
				}
				err := avro.NewSchemaCompatibility().Compatible(vs[i], vs[j])
				switch {
				case i+1 >= max(forwardFrom[name], 1) && err != nil:
					t.Errorf("%s: v%d cannot read data written with v%d (FORWARD): %v", name, i+1, j+1, err)
				case i+1 < forwardFrom[name] && err == nil:
					t.Errorf("%s: v%d reads data written with v%d: drop it from forwardFrom", name, i+1, j+1)
				}
			}
		}
	}
	t.Logf("%d schemas, %d version pairs, each checked both ways", len(names), pairs)
}

// TestCanonicalFormWouldBreakEvolution: registered in parsing canonical form (no defaults),
// erasure.completed v2, which adds identifiers_shred_at with a null default, is not
// BACKWARD compatible with v1; registered in full it is. Full is what Register sends.
func TestCanonicalFormWouldBreakEvolution(t *testing.T) {
	rel, err := event.Released()
	if err != nil {
		t.Fatal(err)
	}
	vs := rel["completed"]
	if len(vs) < 2 {
		t.Fatal("completed has fewer than two released versions")
	}
	canon := func(s avro.Schema) avro.Schema {
		p, err := avro.ParseWithCache(s.String(), "", &avro.SchemaCache{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := avro.NewSchemaCompatibility().Compatible(canon(vs[1]), canon(vs[0])); err == nil {
		t.Error("completed v2 in canonical form reads v1 data: the check cannot tell the registered forms apart")
	}
	full := registered(t, vs[:2])
	if err := avro.NewSchemaCompatibility().Compatible(full[1], full[0]); err != nil {
		t.Errorf("completed v2 as registered cannot read v1 data: %v", err)
	}
}

// registered parses each schema from the text Register would send.
func registered(t *testing.T, vs []avro.Schema) []avro.Schema {
	t.Helper()
	out := make([]avro.Schema, len(vs))
	for i, v := range vs {
		text, err := Full(v)
		if err != nil {
			t.Fatal(err)
		}
		if out[i], err = avro.ParseWithCache(text, "", &avro.SchemaCache{}); err != nil {
			t.Fatal(fmt.Errorf("v%d as registered: %w", i+1, err))
		}
	}
	return out
}
