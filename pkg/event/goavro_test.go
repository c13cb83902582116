package event

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/iskorotkov/avro/v2"
	"github.com/iskorotkov/avro/v2/soe"
	"github.com/linkedin/goavro/v2"

	"github.com/lethe-erasure/lethe/schemas"
)

// schemaVersion is one schema as released (version >= 1) or current (version 0), with the
// files it is parsed from: those of the names before it, then its own.
type schemaVersion struct {
	name    string
	version int
	files   []string
	schema  avro.Schema
}

func (v schemaVersion) String() string {
	if v.version == 0 {
		return v.name + ".avsc"
	}
	return fmt.Sprintf("released/%s/v%d.avsc", v.name, v.version)
}

// allVersions lists every current and released schema.
func allVersions(t *testing.T) []schemaVersion {
	t.Helper()
	cur, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := Released()
	if err != nil {
		t.Fatal(err)
	}
	var out []schemaVersion
	for i, name := range schemaFiles {
		var files []string
		for _, dep := range schemaFiles[:i+1] {
			files = append(files, dep+".avsc")
		}
		out = append(out, schemaVersion{name, 0, files, cur[name]})
		for k, s := range rel[name] {
			files = nil
			for _, dep := range schemaFiles[:i+1] {
				n := len(rel[dep])
				files = append(files, path.Join("released", dep, fmt.Sprintf("v%d.avsc", min(k+1, n))))
			}
			out = append(out, schemaVersion{name, k + 1, files, s})
		}
	}
	return out
}

