package qdrantfake

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/qdrant/go-client/qdrant"
)

// segment is one step of a payload path: a key, then any number of array selectors
// ("[]" for every element, "[n]" for one).
type segment struct {
	key  string
	idxs []int // -1 for "[]"
}

// parsePath parses Qdrant's JSON path syntax: keys separated by dots, a key optionally
// double-quoted (to hold dots), each key optionally followed by [] or [n].
func parsePath(p string) ([]segment, error) {
	if p == "" {
		return nil, fmt.Errorf("Wrong input: empty payload key")
	}
	if !strings.ContainsAny(p, `.["`) {
		return []segment{{key: p}}, nil
	}
	var segs []segment
	for i := 0; i < len(p); {
		var s segment
		if p[i] == '"' {
			j := strings.IndexByte(p[i+1:], '"')
			if j < 0 {
				return nil, fmt.Errorf("Wrong input: invalid payload key %q", p)
			}
			s.key, i = p[i+1:i+1+j], i+j+2
		} else {
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			s.key, i = p[i:j], j
		}
		if s.key == "" {
			return nil, fmt.Errorf("Wrong input: invalid payload key %q", p)
		}
		for i < len(p) && p[i] == '[' {
			j := strings.IndexByte(p[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("Wrong input: invalid payload key %q", p)
			}
			inner := p[i+1 : i+j]
			if inner == "" {
				s.idxs = append(s.idxs, -1)
			} else {
				n, err := strconv.Atoi(inner)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("Wrong input: invalid payload key %q", p)
				}
				s.idxs = append(s.idxs, n)
			}
			i += j + 1
		}
		segs = append(segs, s)
		if i < len(p) {
			if p[i] != '.' || i == len(p)-1 {
				return nil, fmt.Errorf("Wrong input: invalid payload key %q", p)
			}
			i++
		}
	}
	return segs, nil
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
