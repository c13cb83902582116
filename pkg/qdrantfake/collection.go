package qdrantfake

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/qdrant/go-client/qdrant"
)

type point struct {
	payload map[string]*qdrant.Value
	vectors *qdrant.Vectors
	// deferred points are written but not yet visible to count, scroll and get; a delete
	// by filter or by id removes them all the same (see Server.SetDeferredVisibility).
	deferred bool
}

type idSet map[pointKey]struct{}

// fieldIndex is one payload index. Keyword, integer and uuid indexes keep value -> ids
// maps (values are string, int64 and [16]byte) that serve candidates; every index also
// changes how conditions on its key are answered (see indexedValues and filter.go).
type fieldIndex struct {
	typ     qdrant.FieldType
	path    []segment
	text    *qdrant.TextIndexParams // for a text index
	byValue map[any]idSet           // nil for types that serve no candidates
}

// collection holds the points of one collection. mu guards everything but the sorted-id
// cache, which readers rebuild under sortMu while holding mu for reading.
type collection struct {
	name     string
	params   *qdrant.CollectionParams
	examined *atomic.Uint64 // the server's count of points checked against a filter
	release  *atomic.Int32  // the server's Release

	mu       sync.RWMutex
	dropped  bool
	points   map[pointKey]*point
	deferred int                    // how many points are deferred
	indexes  map[string]*fieldIndex // by canonical path
	names    map[string]string      // canonical path -> field name as created

	sortMu sync.Mutex
	sorted []pointKey // nil when stale
}

func newCollection(name string, params *qdrant.CollectionParams, examined *atomic.Uint64, release *atomic.Int32) *collection {
	return &collection{
		name: name, params: params, examined: examined, release: release,
		points:  map[pointKey]*point{},
		indexes: map[string]*fieldIndex{},
		names:   map[string]string{},
	}
}

// upsert stores p under k, replacing any previous point. Callers hold mu for writing.
func (c *collection) upsert(k pointKey, p *point) {
	if old, ok := c.points[k]; ok {
		c.unindex(k, old)
		if old.deferred {
			c.deferred--
		}
	} else {
		c.sorted = nil
	}
	c.points[k] = p
	if p.deferred {
		c.deferred++
	}
	c.index(k, p)
}

// remove deletes k if present. Callers hold mu for writing.
func (c *collection) remove(k pointKey) bool {
	old, ok := c.points[k]
	if !ok {
		return false
	}
	c.unindex(k, old)
	if old.deferred {
		c.deferred--
	}
	delete(c.points, k)
	c.sorted = nil
	return true
}

// reveal makes every deferred point visible. Callers hold mu for writing.
func (c *collection) reveal() {
	for _, p := range c.points {
		p.deferred = false
	}
	c.deferred = 0
}

// visible is the number of points count and scroll can see. Callers hold mu.
func (c *collection) visible() int { return len(c.points) - c.deferred }

// addIndex records a payload index on field, replacing one of another type as Qdrant
// does (payload_index.rs, drop_index_if_incompatible). Value maps are built at once and
// then maintained on every write. Callers hold mu for writing.
func (c *collection) addIndex(field string, path []segment, t qdrant.FieldType, text *qdrant.TextIndexParams) {
	key := canonical(path)
	idx := &fieldIndex{typ: t, path: path, text: text}
	switch t {
	case qdrant.FieldType_FieldTypeKeyword, qdrant.FieldType_FieldTypeInteger, qdrant.FieldType_FieldTypeUuid:
		idx.byValue = map[any]idSet{}
	}
	c.indexes[key] = idx
	c.names[key] = field
	if idx.byValue == nil {
		return
	}
	for k, p := range c.points {
		idx.add(k, p)
	}
}

func (c *collection) dropIndex(path []segment) {
	delete(c.indexes, canonical(path))
	delete(c.names, canonical(path))
}

// indexOn returns the index on the canonical path key, or nil. Callers hold mu.
func (c *collection) indexOn(key string) *fieldIndex { return c.indexes[key] }

// scope is what filters on c compile in: its indexes and the server's release. Callers
// hold mu.
func (c *collection) scope() scope {
	sc := scope{ix: c.indexOn, primary: true}
	if c.release != nil {
		sc.release = Release(c.release.Load())
	}
	return sc
}

