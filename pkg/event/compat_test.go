package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/iskorotkov/avro/v2"

	"github.com/lethe-erasure/lethe/schemas"
)

// Schema evolution rule, enforced by TestSchemaEvolution for every schema <name>:
//
//  1. Backward transitive: the current schemas/<name>.avsc reads records written with every
//     released version schemas/released/<name>/vK.avsc (checkCompatible, reader = current,
//     writer = vK). Enum symbols may only be added, never removed, even when the enum has a
//     default: a default would silently turn a removed TENANT scope into SUBJECT.
//  2. Released: the current schema is identical (same canonical form) to the newest
//     released version. A change is made by editing <name>.avsc and copying it to
//     released/<name>/v(N+1).avsc in the same commit; released files are never edited.
//     Every schema a producer can write is thus known to every later reader.
//  3. Released versions are numbered v1..vN without gaps.
//
// So an incompatible edit (a field without default, a rename without alias, a type change,
// a removed enum symbol) fails rule 1, and a compatible edit fails rule 2 until it is
// released.
func TestSchemaEvolution(t *testing.T) {
	cur, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := Released()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range schemaFiles {
		t.Run(name, func(t *testing.T) {
			entries, err := fs.ReadDir(schemas.FS, path.Join("released", name))
			if err != nil {
				t.Fatal(err)
			}
			files := map[string]bool{}
			for _, e := range entries {
				files[e.Name()] = true
			}
			for k := 1; k <= len(entries); k++ {
				if !files[fmt.Sprintf("v%d.avsc", k)] {
					t.Errorf("released/%s: versions must be v1.avsc..v%d.avsc without gaps, have %v",
						name, len(entries), slices.Sorted(maps.Keys(files)))
					break
				}
			}
			versions := rel[name]
			if len(versions) == 0 {
				t.Fatalf("released/%s: no released version; copy %s.avsc to released/%s/v1.avsc", name, name, name)
			}
			if err := checkCompatible(cur[name], versions); err != nil {
				t.Fatalf("%s.avsc breaks backward compatibility: %v", name, err)
			}
			n := len(versions)
			if cur[name].Fingerprint() != versions[n-1].Fingerprint() {
				t.Fatalf("%s.avsc differs from released/%s/v%d.avsc; it is backward compatible, so release it: copy it to released/%s/v%d.avsc",
					name, name, n, name, n+1)
			}
		})
	}
}

