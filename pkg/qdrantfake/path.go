package qdrantfake

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/qdrantstore/qdrantkey"
)

// segment is one step of a payload path: a key, then any number of array selectors
// ("[]" for every element, "[n]" for one).
type segment struct {
	key  string
	idxs []int // -1 for "[]"
}

// parsePath parses Qdrant's JSON path grammar (lib/segment/src/json_path/parse.rs,
// json_path; see package qdrantkey): a first key, then any number of ".key", "[n]" and
// "[]" items. Anything else is refused, as Qdrant refuses it with InvalidArgument
// "Invalid json path".
func parsePath(p string) ([]segment, error) {
	items, err := qdrantkey.Parse(p)
	if err != nil {
		return nil, fmt.Errorf("Wrong input: Invalid json path: '%s'", p)
	}
	var segs []segment
	for _, it := range items {
		if it.IsKey {
			segs = append(segs, segment{key: it.Key})
			continue
		}
		last := &segs[len(segs)-1]
		last.idxs = append(last.idxs, it.Index)
	}
	return segs, nil
}

// canonical renders a parsed path in one spelling (keys quoted only when the raw grammar
// cannot hold them), so that "a.b" and "\"a\".b" name the same payload index, as the
// parsed JsonPath Qdrant keys its indexes by does.
func canonical(segs []segment) string {
	var b strings.Builder
	for i, s := range segs {
		if i > 0 {
			b.WriteByte('.')
		}
		if rawKey(s.key) {
			b.WriteString(s.key)
		} else {
			b.WriteString(strconv.Quote(s.key))
		}
		for _, ix := range s.idxs {
			if ix < 0 {
				b.WriteString("[]")
			} else {
				fmt.Fprintf(&b, "[%d]", ix)
			}
		}
	}
	return b.String()
}

func rawKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !rawRune(r) {
			return false
		}
	}
	return true
}

// rawRune is Rust's char::is_alphanumeric (letters and numbers), '_' or '-'.
func rawRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_' || r == '-'
}

// valuesAt returns the values at path in payload, as Qdrant's JsonPath does: keys descend
// into objects only (an array is never implicitly flattened by a key), "[]" yields every
// element, "[n]" one. The values themselves are not flattened: a field holding an array
// yields that array, which the condition checks then look into.
func valuesAt(payload map[string]*qdrant.Value, path []segment) []*qdrant.Value {
	if len(path) == 1 && len(path[0].idxs) == 0 {
		if v, ok := payload[path[0].key]; ok && v != nil {
			return []*qdrant.Value{v}
		}
		return nil
	}
	var out []*qdrant.Value
	var walk func(m map[string]*qdrant.Value, segs []segment)
	walk = func(m map[string]*qdrant.Value, segs []segment) {
		v, ok := m[segs[0].key]
		if !ok || v == nil {
			return
		}
		cur := []*qdrant.Value{v}
		for _, ix := range segs[0].idxs {
			var next []*qdrant.Value
			for _, c := range cur {
				l := c.GetListValue()
				if l == nil {
					continue
				}
				if ix < 0 {
					next = append(next, l.GetValues()...)
				} else if ix < len(l.GetValues()) {
					next = append(next, l.GetValues()[ix])
				}
			}
			cur = next
		}
		for _, c := range cur {
			if len(segs) == 1 {
				out = append(out, c)
			} else if st := c.GetStructValue(); st != nil {
				walk(st.GetFields(), segs[1:])
			}
		}
	}
	walk(payload, path)
	return out
}
