package qdrantfake

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// pred reports whether a point (its id, when ids are known, and its payload) passes.
type pred func(k *pointKey, payload map[string]*qdrant.Value) bool

// indexLookup returns the payload index on a canonical path, or nil. A nil indexLookup
// means no index anywhere.
type indexLookup func(key string) *fieldIndex

func (ix indexLookup) on(path []segment) *fieldIndex {
	if ix == nil {
		return nil
	}
	return ix(canonical(path))
}

// scope is what a condition is compiled in: the payload indexes it may read (nil: none),
// the release whose semantics apply, and whether it sits under a must_not, where Qdrant
// checks every condition point by point instead of reading its candidates from an index.
type scope struct {
	ix      indexLookup
	release Release
	negated bool
	// primary: the condition's clause is one Qdrant's planner reads from the indexes (a
	// must, or a should or min_should whose every condition an index serves, in a filter
	// that is itself read so) rather than checking it point by point.
	primary bool
	// nested: the condition sits in the filter of a nested condition (the first level).
	nested *nestedCtx
}

// nestedCtx is what a nested condition's filter is compiled in: the array of objects it
// iterates, the point's indexes, and the keys of its is_empty conditions that an index
// on key[].field answers for the whole point rather than per object (filled by compile,
// for those in clauses the planner reads from the indexes).
type nestedCtx struct {
	path  []segment
	ix    indexLookup
	empty []string
}

// covers reports whether an index on the nested array's path followed by path exists.
func (n *nestedCtx) covers(path []segment) bool {
	return n != nil && n.ix.on(append(slices.Clone(n.path), path...)) != nil
}

// emptyKey is where the nested condition hands its filter the point-level is_empty of
// key: a payload key no valid path can name.
func emptyKey(key string) string { return "\x00is_empty\x00" + key }

// noIndex is sc without payload indexes (inside a nested condition).
func (sc scope) noIndex() scope { sc.ix = nil; return sc }

// compile turns a filter into a predicate with Qdrant's semantics (see
// lib/segment/src/payload_storage/query_checker.rs): every must condition, at least one
// should condition when there are any, at least min_count of min_should, no must_not
// condition. A nil or empty filter passes every point. A Condition with nothing set is
// dropped, as Qdrant's conditions_helper_from_grpc drops it (lib/api/src/grpc/conversions.rs),
// so a should made only of those, or an empty nested filter, passes every point.
// Conditions on a key with a payload index of ix are answered as that index answers them
// (condition_converter.rs, field_condition_checker). Conditions the emulator does not
// implement fail compilation with codes.Unimplemented, malformed ones with
// codes.InvalidArgument, so no request half-applies.
func compile(f *qdrant.Filter, sc scope) (pred, error) {
	if f == nil {
		return func(*pointKey, map[string]*qdrant.Value) bool { return true }, nil
	}
	in := func(cs []*qdrant.Condition, primary bool) scope {
		c := sc
		c.primary = primary && sc.primary && !sc.negated
		return c
	}
	must, err := compileAll(f.GetMust(), in(f.GetMust(), true))
	if err != nil {
		return nil, err
	}
	should, err := compileAll(f.GetShould(), in(f.GetShould(), allServed(f.GetShould(), sc)))
	if err != nil {
		return nil, err
	}
	neg := sc
	neg.negated, neg.primary = true, false
	mustNot, err := compileAll(f.GetMustNot(), neg)
	if err != nil {
		return nil, err
	}
	var minShould []pred
	var minCount int
	if ms := f.GetMinShould(); ms != nil {
		if minShould, err = compileAll(ms.GetConditions(), in(ms.GetConditions(), allServed(ms.GetConditions(), sc))); err != nil {
			return nil, err
		}
		minCount = int(ms.GetMinCount())
	}
	return func(k *pointKey, p map[string]*qdrant.Value) bool {
		if len(should) > 0 && !anyOf(should, k, p) {
			return false
		}
		if minShould != nil {
			n := 0
			for _, c := range minShould {
				if n >= minCount {
					break
				}
				if c(k, p) {
					n++
				}
			}
			if n < minCount {
				return false
			}
		}
		for _, c := range must {
			if !c(k, p) {
				return false
			}
		}
		for _, c := range mustNot {
			if c(k, p) {
				return false
			}
		}
		return true
	}, nil
}