func (c *collection) index(k pointKey, p *point) {
	for _, idx := range c.indexes {
		idx.add(k, p)
	}
}

func (c *collection) unindex(k pointKey, p *point) {
	for _, idx := range c.indexes {
		if idx.byValue == nil {
			continue
		}
		for _, v := range idx.indexedValues(p.payload) {
			if ids := idx.byValue[v]; ids != nil {
				delete(ids, k)
				if len(ids) == 0 {
					delete(idx.byValue, v)
				}
			}
		}
	}
}

func (idx *fieldIndex) add(k pointKey, p *point) {
	if idx.byValue == nil {
		return
	}
	for _, v := range idx.indexedValues(p.payload) {
		ids := idx.byValue[v]
		if ids == nil {
			ids = idSet{}
			idx.byValue[v] = ids
		}
		ids[k] = struct{}{}
	}
}

// indexedValues lists what the index holds for a point: every value at its path, and
// every element of an array value there, that its type indexes (indexedValue).
func (idx *fieldIndex) indexedValues(payload map[string]*qdrant.Value) []any {
	var out []any
	idx.eachValue(payload, func(v *qdrant.Value) bool {
		if x, ok := idx.indexedValue(v); ok {
			out = append(out, x)
		}
		return false
	})
	return out
}

// indexedValue is what the index holds for v, a value at its path that is not an array:
// a string for keyword; an integer, or a double with an integral value, for integer
// (index/field_index/utils.rs, value_to_integer); a string that parses as a UUID for uuid
// (as 16 bytes). Other types hold nothing here.
func (idx *fieldIndex) indexedValue(v *qdrant.Value) (any, bool) {
	switch idx.typ {
	case qdrant.FieldType_FieldTypeKeyword:
		if s, ok := str(v); ok {
			return s, true
		}
	case qdrant.FieldType_FieldTypeInteger:
		if n, ok := integer(v); ok {
			return n, true
		} else if d, ok := v.GetKind().(*qdrant.Value_DoubleValue); ok {
			if n := int64(d.DoubleValue); float64(n) == d.DoubleValue {
				return n, true
			}
		}
	case qdrant.FieldType_FieldTypeUuid:
		if s, ok := str(v); ok {
			if u, err := parseUUID(s); err == nil {
				return u, true
			}
		}
	}
	return nil, false
}

// eachValue calls fn with every value at idx's path, and every element of an array value
// there, until fn returns true; it reports whether fn did. A plain key is read without
// building a list of values: filters check it for every candidate point.
func (idx *fieldIndex) eachValue(payload map[string]*qdrant.Value, fn func(*qdrant.Value) bool) bool {
	one := func(v *qdrant.Value) bool {
		if l := v.GetListValue(); l != nil {
			for _, e := range l.GetValues() {
				if fn(e) {
					return true
				}
			}
			return false
		}
		return fn(v)
	}
	if len(idx.path) == 1 && len(idx.path[0].idxs) == 0 {
		v := payload[idx.path[0].key]
		return v != nil && one(v)
	}
	for _, v := range valuesAt(payload, idx.path) {
		if one(v) {
			return true
		}
	}
	return false
}

// candidates returns a superset of the points f can match, read from the keyword indexes
// and has_id conditions, or ok == false when only a full scan can tell. Callers hold mu.
func (c *collection) candidates(f *qdrant.Filter) (ids idSet, ok bool) {
	if f == nil {
		return nil, false
	}
	for _, cond := range f.GetMust() {
		if s, ok := c.condCandidates(cond); ok && (ids == nil || len(s) < len(ids)) {
			ids = s
		}
	}
	if ids != nil {
		return ids, true
	}
	if s, ok := c.unionCandidates(f.GetShould()); ok {
		return s, true
	}
	if ms := f.GetMinShould(); ms != nil && ms.GetMinCount() > 0 {
		return c.unionCandidates(ms.GetConditions())
	}
	return nil, false
}

func (c *collection) unionCandidates(conds []*qdrant.Condition) (idSet, bool) {
	if len(conds) == 0 {
		return nil, false
	}
	parts := make([]idSet, 0, len(conds))
	for _, cond := range conds {
		s, ok := c.condCandidates(cond)
		if !ok {
			return nil, false
		}
		parts = append(parts, s)
	}
	if len(parts) == 1 {
		return parts[0], true
	}
	out := idSet{}
	for _, s := range parts {
		for k := range s {
			out[k] = struct{}{}
		}
	}
	return out, true
}

