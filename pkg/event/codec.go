package event

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"github.com/iskorotkov/avro/v2"
	"github.com/iskorotkov/avro/v2/soe"

	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/schemas"
)

// Errors returned by Decode. Both are marked retry.Permanent: the record will never decode.
var (
	ErrUnknownSchema = retry.Permanent(errors.New("event: unknown schema fingerprint"))
	ErrMalformed     = retry.Permanent(errors.New("event: malformed record"))
)

// schemaFiles lists the schema names in dependency order (later ones use named types of
// earlier ones).
var schemaFiles = []string{"intake", "requested", "store_done", "completed", "overdue", "suppression", "reappeared", "store_found"}

// Type is one event type's codec: the current schema and every released writer schema.
//
// Encode writes the single-object encoding header with the specification's fingerprint
// (Fingerprint, over the Parsing Canonical Form). Decode finds the writer schema of a
// record by its header's fingerprint, which is one of, for every released version and the
// current schema:
//   - the specification's fingerprint, what Lethe writes and what standard Avro libraries
//     (Java, Python, Rust, ...) write;
//   - the fingerprint Lethe wrote before it followed the specification, taken over a form
//     that keeps logicalType (hamba/avro's schema string, also what hamba/avro's soe
//     package writes), so records already in topics keep decoding;
//   - the fingerprint github.com/linkedin/goavro/v2 writes (see goavroForm).
//
// All of them lead to the same writer schema.
type Type struct {
	name    string
	current avro.Schema
	header  []byte                 // SOE header of the current schema (spec fingerprint)
	writers map[string]avro.Schema // fingerprint (8 bytes, little-endian) -> writer schema
}

// Codecs of the four event types.
var (
	Intake    = mustType("intake")
	Request   = mustType("requested")
	Done      = mustType("store_done")
	Completed = mustType("completed")
	Overdues  = mustType("overdue")
	Reappear  = mustType("reappeared")
	// Suppressions is the codec of erasure.suppressions.
	Suppressions = mustType("suppression")
	// Found is the codec of erasure.store.found.
	Found = mustType("store_found")
)

// Name is the schema file name of t ("intake", "requested", ...).
func (t *Type) Name() string { return t.name }

// Schema is t's current schema.
func (t *Type) Schema() avro.Schema { return t.current }

// Encode writes v in single-object encoding with the current schema.
func (t *Type) Encode(v any) ([]byte, error) {
	body, err := avro.Marshal(t.current, v)
	if err != nil {
		return nil, fmt.Errorf("event: encode %s: %w", t.name, err)
	}
	return append(append(make([]byte, 0, len(t.header)+len(body)), t.header...), body...), nil
}

// Decode reads a single-object encoded record written with any released version of t's
// schema into v. It fails with ErrUnknownSchema or ErrMalformed.
func (t *Type) Decode(data []byte, v any) error {
	fp, body, err := soe.ParseHeader(data)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrMalformed, t.name, err)
	}
	writer, ok := t.writers[string(fp)]
	if !ok {
		return fmt.Errorf("%w: %s %x", ErrUnknownSchema, t.name, fp)
	}
	return t.DecodeBody(writer, body, v)
}

// DecodeBody reads body, one Avro datum written with the writer schema (without any
// framing), into v by the current schema, resolving the writer schema against it. It is
// what Decode does after it found the writer schema by fingerprint; framings that find it
// another way (a Schema Registry id) call it. It fails with ErrUnknownSchema when writer
// cannot be read by the current schema, or ErrMalformed.
func (t *Type) DecodeBody(writer avro.Schema, body []byte, v any) error {
	if err := validate(writer, body); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrMalformed, t.name, err)
	}
	schema := t.current
	if writer != t.current {
		var err error
		schema, err = avro.NewSchemaCompatibility().Resolve(t.current, writer)
		if err != nil {
			return fmt.Errorf("%w: %s: resolve: %v", ErrUnknownSchema, t.name, err)
		}
	}
	if err := avro.Unmarshal(schema, body, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrMalformed, t.name, err)
	}
	return nil
}

// EncodeBody writes v with the current schema, without any framing.
func (t *Type) EncodeBody(v any) ([]byte, error) {
	body, err := avro.Marshal(t.current, v)
	if err != nil {
		return nil, fmt.Errorf("event: encode %s: %w", t.name, err)
	}
	return body, nil
}