// selfContained is the JSON of the last of files with each named type that an earlier
// file defines written out in full where it is first used, as a standalone schema (what
// another Avro library is handed) must have it. It works on the JSON alone.
func selfContained(t *testing.T, files []string) string {
	t.Helper()
	defs := map[string]any{} // fullname -> definition, from the earlier files
	var doc any
	for i, f := range files {
		b, err := fs.ReadFile(schemas.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		var js any
		if err := json.Unmarshal(b, &js); err != nil {
			t.Fatal(err)
		}
		if i < len(files)-1 {
			collectNamed(js, "", defs)
		} else {
			doc = inline(js, "", defs, map[string]bool{})
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var primitives = []string{"null", "boolean", "int", "long", "float", "double", "bytes", "string"}

// fullName resolves a type name against the enclosing namespace.
func fullName(name, ns string) string {
	if strings.Contains(name, ".") || ns == "" {
		return name
	}
	return ns + "." + name
}

// namespaceOf is the namespace a named type object defines for its contents.
func namespaceOf(m map[string]any, ns string) (full, inner string) {
	name, _ := m["name"].(string)
	if n, ok := m["namespace"].(string); ok && !strings.Contains(name, ".") {
		ns = n
	}
	full = fullName(name, ns)
	if i := strings.LastIndex(full, "."); i >= 0 {
		return full, full[:i]
	}
	return full, ""
}

// collectNamed records every named type defined in the schema js, named by its fullname
// so that it can stand anywhere.
func collectNamed(js any, ns string, defs map[string]any) {
	switch v := js.(type) {
	case []any:
		for _, e := range v {
			collectNamed(e, ns, defs)
		}
	case map[string]any:
		switch v["type"] {
		case "record", "error", "enum", "fixed":
			full, inner := namespaceOf(v, ns)
			c := map[string]any{}
			for k, x := range v {
				c[k] = x
			}
			c["name"] = full // a fullname: no namespace attribute needed
			delete(c, "namespace")
			defs[full] = c
			if fields, ok := v["fields"].([]any); ok {
				for _, f := range fields {
					collectNamed(f.(map[string]any)["type"], inner, defs)
				}
			}
		case "array":
			collectNamed(v["items"], ns, defs)
		case "map":
			collectNamed(v["values"], ns, defs)
		default:
			collectNamed(v["type"], ns, defs)
		}
	}
}

// inline returns js with the first use of each type defined in defs and not yet in the
// document replaced by its definition.
func inline(js any, ns string, defs map[string]any, defined map[string]bool) any {
	switch v := js.(type) {
	case string:
		full := fullName(v, ns)
		if slices.Contains(primitives, v) || defined[full] || defs[full] == nil {
			return v
		}
		return inline(defs[full], ns, defs, defined)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = inline(e, ns, defs, defined)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = x
		}
		switch v["type"] {
		case "record", "error", "enum", "fixed":
			full, inner := namespaceOf(v, ns)
			defined[full] = true
			if fields, ok := v["fields"].([]any); ok {
				fs := make([]any, len(fields))
				for i, f := range fields {
					fc := map[string]any{}
					for k, x := range f.(map[string]any) {
						fc[k] = x
					}
					fc["type"] = inline(fc["type"], inner, defs, defined)
					fs[i] = fc
				}
				out["fields"] = fs
			}
		case "array":
			out["items"] = inline(v["items"], ns, defs, defined)
		case "map":
			out["values"] = inline(v["values"], ns, defs, defined)
		default:
			out["type"] = inline(v["type"], ns, defs, defined)
		}
		return out
	}
	return js
}

// withoutLogicalTypes removes every logicalType attribute from the schema JSON s. The
// Parsing Canonical Form strips them ([STRIP]), so the result has the same canonical form.
func withoutLogicalTypes(t *testing.T, s string) string {
	t.Helper()
	var js any
	if err := json.Unmarshal([]byte(s), &js); err != nil {
		t.Fatal(err)
	}
	var strip func(any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			delete(v, "logicalType")
			for _, x := range v {
				strip(x)
			}
		case []any:
			for _, x := range v {
				strip(x)
			}
		}
	}
	strip(js)
	b, err := json.Marshal(js)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCanonicalFormMatchesGoavro checks CanonicalForm and Fingerprint of every current and
// released schema against an independent implementation, goavro's Parsing Canonical Form
// and Rabin fingerprint. goavro keeps a primitive type that has a logicalType as
// {"type":"long"} where the specification reduces it to "long" (goavro issue 174), so
// goavro is handed the schema without its logicalType attributes, which by the
// specification has the same canonical form; the schema as it is must give goavro's
// variant, the form whose fingerprint Decode accepts for records goavro framed itself.
func TestCanonicalFormMatchesGoavro(t *testing.T) {
	versions := allVersions(t)
	if len(versions) < 2*len(schemaFiles) {
		t.Fatalf("%d schemas: every name must have a current and a released version", len(versions))
	}
	for _, v := range versions {
		t.Run(v.String(), func(t *testing.T) {
			js := selfContained(t, v.files)
			spec, err := goavro.NewCodec(withoutLogicalTypes(t, js))
			if err != nil {
				t.Fatalf("goavro rejects the self-contained schema: %v\n%s", err, js)
			}
			if got, want := CanonicalForm(v.schema), spec.CanonicalSchema(); got != want {
				t.Errorf("canonical form\n got %s\nwant %s (goavro)", got, want)
			}
			if got, want := Fingerprint(v.schema), spec.Rabin; got != want {
				t.Errorf("fingerprint %016x, goavro %016x", got, want)
			}

			asIs, err := goavro.NewCodec(js)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := goavroForm(v.schema), asIs.CanonicalSchema(); got != want {
				t.Errorf("goavro's form\n got %s\nwant %s", got, want)
			}
			if got, want := rabin([]byte(goavroForm(v.schema))), asIs.Rabin; got != want {
				t.Errorf("goavro's fingerprint %016x, goavro %016x", got, want)
			}
		})
	}
}

// TestCanonicalFormStrips checks the rules goavro's agreement does not reach on Lethe's
// own schemas: doc, default, aliases, order and logicalType are stripped, primitives
// reduced, fixed written with its size, a repeated named type by its fullname.
func TestCanonicalFormStrips(t *testing.T) {
	s, err := avro.Parse(`{"type":"record","name":"R","namespace":"n.s","doc":"d","aliases":["Q"],"fields":[
		{"name":"a","type":{"type":"long","logicalType":"timestamp-millis"},"doc":"x","default":0,"order":"descending"},
		{"name":"b","type":{"type":"fixed","name":"F","size":16,"logicalType":"duration","aliases":["G"]}},
		{"name":"c","type":["null",{"type":"map","values":{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}}],"default":null},
		{"name":"d","type":"F"},
		{"name":"e","type":{"type":"enum","name":"E","namespace":"other","symbols":["X","Y"],"default":"X"}},
		{"name":"f","type":{"type":"array","items":"other.E"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"n.s.R","type":"record","fields":[` +
		`{"name":"a","type":"long"},` +
		`{"name":"b","type":{"name":"n.s.F","type":"fixed","size":16}},` +
		`{"name":"c","type":["null",{"type":"map","values":"bytes"}]},` +
		`{"name":"d","type":"n.s.F"},` +
		`{"name":"e","type":{"name":"other.E","type":"enum","symbols":["X","Y"]}},` +
		`{"name":"f","type":{"type":"array","items":"other.E"}}]}`
	if got := CanonicalForm(s); got != want {
		t.Errorf("canonical form\n got %s\nwant %s", got, want)
	}
	spec, err := goavro.NewCodec(want)
	if err != nil {
		t.Fatal(err)
	}
	if spec.CanonicalSchema() != want || Fingerprint(s) != spec.Rabin {
		t.Errorf("goavro: canonical %s fingerprint %016x, Lethe's %016x", spec.CanonicalSchema(), spec.Rabin, Fingerprint(s))
	}
}

// TestHeaderIsSpecFingerprint checks that every type writes the specification's
// fingerprint of its current schema, as computed by goavro.
func TestHeaderIsSpecFingerprint(t *testing.T) {
	for _, v := range allVersions(t) {
		if v.version != 0 {
			continue
		}
		typ := typeNamed(t, v.name)
		spec, err := goavro.NewCodec(withoutLogicalTypes(t, selfContained(t, v.files)))
		if err != nil {
			t.Fatal(err)
		}
		want := binary.LittleEndian.AppendUint64([]byte{0xc3, 0x01}, spec.Rabin)
		if !bytes.Equal(typ.header, want) {
			t.Errorf("%s: header %x, want %x", v.name, typ.header, want)
		}
	}
}

func typeNamed(t *testing.T, name string) *Type {
	t.Helper()
	for _, typ := range []*Type{Intake, Request, Done, Completed, Overdues, Suppressions, Reappear, Found} {
		if typ.name == name {
			return typ
		}
	}
	t.Fatalf("no type %s", name)
	return nil
}

// TestDecodeGoavroRecords decodes intake records that goavro encoded from intake.avsc:
// framed with the specification's fingerprint, and as goavro frames them itself.
func TestDecodeGoavroRecords(t *testing.T) {
	js, err := fs.ReadFile(schemas.FS, "intake.avsc")
	if err != nil {
		t.Fatal(err)
	}
	codec, err := goavro.NewCodec(string(js))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := goavro.NewCodec(withoutLogicalTypes(t, string(js)))
	if err != nil {
		t.Fatal(err)
	}
	native := map[string]any{
		"tenant_id": "acme", "subject_id": "cust-42", "session_ids": []any{"sess-1"},
		"regulation": "GDPR", "scope": "TENANT", "idempotency_key": "idem-7", "source": "shopbot",
		"submitted_at": at(30, 9, 15, 30, 123),
	}
	body, err := codec.BinaryFromNative(nil, native)
	if err != nil {
		t.Fatal(err)
	}
	own, err := codec.SingleFromNative(nil, native)
	if err != nil {
		t.Fatal(err)
	}
	want := IntakeRequest{TenantID: "acme", SubjectID: "cust-42", SessionIDs: []string{"sess-1"}, Regulation: "GDPR",
		Scope: ScopeTenant, IdempotencyKey: "idem-7", Source: "shopbot", SubmittedAt: at(30, 9, 15, 30, 123)}
	for name, data := range map[string][]byte{
		"spec fingerprint":    append(binary.LittleEndian.AppendUint64([]byte{0xc3, 0x01}, spec.Rabin), body...),
		"goavro's own header": own,
	} {
		t.Run(name, func(t *testing.T) {
			var got IntakeRequest
			if err := Intake.Decode(data, &got); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			got.SubmittedAt = got.SubmittedAt.UTC()
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded %+v, want %+v", got, want)
			}
		})
	}
	if bytes.Equal(own[:10], Intake.header) {
		t.Errorf("goavro's own header equals the specification's; goavro issue 174 is fixed, goavroForm can go")
	}
}

// TestDecodeLegacyFingerprints decodes records written before the header carried the
// specification's fingerprint (testdata/legacy, copies of the golden files of that
// time): each decodes, and encoding the result with the released writer schema it names
// gives back its body byte for byte, so no field of that version was lost.
func TestDecodeLegacyFingerprints(t *testing.T) {
	rel, err := Released()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range goldens() {
		if g.typ == Suppressions || g.typ == Reappear || g.typ == Found {
			continue // released after the header followed the specification: no legacy records exist
		}
		t.Run(g.typ.Name(), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "legacy", g.typ.Name()+".golden"))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(data[:10], g.typ.header) {
				t.Fatalf("fixture carries the current header; it must be a record of the earlier format")
			}
			var writer avro.Schema
			for _, s := range rel[g.typ.Name()] {
				if fp, _ := soe.ComputeFingerprint(s); bytes.Equal(fp, data[2:10]) {
					writer = s
				}
			}
			if writer == nil {
				t.Fatalf("fingerprint %x is no released version's earlier fingerprint", data[2:10])
			}
			got := g.fresh()
			if err := g.typ.Decode(data, got); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			again, err := avro.Marshal(writer, got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, data[10:]) {
				t.Errorf("fields lost in decoding:\n got %+v\nbody %x\nwant %x", g.deref(got), again, data[10:])
			}
		})
	}
}