// allServed reports whether an index serves every one of cs, so that Qdrant's planner
// reads their union from the indexes: has_id, a keyword match or match-any on a keyword
// index, an integer match or match-any on an integer index, a range on an integer or
// float index, a keyword UUID on an integer or float index, inside a nested condition
// is_empty on a field an index on key[].field covers, and a nested condition whose must
// (or, without one, should) is all such. The planner's other choices, which depend on
// estimated cardinalities, are not modelled.
func allServed(cs []*qdrant.Condition, sc scope) bool {
	ix := sc.ix
	for _, c := range cs {
		switch v := c.GetConditionOneOf().(type) {
		case *qdrant.Condition_HasId:
			continue
		case *qdrant.Condition_IsEmpty:
			if path, err := parsePath(v.IsEmpty.GetKey()); err == nil && sc.nested.covers(path) {
				continue
			}
		case *qdrant.Condition_Nested:
			key := v.Nested.GetKey()
			if !strings.HasSuffix(key, "[]") {
				key += "[]"
			}
			path, err := parsePath(key)
			if err != nil || sc.nested != nil {
				return false
			}
			in := scope{nested: &nestedCtx{path: path, ix: ix}}
			f := v.Nested.GetFilter()
			if len(f.GetMust()) > 0 && allServed(f.GetMust(), in) || len(f.GetMust()) == 0 && len(f.GetShould()) > 0 && allServed(f.GetShould(), in) {
				continue
			}
		case *qdrant.Condition_Field:
			path, err := parsePath(v.Field.GetKey())
			if err != nil {
				return false
			}
			idx := ix.on(path)
			if idx == nil {
				return false
			}
			numeric := idx.typ == qdrant.FieldType_FieldTypeInteger || idx.typ == qdrant.FieldType_FieldTypeFloat
			switch m := v.Field.GetMatch().GetMatchValue().(type) {
			case *qdrant.Match_Keyword:
				if idx.typ == qdrant.FieldType_FieldTypeKeyword {
					continue
				}
				if _, err := parseUUID(m.Keyword); err == nil && numeric {
					continue
				}
			case *qdrant.Match_Keywords:
				if idx.typ == qdrant.FieldType_FieldTypeKeyword {
					continue
				}
			case *qdrant.Match_Integer, *qdrant.Match_Integers:
				if idx.typ == qdrant.FieldType_FieldTypeInteger {
					continue
				}
			case nil:
				if v.Field.GetRange() != nil && numeric {
					continue
				}
			}
		}
		return false
	}
	return true
}

func anyOf(ps []pred, k *pointKey, p map[string]*qdrant.Value) bool {
	for _, c := range ps {
		if c(k, p) {
			return true
		}
	}
	return false
}