// checkCompatible reports whether reader can read records written with every one of
// writers: Avro schema resolution (hamba/avro), plus no enum symbol of a writer missing from
// the reader's enum of the same name, default or not.
func checkCompatible(reader avro.Schema, writers []avro.Schema) error {
	var errs []error
	readerEnums := enums(reader)
	for i, w := range writers {
		if err := avro.NewSchemaCompatibility().Compatible(reader, w); err != nil {
			errs = append(errs, fmt.Errorf("cannot read v%d: %w", i+1, err))
			continue
		}
		for name, we := range enums(w) {
			re, ok := readerEnums[name]
			if !ok {
				continue // renamed through an alias; resolution checked it
			}
			for _, s := range we.Symbols() {
				if !slices.Contains(re.Symbols(), s) {
					errs = append(errs, fmt.Errorf("cannot read v%d: enum %s lost symbol %s", i+1, name, s))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// enums collects the enum schemas reachable from s by full name.
func enums(s avro.Schema) map[string]*avro.EnumSchema {
	out := map[string]*avro.EnumSchema{}
	seen := map[avro.Schema]bool{}
	var walk func(avro.Schema)
	walk = func(s avro.Schema) {
		if seen[s] {
			return
		}
		seen[s] = true
		switch s := s.(type) {
		case *avro.RefSchema:
			walk(s.Schema())
		case *avro.EnumSchema:
			out[s.FullName()] = s
		case *avro.RecordSchema:
			for _, f := range s.Fields() {
				walk(f.Type())
			}
		case *avro.ArraySchema:
			walk(s.Items())
		case *avro.MapSchema:
			walk(s.Values())
		case *avro.UnionSchema:
			for _, t := range s.Types() {
				walk(t)
			}
		}
	}
	walk(s)
	return out
}

// editedSchema parses the current schemas with name's JSON passed through edit first, and
// returns name's schema (its named-type dependencies parsed from the current files).
func editedSchema(t *testing.T, name string, edit func(rec map[string]any)) avro.Schema {
	t.Helper()
	cache := &avro.SchemaCache{}
	for _, n := range schemaFiles {
		b, err := fs.ReadFile(schemas.FS, n+".avsc")
		if err != nil {
			t.Fatal(err)
		}
		if n == name {
			var rec map[string]any
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatal(err)
			}
			edit(rec)
			if b, err = json.Marshal(rec); err != nil {
				t.Fatal(err)
			}
		}
		s, err := avro.ParseBytesWithCache(b, "", cache)
		if err != nil {
			t.Fatalf("parse edited %s: %v", n, err)
		}
		if n == name {
			return s
		}
	}
	t.Fatalf("no schema %s", name)
	return nil
}

// field returns the field named name of the record rec (a decoded schema JSON object).
func field(t *testing.T, rec map[string]any, name string) map[string]any {
	t.Helper()
	for _, f := range rec["fields"].([]any) {
		if f := f.(map[string]any); f["name"] == name {
			return f
		}
	}
	t.Fatalf("record %v has no field %s", rec["name"], name)
	return nil
}

func addField(f map[string]any) func(rec map[string]any) {
	return func(rec map[string]any) { rec["fields"] = append(rec["fields"].([]any), f) }
}

func removeField(name string) func(rec map[string]any) {
	return func(rec map[string]any) {
		rec["fields"] = slices.DeleteFunc(rec["fields"].([]any), func(f any) bool { return f.(map[string]any)["name"] == name })
	}
}

func removeSymbol(t *testing.T, fieldName, symbol string) func(rec map[string]any) {
	return func(rec map[string]any) {
		enum := field(t, rec, fieldName)["type"].(map[string]any)
		enum["symbols"] = slices.DeleteFunc(enum["symbols"].([]any), func(s any) bool { return s == symbol })
	}
}

// TestCheckCompatible proves checkCompatible rejects the edits rule 1 forbids and accepts
// the ones it allows: each variant of a current schema is checked as the reader of the
// unedited current schema (the writer).
func TestCheckCompatible(t *testing.T) {
	cur, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		schema string
		edit   func(rec map[string]any)
		errHas string // empty: compatible
	}{
		{"add field without default", "requested",
			addField(map[string]any{"name": "priority", "type": "int"}), "priority"},
		{"rename field without alias", "requested",
			func(rec map[string]any) { field(t, rec, "regulation")["name"] = "law" }, "law"},
		{"change long to string", "completed",
			func(rec map[string]any) { field(t, rec, "elapsed_ms")["type"] = "string" }, "not compatible"},
		{"change nested long to string", "store_done",
			func(rec map[string]any) {
				v := field(t, rec, "verification")["type"].(map[string]any)
				field(t, v, "remaining")["type"] = "string"
			}, "not compatible"},
		{"change array items string to int", "intake",
			func(rec map[string]any) {
				field(t, rec, "session_ids")["type"] = map[string]any{"type": "array", "items": "int"}
			}, "not compatible"},
		{"remove enum symbol", "store_done", removeSymbol(t, "status", "FAILED"), "FAILED"},
		{"remove symbol of enum with default", "intake", removeSymbol(t, "scope", "TENANT"), "lost symbol TENANT"},
		{"rename record", "store_done", func(rec map[string]any) { rec["name"] = "StoreOutcome" }, "names do not match"},

		{"unchanged", "requested", func(map[string]any) {}, ""},
		{"add field with default", "requested",
			addField(map[string]any{"name": "priority", "type": "int", "default": 0}), ""},
		{"add optional field", "store_done",
			addField(map[string]any{"name": "note", "type": []any{"null", "string"}, "default": nil}), ""},
		{"rename field with alias", "requested",
			func(rec map[string]any) {
				f := field(t, rec, "regulation")
				f["name"], f["aliases"] = "law", []any{"regulation"}
			}, ""},
		{"remove field", "store_done", removeField("physical"), ""},
		{"add enum symbol", "store_done",
			func(rec map[string]any) {
				enum := field(t, rec, "status")["type"].(map[string]any)
				enum["symbols"] = append(enum["symbols"].([]any), "SKIPPED")
			}, ""},
		{"promote int to long", "requested",
			func(rec map[string]any) { field(t, rec, "attempt")["type"] = "long" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reader := editedSchema(t, tt.schema, tt.edit)
			err := checkCompatible(reader, []avro.Schema{cur[tt.schema]})
			switch {
			case tt.errHas == "" && err != nil:
				t.Fatalf("compatible edit rejected: %v", err)
			case tt.errHas != "" && err == nil:
				t.Fatalf("incompatible edit accepted")
			case tt.errHas != "" && !strings.Contains(err.Error(), tt.errHas):
				t.Fatalf("error %q does not name %q", err, tt.errHas)
			}
		})
	}
}