func (c *collection) condCandidates(cond *qdrant.Condition) (idSet, bool) {
	switch v := cond.GetConditionOneOf().(type) {
	case *qdrant.Condition_Filter:
		return c.candidates(v.Filter)
	case *qdrant.Condition_HasId:
		out := idSet{}
		for _, id := range v.HasId.GetHasId() {
			if k, err := keyOf(id); err == nil {
				if _, ok := c.points[k]; ok {
					out[k] = struct{}{}
				}
			}
		}
		return out, true
	case *qdrant.Condition_Field:
		return c.fieldCandidates(v.Field)
	}
	return nil, false
}

// exactly appends to parts the index sets whose union is exactly the points f passes,
// when the indexes alone answer f: f is one must condition or only should conditions, each
// a has_id, a match alone (keyword, keywords, integer or integers) that fieldCandidates
// serves from an index, or a nested filter of the same form. The predicate of such a
// condition answers through the same index (fieldIndex.match), so checking each candidate
// against f again would only repeat the lookup. ok is false for any other filter.
// Callers hold mu.
func (c *collection) exactly(f *qdrant.Filter, parts []idSet) ([]idSet, bool) {
	if f == nil || len(f.GetMustNot()) > 0 || f.GetMinShould() != nil {
		return nil, false
	}
	conds := f.GetShould()
	switch {
	case len(f.GetMust()) == 1 && len(conds) == 0:
		conds = f.GetMust()
	case len(f.GetMust()) > 0 || len(conds) == 0:
		return nil, false
	}
	for _, cond := range conds {
		var ok bool
		switch v := cond.GetConditionOneOf().(type) {
		case *qdrant.Condition_Filter:
			if parts, ok = c.exactly(v.Filter, parts); !ok {
				return nil, false
			}
			continue
		case *qdrant.Condition_HasId:
		case *qdrant.Condition_Field:
			if !matchAlone(v.Field) {
				return nil, false
			}
		default:
			return nil, false
		}
		s, ok := c.condCandidates(cond)
		if !ok {
			return nil, false
		}
		parts = append(parts, s)
	}
	return parts, true
}

// matchAlone reports whether fc is a keyword, keywords, integer or integers match and
// nothing else.
func matchAlone(fc *qdrant.FieldCondition) bool {
	if fc.GetRange() != nil || fc.GetGeoBoundingBox() != nil || fc.GetGeoRadius() != nil || fc.GetGeoPolygon() != nil ||
		fc.GetValuesCount() != nil || fc.GetDatetimeRange() != nil || fc.IsEmpty != nil || fc.IsNull != nil {
		return false
	}
	switch fc.GetMatch().GetMatchValue().(type) {
	case *qdrant.Match_Keyword, *qdrant.Match_Keywords, *qdrant.Match_Integer, *qdrant.Match_Integers:
		return true
	}
	return false
}

// inAny reports whether k is in one of sets.
func inAny(sets []idSet, k pointKey) bool {
	for _, s := range sets {
		if _, ok := s[k]; ok {
			return true
		}
	}
	return false
}

// fieldCandidates reads the ids a match on an indexed key can pass from the index's
// value map: keywords from a keyword index, integers from an integer index, UUIDs (any
// spelling) from a uuid index. Anything else needs a scan.
func (c *collection) fieldCandidates(fc *qdrant.FieldCondition) (idSet, bool) {
	path, err := parsePath(fc.GetKey())
	if err != nil {
		return nil, false
	}
	idx := c.indexOn(canonical(path))
	if idx == nil || idx.byValue == nil || fc.IsEmpty != nil || fc.IsNull != nil || fc.GetRange() != nil {
		return nil, false
	}
	var keys []any
	switch m := fc.GetMatch().GetMatchValue().(type) {
	case *qdrant.Match_Keyword:
		keys = idx.queryStrings([]string{m.Keyword})
	case *qdrant.Match_Keywords:
		keys = idx.queryStrings(m.Keywords.GetStrings())
	case *qdrant.Match_Integer:
		if idx.typ == qdrant.FieldType_FieldTypeInteger {
			keys = []any{m.Integer}
		}
	case *qdrant.Match_Integers:
		if idx.typ == qdrant.FieldType_FieldTypeInteger {
			for _, n := range m.Integers.GetIntegers() {
				keys = append(keys, n)
			}
			if keys == nil {
				return idSet{}, true
			}
		}
	}
	if keys == nil {
		return nil, false
	}
	if len(keys) == 1 {
		if s := idx.byValue[keys[0]]; s != nil {
			return s, true
		}
		return idSet{}, true
	}
	out := idSet{}
	for _, key := range keys {
		for k := range idx.byValue[key] {
			out[k] = struct{}{}
		}
	}
	return out, true
}

