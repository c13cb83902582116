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
}

type idSet map[pointKey]struct{}

// collection holds the points of one collection. mu guards everything but the sorted-id
// cache, which readers rebuild under sortMu while holding mu for reading.
type collection struct {
	name     string
	params   *qdrant.CollectionParams
	examined *atomic.Uint64 // the server's count of points checked against a filter

	mu      sync.RWMutex
	dropped bool
	points  map[pointKey]*point
	schema  map[string]qdrant.FieldType
	keyword map[string]map[string]idSet // indexed keyword field -> value -> ids
	paths   map[string][]segment        // parsed paths of indexed fields

	sortMu sync.Mutex
	sorted []pointKey // nil when stale
}

func newCollection(name string, params *qdrant.CollectionParams, examined *atomic.Uint64) *collection {
	return &collection{
		name: name, params: params, examined: examined,
		points:  map[pointKey]*point{},
		schema:  map[string]qdrant.FieldType{},
		keyword: map[string]map[string]idSet{},
		paths:   map[string][]segment{},
	}
}

// upsert stores p under k, replacing any previous point. Callers hold mu for writing.
func (c *collection) upsert(k pointKey, p *point) {
	if old, ok := c.points[k]; ok {
		c.unindex(k, old)
	} else {
		c.sorted = nil
	}
	c.points[k] = p
	c.index(k, p)
}

// remove deletes k if present. Callers hold mu for writing.
func (c *collection) remove(k pointKey) bool {
	old, ok := c.points[k]
	if !ok {
		return false
	}
	c.unindex(k, old)
	delete(c.points, k)
	c.sorted = nil
	return true
}

// addIndex records a payload index on field; keyword indexes are built at once and then
// maintained on every write. Callers hold mu for writing.
func (c *collection) addIndex(field string, path []segment, t qdrant.FieldType) {
	c.schema[field] = t
	delete(c.keyword, field)
	delete(c.paths, field)
	if t != qdrant.FieldType_FieldTypeKeyword {
		return
	}
	c.keyword[field] = map[string]idSet{}
	c.paths[field] = path
	for k, p := range c.points {
		c.indexField(field, k, p)
	}
}

func (c *collection) dropIndex(field string) {
	delete(c.schema, field)
	delete(c.keyword, field)
	delete(c.paths, field)
}

func (c *collection) index(k pointKey, p *point) {
	for field := range c.keyword {
		c.indexField(field, k, p)
	}
}

func (c *collection) indexField(field string, k pointKey, p *point) {
	byValue := c.keyword[field]
	for _, s := range keywordsAt(p.payload, c.paths[field]) {
		ids := byValue[s]
		if ids == nil {
			ids = idSet{}
			byValue[s] = ids
		}
		ids[k] = struct{}{}
	}
}

func (c *collection) unindex(k pointKey, p *point) {
	for field, byValue := range c.keyword {
		for _, s := range keywordsAt(p.payload, c.paths[field]) {
			if ids := byValue[s]; ids != nil {
				delete(ids, k)
				if len(ids) == 0 {
					delete(byValue, s)
				}
			}
		}
	}
}

// keywordsAt lists the strings a keyword index holds for a point: every string value at
// path, and every string element of an array value there.
func keywordsAt(payload map[string]*qdrant.Value, path []segment) []string {
	var out []string
	for _, v := range valuesAt(payload, path) {
		if s, ok := str(v); ok {
			out = append(out, s)
		}
		for _, e := range v.GetListValue().GetValues() {
			if s, ok := str(e); ok {
				out = append(out, s)
			}
		}
	}
	return out
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
		byValue := c.keyword[v.Field.GetKey()]
		if byValue == nil || v.Field.IsEmpty != nil || v.Field.IsNull != nil || v.Field.GetRange() != nil {
			return nil, false
		}
		switch m := v.Field.GetMatch().GetMatchValue().(type) {
		case *qdrant.Match_Keyword:
			if s := byValue[m.Keyword]; s != nil {
				return s, true
			}
			return idSet{}, true
		case *qdrant.Match_Keywords:
			out := idSet{}
			for _, w := range m.Keywords.GetStrings() {
				for k := range byValue[w] {
					out[k] = struct{}{}
				}
			}
			return out, true
		}
	}
	return nil, false
}

// matching returns the ids of the points passing p, in no particular order. It checks
// only the index candidates of f when there are any, else every point. Callers hold mu.
func (c *collection) matching(f *qdrant.Filter, p pred) []pointKey {
	var out []pointKey
	if ids, ok := c.candidates(f); ok {
		c.examined.Add(uint64(len(ids)))
		for k := range ids {
			if pt, ok := c.points[k]; ok && p(&k, pt.payload) {
				out = append(out, k)
			}
		}
		return out
	}
	c.examined.Add(uint64(len(c.points)))
	for k, pt := range c.points {
		if p(&k, pt.payload) {
			out = append(out, k)
		}
	}
	return out
}

// scroll returns up to limit ids passing p in ascending order from offset (inclusive), and
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
		if !ok {
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
