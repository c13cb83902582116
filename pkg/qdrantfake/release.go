package qdrantfake

import (
	"math"
	"math/big"

	"github.com/qdrant/go-client/qdrant"
)

// Release is a Qdrant release whose filter semantics the emulator follows where releases
// differ. docs/qdrant-emulator.md lists the differences.
type Release int32

const (
	// Release117 is Qdrant 1.17 to 1.19, the version the emulator reports: the default.
	Release117 Release = iota
	// Release120 is Qdrant 1.20, the engine of qdrant-edge-py 0.9.0: without a payload
	// index, is_null is true on an array holding a null, and full-text matches (text,
	// text_any, phrase) compare the tokens of the default text index (word tokenizer,
	// lowercased) instead of substrings.
	Release120
)

// SetRelease selects the release whose semantics filters follow, for every collection,
// from the next request on.
func (s *Server) SetRelease(r Release) { s.release.Store(int32(r)) }

// unindexedText answers a full-text match on a key without a text index from release 1.20
// on: the stored strings and the query are tokenised as a text index with default
// parameters would (word tokenizer, lowercase, phrases matched). It returns nil before
// 1.20 and for other matches, which the payload check answers.
func unindexedText(m *qdrant.Match, path []segment, sc scope) func(map[string]*qdrant.Value) bool {
	if sc.release < Release120 {
		return nil
	}
	switch m.GetMatchValue().(type) {
	case *qdrant.Match_Text, *qdrant.Match_TextAny, *qdrant.Match_Phrase:
	default:
		return nil
	}
	idx := &fieldIndex{typ: qdrant.FieldType_FieldTypeText, path: path, text: &qdrant.TextIndexParams{
		Tokenizer: qdrant.TokenizerType_Word, PhraseMatching: qdrant.PtrOf(true),
	}}
	return idx.textMatch(m)
}

// uuidAsNumber answers a keyword match whose value parses as a UUID on a key with a
// numeric (integer or float) index, in a clause the planner reads from the indexes
// (scope.primary): Qdrant's numeric index serves it by the UUID's 128-bit value,
// converted to the index's type (numeric_index/query.rs, filter; numeric_point.rs,
// from_u128: the low 64 bits as an i64, or the nearest f64), so it finds the points
// holding that number and never one holding the string. Elsewhere (under a must_not, or
// in a should beside a condition no index serves) Qdrant checks the payload, the numeric
// index's checker serving ranges only, and so does the emulator: it returns nil.
func (idx *fieldIndex) uuidAsNumber(m *qdrant.Match, sc scope) pred {
	kw, ok := m.GetMatchValue().(*qdrant.Match_Keyword)
	if idx == nil || !sc.primary || !ok {
		return nil
	}
	if idx.typ != qdrant.FieldType_FieldTypeInteger && idx.typ != qdrant.FieldType_FieldTypeFloat {
		return nil
	}
	u, err := parseUUID(kw.Keyword)
	if err != nil {
		return nil
	}
	n := new(big.Int).SetBytes(u[:])
	low := int64(new(big.Int).And(n, new(big.Int).SetUint64(math.MaxUint64)).Uint64())
	f, _ := new(big.Float).SetInt(n).Float64()
	return func(_ *pointKey, p map[string]*qdrant.Value) bool {
		return idx.eachValue(p, func(v *qdrant.Value) bool {
			switch x := v.GetKind().(type) {
			case *qdrant.Value_IntegerValue:
				if idx.typ == qdrant.FieldType_FieldTypeInteger {
					return x.IntegerValue == low
				}
				return float64(x.IntegerValue) == f
			case *qdrant.Value_DoubleValue:
				if idx.typ == qdrant.FieldType_FieldTypeInteger {
					i, ok := idx.indexedValue(v)
					return ok && i.(int64) == low
				}
				return x.DoubleValue == f
			}
			return false
		})
	}
}
