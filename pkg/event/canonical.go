package event

import (
	"strconv"
	"strings"

	"github.com/iskorotkov/avro/v2"
)

// CanonicalForm is the Parsing Canonical Form of s as the Avro specification defines it:
//
//   - primitive types in their simple form ("long", never {"type":"long",...}), so a
//     logicalType attribute is dropped with the object around it;
//   - named types (record, enum, fixed) by their fullname, without namespace; the first
//     occurrence of a named type is written out in full, every later one as its fullname
//     only, so the form is a self-contained schema even when the source file refers to a
//     type defined in another file;
//   - only the attributes that matter for parsing data — name, type, fields, symbols,
//     items, values, size — in that order; doc, aliases, default, order, logicalType and
//     every other attribute are stripped;
//   - sizes as plain integers, no whitespace outside strings. Names and symbols need no
//     escapes (Avro restricts them to [A-Za-z0-9_.]), so strings are written as they are.
//
// An error schema is written with type "record", as the Java reference implementation
// does.
func CanonicalForm(s avro.Schema) string {
	p := canonical{seen: map[string]bool{}}
	p.schema(s)
	return p.b.String()
}

// Fingerprint is the CRC-64-AVRO (Rabin) fingerprint of s's Parsing Canonical Form, the
// fingerprint of Avro single-object encoding (written little-endian after the magic).
func Fingerprint(s avro.Schema) uint64 { return rabin([]byte(CanonicalForm(s))) }

// goavroForm is the canonical form github.com/linkedin/goavro/v2 computes for s. It
// differs from the specification's in one place: a primitive type with a logicalType is
// written as {"type":"long"} instead of "long" (goavro issue 174), so goavro's own
// single-object encoding of a schema with logical types carries another fingerprint.
// Decode accepts that fingerprint too; nothing writes it.
func goavroForm(s avro.Schema) string {
	p := canonical{seen: map[string]bool{}, logicalAsObject: true}
	p.schema(s)
	return p.b.String()
}

type canonical struct {
	b               strings.Builder
	seen            map[string]bool // named types written out in full so far
	logicalAsObject bool            // goavroForm
}

func (p *canonical) schema(s avro.Schema) {
	switch s := s.(type) {
	case *avro.RefSchema:
		p.schema(s.Schema())
	case *avro.NullSchema:
		p.b.WriteString(`"null"`)
	case *avro.PrimitiveSchema:
		if p.logicalAsObject && s.Logical() != nil {
			p.b.WriteString(`{"type":"` + string(s.Type()) + `"}`)
			return
		}
		p.b.WriteString(`"` + string(s.Type()) + `"`)
	case *avro.RecordSchema:
		if p.named(s) {
			return
		}
		p.b.WriteString(`,"type":"record","fields":[`)
		for i, f := range s.Fields() {
			if i > 0 {
				p.b.WriteByte(',')
			}
			p.b.WriteString(`{"name":"` + f.Name() + `","type":`)
			p.schema(f.Type())
			p.b.WriteByte('}')
		}
		p.b.WriteString(`]}`)
	case *avro.EnumSchema:
		if p.named(s) {
			return
		}
		p.b.WriteString(`,"type":"enum","symbols":[`)
		for i, sym := range s.Symbols() {
			if i > 0 {
				p.b.WriteByte(',')
			}
			p.b.WriteString(`"` + sym + `"`)
		}
		p.b.WriteString(`]}`)
	case *avro.FixedSchema:
		if p.named(s) {
			return
		}
		p.b.WriteString(`,"type":"fixed","size":` + strconv.Itoa(s.Size()) + `}`)
	case *avro.ArraySchema:
		p.b.WriteString(`{"type":"array","items":`)
		p.schema(s.Items())
		p.b.WriteByte('}')
	case *avro.MapSchema:
		p.b.WriteString(`{"type":"map","values":`)
		p.schema(s.Values())
		p.b.WriteByte('}')
	case *avro.UnionSchema:
		p.b.WriteByte('[')
		for i, t := range s.Types() {
			if i > 0 {
				p.b.WriteByte(',')
			}
			p.schema(t)
		}
		p.b.WriteByte(']')
	default:
		panic("event: canonical form of unknown schema type " + string(s.Type()))
	}
}

// named writes the fullname of s and reports true when s was written out before;
// otherwise it marks s seen and opens its object with the name.
func (p *canonical) named(s avro.NamedSchema) bool {
	name := s.FullName()
	if p.seen[name] {
		p.b.WriteString(`"` + name + `"`)
		return true
	}
	p.seen[name] = true
	p.b.WriteString(`{"name":"` + name + `"`)
	return false
}

// rabinEmpty is the CRC-64-AVRO fingerprint of no bytes, the polynomial of the
// specification's algorithm.
const rabinEmpty = 0xc15d213aa4d7a795

var rabinTable = func() (t [256]uint64) {
	for i := range t {
		fp := uint64(i)
		for range 8 {
			fp = (fp >> 1) ^ (rabinEmpty & -(fp & 1))
		}
		t[i] = fp
	}
	return t
}()

// rabin is the CRC-64-AVRO fingerprint of b, as the specification's reference code
// computes it.
func rabin(b []byte) uint64 {
	fp := uint64(rabinEmpty)
	for _, c := range b {
		fp = (fp >> 8) ^ rabinTable[byte(fp)^c]
	}
	return fp
}