func mustType(name string) *Type {
	cur, err := Current()
	if err != nil {
		panic(err)
	}
	rel, err := Released()
	if err != nil {
		panic(err)
	}
	t := &Type{name: name, current: cur[name], writers: map[string]avro.Schema{}}
	t.header = append(append([]byte{}, soe.Magic...), fingerprintBytes(Fingerprint(t.current))...)
	canon := map[string]string{} // fingerprint -> canonical form of the schema it leads to
	for _, s := range append(rel[name], t.current) {
		form := CanonicalForm(s)
		if form == CanonicalForm(t.current) {
			s = t.current // same data layout: no resolution needed
		}
		legacy, err := soe.ComputeFingerprint(s)
		if err != nil {
			panic(err)
		}
		for _, fp := range [][]byte{fingerprintBytes(rabin([]byte(form))), legacy, fingerprintBytes(rabin([]byte(goavroForm(s))))} {
			if other, ok := canon[string(fp)]; ok && other != form {
				panic(fmt.Sprintf("event: %s: fingerprint %x of two schema versions that differ", name, fp))
			}
			canon[string(fp)] = form
			t.writers[string(fp)] = s // later versions win among those of the same form
		}
	}
	return t
}

// fingerprintBytes is fp as single-object encoding writes it: 8 bytes, little-endian.
func fingerprintBytes(fp uint64) []byte { return binary.LittleEndian.AppendUint64(nil, fp) }

// Current parses the current schemas, by name.
func Current() (map[string]avro.Schema, error) {
	files := make([]string, len(schemaFiles))
	for i, n := range schemaFiles {
		files[i] = n + ".avsc"
	}
	return parseAll(files)
}

// Released parses every released schema version, by name, oldest first.
func Released() (map[string][]avro.Schema, error) {
	versions := map[string][]string{}
	maxV := 0
	for _, n := range schemaFiles {
		entries, err := fs.ReadDir(schemas.FS, path.Join("released", n))
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			versions[n] = append(versions[n], e.Name())
		}
		sort.Slice(versions[n], func(i, j int) bool { return versionNum(versions[n][i]) < versionNum(versions[n][j]) })
		maxV = max(maxV, len(versions[n]))
	}
	// Version k of every schema is parsed with the version-k (or latest older) schemas of
	// the names before it, so named types resolve as they were released.
	out := map[string][]avro.Schema{}
	for k := 0; k < maxV; k++ {
		var files []string
		for _, n := range schemaFiles {
			vs := versions[n]
			files = append(files, path.Join("released", n, vs[min(k, len(vs)-1)]))
		}
		parsed, err := parseAll(files)
		if err != nil {
			return nil, err
		}
		for _, n := range schemaFiles {
			if k < len(versions[n]) {
				out[n] = append(out[n], parsed[n])
			}
		}
	}
	return out, nil
}

func versionNum(file string) int {
	var v int
	_, _ = fmt.Sscanf(file, "v%d.avsc", &v) // not vN.avsc: 0, sorted first
	return v
}

func parseAll(files []string) (map[string]avro.Schema, error) {
	cache := &avro.SchemaCache{}
	out := map[string]avro.Schema{}
	for i, f := range files {
		b, err := fs.ReadFile(schemas.FS, f)
		if err != nil {
			return nil, err
		}
		s, err := avro.ParseBytesWithCache(b, "", cache)
		if err != nil {
			return nil, fmt.Errorf("event: parse %s: %w", f, err)
		}
		out[schemaFiles[i]] = s
	}
	return out, nil
}

// SingleObject frames body, written with writer, in single-object encoding, provided
// writer has the canonical form of one of t's released or current schemas (its
// fingerprint is one Decode knows); otherwise it fails with ErrUnknownSchema. It turns a
// record framed another way into one that Decode reads, without decoding it.
func (t *Type) SingleObject(writer avro.Schema, body []byte) ([]byte, error) {
	fp := fingerprintBytes(Fingerprint(writer))
	if _, ok := t.writers[string(fp)]; !ok {
		return nil, fmt.Errorf("%w: %s: writer schema is none of the released ones", ErrUnknownSchema, t.name)
	}
	return append(append(append(make([]byte, 0, 10+len(body)), soe.Magic...), fp...), body...), nil
}
