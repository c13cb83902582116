package edgediff_test

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/qdrant/go-client/qdrant"
)

// gen draws payloads, point ids and filters from one seeded source.
type gen struct {
	r *rand.Rand
	// nestedIndexed: the collection has an index on items[].k. Then no is_empty is drawn
	// inside a nested condition: Qdrant answers it from that index or object by object as
	// its planner chooses, by estimated cardinalities (docs/qdrant-emulator.md).
	nestedIndexed bool
}

var (
	words = []string{"a", "b", "c", "A", "ab", "a b", "7", "-3", "x-y", "Ünï"}
	uuids = []string{
		"5f0e8a1c-3b2d-4c1e-9a7f-0123456789ab",
		"0b8e7c6d-5a4f-4e3d-8c2b-a1b2c3d4e5f6",
		"ffffffff-0000-4000-8000-000000000001",
	}
	textWords = []string{"alice", "Alice", "bob", "ice", "erase", "me", "now", "data", "--", "cust_42"}
	// keys the filters name: top-level, dotted, array paths and absent ones.
	keys      = []string{"kw", "num", "uid", "meta.customer_id", "meta.n", "items[].k", "items[].n", "tags", "flag", "txt", "absent", "meta", "items", "meta.absent"}
	itemKeys  = []string{"k", "n", "absent"}
	intValues = []int64{-3, 0, 1, 2, 4, 7, 424242}
)

func (g *gen) pick(s []string) string { return s[g.r.IntN(len(s))] }

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

// uuidSpelling writes one of uuids in one of the spellings Qdrant parses.
func (g *gen) uuidSpelling() string {
	u := g.pick(uuids)
	switch g.r.IntN(6) {
	case 0:
		return strings.ToUpper(u)
	case 1:
		return strings.ReplaceAll(u, "-", "")
	case 2:
		return "{" + u + "}"
	case 3:
		return "urn:uuid:" + u
	}
	return u
}

// scalar is a payload value of any kind, biased to the vocabulary the filters use.
func (g *gen) scalar() any {
	switch g.r.IntN(12) {
	case 0:
		return nil
	case 1:
		return g.chance(0.5)
	case 2, 3:
		return intValues[g.r.IntN(len(intValues))]
	case 4:
		return []float64{4.0, 2.5, -3.0, 0.0}[g.r.IntN(4)]
	case 5:
		return g.uuidSpelling()
	case 6:
		return ""
	}
	return g.pick(words)
}

func (g *gen) value(depth int) any {
	switch g.r.IntN(10) {
	case 0:
		n := g.r.IntN(4)
		l := make([]any, n)
		for i := range l {
			l[i] = g.scalar()
		}
		return l
	case 1:
		if depth > 0 {
			return map[string]any{"k": g.scalar()}
		}
	}
	return g.scalar()
}

// payload is a generated point payload: each key present or absent, of any kind.
func (g *gen) payload() map[string]any {
	p := map[string]any{}
	put := func(k string, v func() any) {
		if g.chance(0.8) {
			p[k] = v()
		}
	}
	put("kw", func() any { return g.value(1) })
	put("num", func() any { return g.value(0) })
	put("uid", func() any {
		if g.chance(0.7) {
			return g.uuidSpelling()
		}
		return g.value(0)
	})
	put("tags", func() any {
		n := g.r.IntN(4)
		l := make([]any, n)
		for i := range l {
			l[i] = g.scalar()
		}
		return l
	})
	put("flag", func() any { return g.scalar() })
	put("txt", func() any {
		if g.chance(0.2) {
			return g.scalar()
		}
		n := 1 + g.r.IntN(4)
		ws := make([]string, n)
		for i := range ws {
			ws[i] = g.pick(textWords)
		}
		return strings.Join(ws, g.pick([]string{" ", ", ", "-"}))
	})
	put("meta", func() any {
		switch g.r.IntN(8) {
		case 0:
			return nil
		case 1:
			return []any{map[string]any{"customer_id": g.scalar()}}
		case 2:
			return g.scalar()
		}
		m := map[string]any{}
		if g.chance(0.8) {
			m["customer_id"] = g.value(0)
		}
		if g.chance(0.6) {
			m["n"] = g.value(0)
		}
		return m
	})
	put("items", func() any {
		if g.chance(0.15) {
			return g.value(1)
		}
		n := g.r.IntN(4)
		l := make([]any, n)
		for i := range l {
			it := map[string]any{}
			if g.chance(0.8) {
				it["k"] = g.value(0)
			}
			if g.chance(0.7) {
				it["n"] = g.value(0)
			}
			l[i] = it
		}
		return l
	})
	return p
}