func compileAll(cs []*qdrant.Condition, sc scope) ([]pred, error) {
	out := make([]pred, 0, len(cs))
	for _, c := range cs {
		if c.GetConditionOneOf() == nil {
			continue // dropped, as Qdrant drops it
		}
		p, err := compileCondition(c, sc)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func compileCondition(c *qdrant.Condition, sc scope) (pred, error) {
	ix := sc.ix
	switch v := c.GetConditionOneOf().(type) {
	case *qdrant.Condition_Filter:
		return compile(v.Filter, sc)
	case *qdrant.Condition_Field:
		return compileField(v.Field, sc)
	case *qdrant.Condition_HasId:
		ids := map[pointKey]bool{}
		for _, id := range v.HasId.GetHasId() {
			k, err := keyOf(id)
			if err != nil {
				return nil, status.Error(codes.InvalidArgument, err.Error())
			}
			ids[k] = true
		}
		// Inside a nested condition ids are unknown (k == nil): Qdrant answers false.
		return func(k *pointKey, _ map[string]*qdrant.Value) bool { return k != nil && ids[*k] }, nil
	case *qdrant.Condition_IsEmpty:
		path, err := parsePath(v.IsEmpty.GetKey())
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		if n := sc.nested; sc.primary && n.covers(path) {
			// Qdrant reads it from the index on key[].field: for the whole point. Checked
			// point by point (under a must_not, say), it is answered object by object.
			k := emptyKey(v.IsEmpty.GetKey())
			n.empty = append(n.empty, v.IsEmpty.GetKey())
			return func(_ *pointKey, p map[string]*qdrant.Value) bool { return p[k].GetBoolValue() }, nil
		}
		return func(_ *pointKey, p map[string]*qdrant.Value) bool { return emptyAt(p, path) }, nil
	case *qdrant.Condition_IsNull:
		path, err := parsePath(v.IsNull.GetKey())
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		if ix.on(path) != nil || sc.release >= Release120 {
			return func(_ *pointKey, p map[string]*qdrant.Value) bool { return nullFlag(valuesAt(p, path)) }, nil
		}
		return func(_ *pointKey, p map[string]*qdrant.Value) bool {
			for _, x := range valuesAt(p, path) {
				if isNull(x) {
					return true
				}
			}
			return false
		}, nil
	case *qdrant.Condition_Nested:
		key := v.Nested.GetKey()
		if len(key) < 2 || key[len(key)-2:] != "[]" {
			key += "[]"
		}
		path, err := parsePath(key)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		if v.Nested.GetFilter() == nil {
			return nil, status.Error(codes.InvalidArgument, "Wrong input: Nested condition must have a filter")
		}
		in := sc.noIndex()
		in.nested, in.primary = nil, sc.primary && !sc.negated
		nc := &nestedCtx{path: path, ix: ix}
		if sc.nested == nil {
			in.nested = nc
		}
		inner, err := compile(v.Nested.GetFilter(), in)
		if err != nil {
			return nil, err
		}
		return func(_ *pointKey, p map[string]*qdrant.Value) bool {
			var point map[string]*qdrant.Value // the point-level answers the filter reads
			if len(nc.empty) > 0 {
				point = map[string]*qdrant.Value{}
				for _, key := range nc.empty {
					field, _ := parsePath(key)
					point[emptyKey(key)] = qdrant.NewValueBool(emptyAt(p, append(slices.Clone(path), field...)))
				}
			}
			for _, x := range valuesAt(p, path) {
				st := x.GetStructValue()
				if st == nil {
					continue
				}
				obj := st.GetFields()
				if point != nil {
					with := make(map[string]*qdrant.Value, len(obj)+len(point))
					maps.Copy(with, obj)
					maps.Copy(with, point)
					obj = with
				}
				if inner(nil, obj) {
					return true
				}
			}
			return false
		}, nil
	case *qdrant.Condition_HasVector:
		return nil, status.Error(codes.Unimplemented, "qdrantfake: has_vector condition is not implemented")
	default:
		return nil, status.Error(codes.InvalidArgument, "Wrong input: Malformed Condition type")
	}
}

// emptyAt is is_empty of path on a payload: no value there but nulls and empty arrays
// (common/utils.rs, check_is_empty).
func emptyAt(p map[string]*qdrant.Value, path []segment) bool {
	for _, x := range valuesAt(p, path) {
		if !isNull(x) && !(x.GetListValue() != nil && len(x.GetListValue().GetValues()) == 0) {
			return false
		}
	}
	return true
}

// compileField mirrors FieldCondition's ValueChecker: when the key holds no value the
// condition passes only for is_empty=true or is_null=false; otherwise it passes when any
// value passes, an array value passing when any of its elements does. With a payload index
// on the key, the parts that index serves are answered from the values it holds instead
// (see indexMatch), and is_null from the null index built beside every index.
func compileField(fc *qdrant.FieldCondition, sc scope) (pred, error) {
	ix := sc.ix
	path, err := parsePath(fc.GetKey())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if fc.GetGeoBoundingBox() != nil || fc.GetGeoRadius() != nil || fc.GetGeoPolygon() != nil ||
		fc.GetValuesCount() != nil || fc.GetDatetimeRange() != nil {
		return nil, status.Error(codes.Unimplemented, "qdrantfake: geo, values_count and datetime_range conditions are not implemented")
	}
	idx := ix.on(path)
	var check func(*qdrant.Value) bool              // on one value, arrays included
	var indexed func(map[string]*qdrant.Value) bool // on the point, through the index
	onEmpty := false
	switch {
	case fc.IsEmpty != nil:
		want := *fc.IsEmpty
		onEmpty = want
		check = func(x *qdrant.Value) bool {
			if isNull(x) {
				return want
			}
			if l := x.GetListValue(); l != nil {
				return (len(l.GetValues()) == 0) == want
			}
			return !want
		}
	case fc.IsNull != nil && idx != nil:
		want := *fc.IsNull
		return func(_ *pointKey, p map[string]*qdrant.Value) bool { return nullFlag(valuesAt(p, path)) == want }, nil
	case fc.IsNull != nil:
		want := *fc.IsNull
		onEmpty = !want
		check = func(x *qdrant.Value) bool {
			if isNull(x) {
				return want
			}
			if l := x.GetListValue(); l != nil {
				for _, e := range l.GetValues() {
					if isNull(e) {
						return want
					}
				}
			}
			return !want
		}
	case fc.GetMatch() != nil || fc.GetRange() != nil:
		var m func(*qdrant.Value) bool
		if fc.GetMatch() != nil {
			if im := idx.uuidAsNumber(fc.GetMatch(), sc); im != nil {
				return im, nil
			}
			if im := idx.match(fc.GetMatch()); im != nil {
				indexed = im
			} else if im := unindexedText(fc.GetMatch(), path, sc); im != nil {
				indexed = im
			} else if m, err = compileMatch(fc.GetMatch()); err != nil {
				return nil, err
			}
		}
		r := fc.GetRange()
		if r != nil && idx != nil && idx.typ == qdrant.FieldType_FieldTypeInteger {
			im, ir := indexed, r
			indexed = func(p map[string]*qdrant.Value) bool {
				if im != nil && im(p) {
					return true
				}
				for _, v := range idx.indexedValues(p) {
					if inRange(ir, qdrant.NewValueInt(v.(int64))) {
						return true
					}
				}
				return false
			}
			r = nil
		}
		if m != nil || r != nil {
			one := func(x *qdrant.Value) bool { return (m != nil && m(x)) || (r != nil && inRange(r, x)) }
			check = func(x *qdrant.Value) bool {
				if l := x.GetListValue(); l != nil {
					for _, e := range l.GetValues() {
						if one(e) {
							return true
						}
					}
					return false
				}
				return one(x)
			}
		}
	default:
		return nil, status.Error(codes.InvalidArgument, "Wrong input: Malformed FieldCondition: no condition given")
	}
	return func(_ *pointKey, p map[string]*qdrant.Value) bool {
		vals := valuesAt(p, path)
		if len(vals) == 0 {
			return onEmpty
		}
		if indexed != nil && indexed(p) {
			return true
		}
		if check != nil {
			for _, x := range vals {
				if check(x) {
					return true
				}
			}
		}
		return false
	}, nil
}

// nullFlag is the null index's is_null for a point: a value at the key is null or an
// array holding a null (null_index/mutable_null_index/lifecycle.rs, add_point). Without
// an index only a null value counts (common/utils.rs, check_is_null) up to release 1.19;
// from 1.20 an array holding a null counts without an index too.
func nullFlag(vals []*qdrant.Value) bool {
	for _, x := range vals {
		if isNull(x) {
			return true
		}
		for _, e := range x.GetListValue().GetValues() {
			if isNull(e) {
				return true
			}
		}
	}
	return false
}

// match returns how idx answers m for a point, or nil when idx cannot serve m and Qdrant
// falls back to checking the payload: keyword, integer and uuid indexes look only at the
// values they hold, so "except" passes a point only when one of its indexed values is
// outside the list (map_index/read_ops.rs, MapConditionChecker::matches); a text index
// tokenises (full_text_index_read.rs, check_payload_match).
func (idx *fieldIndex) match(m *qdrant.Match) func(map[string]*qdrant.Value) bool {
	if idx == nil {
		return nil
	}
	if idx.typ == qdrant.FieldType_FieldTypeText {
		return idx.textMatch(m)
	}
	var set map[any]bool
	negate := false
	switch v := m.GetMatchValue().(type) {
	case *qdrant.Match_Keyword:
		set = anySet(idx.queryStrings([]string{v.Keyword}))
	case *qdrant.Match_Keywords:
		set = anySet(idx.queryStrings(v.Keywords.GetStrings()))
	case *qdrant.Match_ExceptKeywords:
		set, negate = anySet(idx.queryStrings(v.ExceptKeywords.GetStrings())), true
	case *qdrant.Match_Integer:
		if idx.typ == qdrant.FieldType_FieldTypeInteger {
			set = map[any]bool{v.Integer: true}
		}
	case *qdrant.Match_Integers:
		if idx.typ == qdrant.FieldType_FieldTypeInteger {
			set = map[any]bool{}
			for _, n := range v.Integers.GetIntegers() {
				set[n] = true
			}
		}
	case *qdrant.Match_ExceptIntegers:
		if idx.typ == qdrant.FieldType_FieldTypeInteger {
			set, negate = map[any]bool{}, true
			for _, n := range v.ExceptIntegers.GetIntegers() {
				set[n] = true
			}
		}
	}
	if set == nil {
		return nil
	}
	if idx.typ == qdrant.FieldType_FieldTypeKeyword {
		words := make(map[string]bool, len(set))
		for k := range set {
			words[k.(string)] = true
		}
		return func(p map[string]*qdrant.Value) bool {
			return idx.eachValue(p, func(v *qdrant.Value) bool {
				s, ok := str(v)
				return ok && words[s] != negate
			})
		}
	}
	return func(p map[string]*qdrant.Value) bool {
		return idx.eachValue(p, func(v *qdrant.Value) bool {
			x, ok := idx.indexedValue(v)
			return ok && set[x] != negate
		})
	}
}

func anySet(xs []any) map[any]bool {
	if xs == nil {
		return nil
	}
	m := make(map[any]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// compileMatch returns the check of one (non-array) value against m, or nil for no match.
func compileMatch(m *qdrant.Match) (func(*qdrant.Value) bool, error) {
	if m == nil {
		return nil, nil
	}
	switch v := m.GetMatchValue().(type) {
	case *qdrant.Match_Keyword:
		return func(x *qdrant.Value) bool { s, ok := str(x); return ok && s == v.Keyword }, nil
	case *qdrant.Match_Integer:
		return func(x *qdrant.Value) bool { n, ok := integer(x); return ok && n == v.Integer }, nil
	case *qdrant.Match_Boolean:
		return func(x *qdrant.Value) bool {
			b, ok := x.GetKind().(*qdrant.Value_BoolValue)
			return ok && b.BoolValue == v.Boolean
		}, nil
	case *qdrant.Match_Keywords:
		set := setOf(v.Keywords.GetStrings())
		return func(x *qdrant.Value) bool { s, ok := str(x); return ok && set[s] }, nil
	case *qdrant.Match_Integers:
		set := setOf(v.Integers.GetIntegers())
		return func(x *qdrant.Value) bool { n, ok := integer(x); return ok && set[n] }, nil
	case *qdrant.Match_ExceptKeywords:
		set := setOf(v.ExceptKeywords.GetStrings())
		return func(x *qdrant.Value) bool {
			if isNull(x) {
				return false
			}
			s, ok := str(x)
			return !ok || !set[s]
		}, nil
	case *qdrant.Match_ExceptIntegers:
		set := setOf(v.ExceptIntegers.GetIntegers())
		return func(x *qdrant.Value) bool {
			if isNull(x) {
				return false
			}
			n, ok := integer(x)
			return !ok || !set[n]
		}, nil
	case *qdrant.Match_Text:
		return func(x *qdrant.Value) bool { s, ok := str(x); return ok && strings.Contains(s, v.Text) }, nil
	case *qdrant.Match_Phrase:
		return func(x *qdrant.Value) bool { s, ok := str(x); return ok && strings.Contains(s, v.Phrase) }, nil
	case *qdrant.Match_TextAny:
		toks := strings.Fields(v.TextAny)
		return func(x *qdrant.Value) bool {
			s, ok := str(x)
			if !ok {
				return false
			}
			for _, t := range toks {
				if strings.Contains(s, t) {
					return true
				}
			}
			return false
		}, nil
	default:
		return nil, status.Error(codes.InvalidArgument, "Wrong input: Malformed Match condition")
	}
}

func inRange(r *qdrant.Range, x *qdrant.Value) bool {
	var f float64
	switch v := x.GetKind().(type) {
	case *qdrant.Value_IntegerValue:
		f = float64(v.IntegerValue)
	case *qdrant.Value_DoubleValue:
		f = v.DoubleValue
	default:
		return false
	}
	return (r.Lt == nil || f < *r.Lt) && (r.Gt == nil || f > *r.Gt) &&
		(r.Lte == nil || f <= *r.Lte) && (r.Gte == nil || f >= *r.Gte)
}

func isNull(x *qdrant.Value) bool {
	if x == nil || x.GetKind() == nil {
		return true
	}
	_, ok := x.GetKind().(*qdrant.Value_NullValue)
	return ok
}

func str(x *qdrant.Value) (string, bool) {
	v, ok := x.GetKind().(*qdrant.Value_StringValue)
	if !ok {
		return "", false
	}
	return v.StringValue, true
}

// integer reports x as an int64 only when it was sent as one: like serde_json's as_i64,
// a double never matches an integer condition.
func integer(x *qdrant.Value) (int64, bool) {
	v, ok := x.GetKind().(*qdrant.Value_IntegerValue)
	if !ok {
		return 0, false
	}
	return v.IntegerValue, true
}

func setOf[T comparable](xs []T) map[T]bool {
	m := make(map[T]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// notFound is Qdrant's error for a missing collection.
func notFound(name string) error {
	return status.Error(codes.NotFound, fmt.Sprintf("Not found: Collection `%s` doesn't exist!", name))
}