// queryStrings converts the strings of a keyword match into the index's value type, or
// returns nil when this index cannot serve the match: an integer index never serves
// strings, and a uuid index serves only strings that all parse as UUIDs
// (payload_index_impl/uuid.rs, condition_checker_impl). An empty list serves nothing
// but needs no scan either, so it is an empty non-nil slice.
func (idx *fieldIndex) queryStrings(ss []string) []any {
	out := make([]any, 0, len(ss))
	switch idx.typ {
	case qdrant.FieldType_FieldTypeKeyword:
		for _, s := range ss {
			out = append(out, s)
		}
	case qdrant.FieldType_FieldTypeUuid:
		for _, s := range ss {
			u, err := parseUUID(s)
			if err != nil {
				return nil
			}
			out = append(out, u)
		}
	default:
		return nil
	}
	return out
}

// matching returns the ids of the points passing p, in no particular order, deferred
// points included only when withDeferred (a delete sees them, a count does not: Qdrant's
// DeferredBehavior::WithDeferred and VisibleOnly). It checks only the index candidates of
// f when there are any, else every point; a filter the indexes answer alone (exactly) is
// read from the index sets without a check. Callers hold mu.
func (c *collection) matching(f *qdrant.Filter, p pred, withDeferred bool) []pointKey {
	var out []pointKey
	if parts, ok := c.exactly(f, nil); ok {
		for i, ids := range parts {
			for k := range ids {
				if inAny(parts[:i], k) {
					continue
				}
				c.examined.Add(1)
				if pt, ok := c.points[k]; ok && (withDeferred || !pt.deferred) {
					out = append(out, k)
				}
			}
		}
		return out
	}
	if ids, ok := c.candidates(f); ok {
		c.examined.Add(uint64(len(ids)))
		for k := range ids {
			if pt, ok := c.points[k]; ok && (withDeferred || !pt.deferred) && p(&k, pt.payload) {
				out = append(out, k)
			}
		}
		return out
	}
	c.examined.Add(uint64(len(c.points)))
	for k, pt := range c.points {
		if (withDeferred || !pt.deferred) && p(&k, pt.payload) {
			out = append(out, k)
		}
	}
	return out
}

// scroll returns up to limit visible ids passing p in ascending order from offset (inclusive), and
// the id after the last one returned, if any. Callers hold mu.
func (c *collection) scroll(f *qdrant.Filter, p pred, offset *pointKey, limit int) ([]pointKey, *pointKey) {
	var order []pointKey
	if ids, ok := c.candidates(f); ok {
		order = make([]pointKey, 0, len(ids))
		for k := range ids {
			order = append(order, k)
		}
		sort.Slice(order, func(i, j int) bool { return order[i].less(order[j]) })
	} else {
		order = c.sortedIDs()
	}
	start := 0
	if offset != nil {
		start, _ = slices.BinarySearchFunc(order, *offset, func(a, b pointKey) int {
			switch {
			case a.less(b):
				return -1
			case b.less(a):
				return 1
			}
			return 0
		})
	}
	var out []pointKey
	for _, k := range order[start:] {
		pt, ok := c.points[k]
		if !ok || pt.deferred {
			continue
		}
		c.examined.Add(1)
		if !p(&k, pt.payload) {
			continue
		}
		if len(out) == limit {
			next := k
			return out, &next
		}
		out = append(out, k)
	}
	return out, nil
}

func (c *collection) sortedIDs() []pointKey {
	c.sortMu.Lock()
	defer c.sortMu.Unlock()
	if c.sorted == nil {
		s := make([]pointKey, 0, len(c.points))
		for k := range c.points {
			s = append(s, k)
		}
		sort.Slice(s, func(i, j int) bool { return s[i].less(s[j]) })
		c.sorted = s
	}
	return c.sorted
}