// id is a point id: a small or large integer, or a UUID.
func (g *gen) id(i int) *qdrant.PointId {
	switch g.r.IntN(3) {
	case 0:
		return qdrant.NewID(fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", g.r.Uint32(), i, g.r.IntN(4096), g.r.IntN(4096), g.r.Uint64()&(1<<48-1)))
	case 1:
		return qdrant.NewIDNum(uint64(i)<<40 | uint64(g.r.IntN(1000)))
	}
	return qdrant.NewIDNum(uint64(i))
}

// keyword and integer values a condition matches against.
func (g *gen) keyword(key string) string {
	if strings.Contains(key, "uid") || g.chance(0.15) {
		return g.uuidSpelling()
	}
	return g.pick(words)
}

func (g *gen) integer() int64 { return intValues[g.r.IntN(len(intValues))] }

// field is one field condition on key.
func (g *gen) field(key string) *qdrant.Condition {
	switch g.r.IntN(16) {
	case 0, 1, 2:
		return qdrant.NewMatchKeyword(key, g.keyword(key))
	case 3, 4:
		return qdrant.NewMatchInt(key, g.integer())
	case 5:
		// No bool match: qdrant-edge-py 0.9.0 reads Python's True as the integer 1.
		return qdrant.NewMatchInt(key, g.integer())
	case 6:
		return qdrant.NewMatchKeywords(key, g.keyword(key), g.keyword(key))
	case 7:
		return qdrant.NewMatchInts(key, g.integer(), g.integer())
	case 8:
		return qdrant.NewMatchExcept(key, g.keyword(key))
	case 9:
		return qdrant.NewMatchExceptInts(key, g.integer(), g.integer())
	case 10:
		lo := float64(g.r.IntN(8) - 3)
		r := &qdrant.Range{}
		if g.chance(0.5) {
			r.Gte = &lo
		} else {
			r.Gt = &lo
		}
		if g.chance(0.5) {
			hi := lo + float64(g.r.IntN(6))
			r.Lt = &hi
		}
		return qdrant.NewRange(key, r)
	case 11:
		return qdrant.NewIsEmpty(key)
	case 12:
		return qdrant.NewIsNull(key)
	}
	if g.chance(0.7) {
		key = "txt"
	}
	switch g.r.IntN(3) {
	case 0:
		return qdrant.NewMatchText(key, g.pick(textWords)+g.pick([]string{"", " " + g.pick(textWords)}))
	case 1:
		return qdrant.NewMatchTextAny(key, g.pick(textWords)+" "+g.pick(textWords))
	}
	return qdrant.NewMatchPhrase(key, g.pick(textWords)+" "+g.pick(textWords))
}

// condition is any condition: mostly on a field, else has_id, nested or a sub-filter.
func (g *gen) condition(ids []*qdrant.PointId, depth int, inNested bool) *qdrant.Condition {
	switch n := g.r.IntN(10); {
	case n == 0 && !inNested:
		var hs []*qdrant.PointId
		for range 1 + g.r.IntN(4) {
			if g.chance(0.2) {
				hs = append(hs, g.id(g.r.IntN(1000)))
				continue
			}
			id := ids[g.r.IntN(len(ids))]
			if u := id.GetUuid(); u != "" && g.chance(0.5) {
				id = qdrant.NewID(strings.ToUpper(u))
			}
			hs = append(hs, id)
		}
		return qdrant.NewHasID(hs...)
	case n == 1 && depth > 0 && !inNested:
		return qdrant.NewNestedFilter("items", g.filter(ids, depth-1, true))
	case n == 2 && depth > 0:
		return qdrant.NewFilterAsCondition(g.filter(ids, depth-1, inNested))
	}
	if inNested {
		key := g.pick(itemKeys)
		if c := g.field(key); !g.nestedIndexed || c.GetIsEmpty() == nil {
			return c
		}
		return qdrant.NewIsNull(key)
	}
	return g.field(g.pick(keys))
}

// filter is a filter of 1 to 5 conditions over must, should, must_not and min_should.
func (g *gen) filter(ids []*qdrant.PointId, depth int, inNested bool) *qdrant.Filter {
	f := &qdrant.Filter{}
	for n := 1 + g.r.IntN(5); n > 0; n-- {
		c := g.condition(ids, depth, inNested)
		switch g.r.IntN(7) {
		case 0, 1:
			f.Must = append(f.Must, c)
		case 2, 3:
			f.Should = append(f.Should, c)
		case 4, 5:
			f.MustNot = append(f.MustNot, c)
		default:
			if f.MinShould == nil {
				f.MinShould = &qdrant.MinShould{MinCount: uint64(g.r.IntN(3))}
			}
			f.MinShould.Conditions = append(f.MinShould.Conditions, c)
		}
	}
	return f
}

// indexes are the payload indexes a world may have: key and type.
var indexes = []struct {
	key string
	ft  qdrant.FieldType
}{
	{"kw", qdrant.FieldType_FieldTypeKeyword},
	{"num", qdrant.FieldType_FieldTypeInteger},
	{"uid", qdrant.FieldType_FieldTypeUuid},
	{"meta.customer_id", qdrant.FieldType_FieldTypeKeyword},
	{"meta.n", qdrant.FieldType_FieldTypeInteger},
	{"tags", qdrant.FieldType_FieldTypeKeyword},
	{"flag", qdrant.FieldType_FieldTypeBool},
	{"txt", qdrant.FieldType_FieldTypeText},
	{"items[].k", qdrant.FieldType_FieldTypeKeyword},
	{"num", qdrant.FieldType_FieldTypeFloat},
	{"kw", qdrant.FieldType_FieldTypeUuid},
	{"uid", qdrant.FieldType_FieldTypeKeyword},
}
