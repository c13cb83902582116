package qdrantstore

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// Semantic read-back. Before deleting, Erase reads the vectors of the subject's points
// (a scroll with the erasure filter, paged by next_page_offset to exhaustion, so bounded
// by the subject's footprint and never capped); after deleting, it and Verify search each
// collection with those vectors — one nearest query per vector (HNSW, or a full scan with
// similar_search: exact), sent in batches of queryBatch, each returning at most
// SimilarLimit points — for points of the tenant (the erasure filter's must clause) that
// carry none of the subject's tags (must_not its should conditions) and score
// above Similarity (cosine, dot: score > t) or under MaxDistance (euclid, manhattan:
// distance < t), Qdrant's strict thresholds. Those are probable untagged copies: Verify
// lists their ids in Verification.Similar; with similar: erase, Erase deletes them too
// (reported as the location "<collection> (similar)") and Verify searches again.
//
// The vectors are kept in memory between Erase and Verify (the points are gone after
// Erase), per inventory store and subject, until a Verify succeeds or readBackTTL passes.
// A Verify that runs in another process than its Erase, or after a restart, has no
// vectors and does not search: the verification's method says whether it searched.

const (
	scrollPage  = 256
	queryBatch  = 32
	readBackTTL = time.Hour
)

// Suffixes of the verification method: MethodSimilar when the semantic search ran,
// MethodMentions when text fields were searched for mentions.
const (
	MethodSimilar        = "; similar by exact vector search"
	MethodSimilarIndexed = "; similar by approximate vector search (HNSW)"
	MethodTruncated      = " (truncated at similar_limit per vector)"
	MethodMentions       = "; mentions by text match"
)

// vector is one vector of a subject's point: its name ("" for the unnamed one) and data.
type vector struct {
	name string
	data []float32
}

// key identifies v's name and exact data.
func (v vector) key() string {
	b := make([]byte, 0, len(v.name)+1+4*len(v.data))
	b = append(b, v.name...)
	b = append(b, 0)
	for _, x := range v.data {
		u := math.Float32bits(x)
		b = append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
	}
	return string(b)
}

// readBack holds, for one subject in one inventory store, the vectors of its erased
// points per collection.
type readBack struct {
	at    time.Time
	colls map[string][]vector
	locs  map[string]string // collection -> its location (template with the tenant)
}

// pending is the vectors kept between an Erase and its Verify.
type pending struct {
	mu sync.Mutex
	m  map[string]*readBack
}

func pendingKey(inv inventory.Entry, s deletion.Subject) string {
	return inv.Name + "\x00" + s.Tenant + "\x00" + s.ID + "\x00" + s.Hash
}

// add keeps vs for coll, adding to what an earlier attempt kept.
func (p *pending) add(key, coll, loc string, vs []vector) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for k, rb := range p.m {
		if now.Sub(rb.at) > readBackTTL {
			delete(p.m, k)
		}
	}
	if p.m == nil {
		p.m = map[string]*readBack{}
	}
	rb := p.m[key]
	if rb == nil {
		rb = &readBack{colls: map[string][]vector{}, locs: map[string]string{}}
		p.m[key] = rb
	}
	rb.at = now
	rb.locs[coll] = loc
	if _, ok := rb.colls[coll]; !ok || len(vs) > 0 {
		rb.colls[coll] = append(rb.colls[coll], vs...)
	}
}

// get returns a copy of what is kept for key, or nil.
func (p *pending) get(key string) *readBack {
	p.mu.Lock()
	defer p.mu.Unlock()
	rb := p.m[key]
	if rb == nil {
		return nil
	}
	c := &readBack{at: rb.at, colls: map[string][]vector{}, locs: map[string]string{}}
	for k, v := range rb.colls {
		c.colls[k] = v
	}
	for k, v := range rb.locs {
		c.locs[k] = v
	}
	return c
}

func (p *pending) forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, key)
}

// readVectors returns every vector (or the ones l names) of the points passing f in coll.
func (st *Store) readVectors(ctx context.Context, l Locators, coll string, f *qdrant.Filter) ([]vector, error) {
	sel := qdrant.NewWithVectors(true)
	if len(l.Vectors) > 0 {
		sel = qdrant.NewWithVectorsInclude(l.Vectors...)
	}
	var out []vector
	seen := map[string]bool{} // identical vectors (duplicated chunks) are searched once
	err := st.scrollAll(ctx, &qdrant.ScrollPoints{
		CollectionName: coll, Filter: f, WithPayload: qdrant.NewWithPayload(false), WithVectors: sel,
	}, func(p *qdrant.RetrievedPoint) {
		for _, v := range vectorsOf(p.GetVectors()) {
			if k := v.key(); !seen[k] {
				seen[k] = true
				out = append(out, v)
			}
		}
	})
	return out, err
}

// scrollAll pages req (its Offset and Limit are set here) by next_page_offset to the end,
// calling fn for every point. A missing collection holds no points. Errors are classified.
func (st *Store) scrollAll(ctx context.Context, req *qdrant.ScrollPoints, fn func(*qdrant.RetrievedPoint)) error {
	req.Limit = qdrant.PtrOf(uint32(scrollPage))
	req.Offset = nil
	for {
		var pts []*qdrant.RetrievedPoint
		var next *qdrant.PointId
		err := st.retry(ctx, func() (err error) {
			pts, next, err = st.client.ScrollAndOffset(ctx, req)
			return err
		})
		if status.Code(err) == codes.NotFound {
			return nil
		}
		if err != nil {
			return classify(err)
		}
		for _, p := range pts {
			fn(p)
		}
		if next == nil || len(pts) == 0 {
			return nil
		}
		req.Offset = next
	}
}

// vectorsOf lists the dense vectors of v.
func vectorsOf(v *qdrant.VectorsOutput) []vector {
	if one := v.GetVector(); one != nil {
		if d := denseOut(one); len(d) > 0 {
			return []vector{{data: d}}
		}
		return nil
	}
	var out []vector
	for name, one := range v.GetVectors().GetVectors() {
		if d := denseOut(one); len(d) > 0 {
			out = append(out, vector{name: name, data: d})
		}
	}
	return out
}

func denseOut(v *qdrant.VectorOutput) []float32 {
	if d := v.GetDense(); d != nil {
		return d.GetData()
	}
	return v.Data //nolint:staticcheck // the form older servers answer with
}

// distances maps the vector names of coll ("" for the unnamed vector) to their distance.
func (st *Store) distances(ctx context.Context, coll string) (map[string]qdrant.Distance, error) {
	var info *qdrant.CollectionInfo
	err := st.retry(ctx, func() (err error) {
		info, err = st.client.GetCollectionInfo(ctx, coll)
		return err
	})
	if err != nil {
		return nil, classify(err)
	}
	cfg := info.GetConfig().GetParams().GetVectorsConfig()
	out := map[string]qdrant.Distance{}
	if p := cfg.GetParams(); p != nil {
		out[""] = p.GetDistance()
	}
	for name, p := range cfg.GetParamsMap().GetMap() {
		out[name] = p.GetDistance()
	}
	return out, nil
}

// threshold is the score_threshold of a search under dist, and false when l does not
// search vectors of that distance.
func (l Locators) threshold(dist qdrant.Distance) (float32, bool) {
	switch dist {
	case qdrant.Distance_Cosine, qdrant.Distance_Dot:
		return float32(l.similarity()), true
	case qdrant.Distance_Euclid, qdrant.Distance_Manhattan:
		if l.MaxDistance == nil {
			return 0, false
		}
		return float32(*l.MaxDistance), true
	}
	return 0, false
}

// searchParams asks Qdrant for a full scan (exact) or an HNSW search whose candidate list
// (ef) is at least four times the limit, and never under 128, so that close neighbours
// are rarely missed.
func searchParams(l Locators, limit uint64) *qdrant.SearchParams {
	if l.exactSearch() {
		return &qdrant.SearchParams{Exact: qdrant.PtrOf(true)}
	}
	return &qdrant.SearchParams{HnswEf: qdrant.PtrOf(max(4*limit, 128))}
}

// similarMethod is the verification method's suffix for l's search.
func similarMethod(l Locators) string {
	if l.exactSearch() {
		return MethodSimilar
	}
	return MethodSimilarIndexed
}

// similar searches coll with vs for points passing f's must clause (the tenant) and none
// of its should conditions, above l's threshold, and returns their ids by their string
// form. Each query returns at most
// SimilarLimit points; a query that returns that many sets *truncated, since more may
// lie beyond. Its cost is one query per vector: an HNSW search, or with similar_search:
// exact a scan of the collection's points that pass the filter.
func (st *Store) similar(ctx context.Context, l Locators, coll string, f *qdrant.Filter, vs []vector, truncated *bool) (map[string]*qdrant.PointId, error) {
	out := map[string]*qdrant.PointId{}
	if len(vs) == 0 {
		return out, nil
	}
	dists, err := st.distances(ctx, coll)
	if status.Code(err) == codes.NotFound {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	limit := uint64(l.similarLimit())
	notSubject := &qdrant.Filter{Must: f.GetMust(), MustNot: f.GetShould()} // the tenant's points only
	var qs []*qdrant.QueryPoints
	for _, v := range vs {
		dist, ok := dists[v.name]
		if !ok {
			continue
		}
		t, ok := l.threshold(dist)
		if !ok {
			continue
		}
		q := &qdrant.QueryPoints{
			CollectionName: coll, Query: qdrant.NewQueryDense(v.data), Filter: notSubject,
			ScoreThreshold: qdrant.PtrOf(t), Limit: qdrant.PtrOf(limit),
			Params:      searchParams(l, limit),
			WithPayload: qdrant.NewWithPayload(false),
		}
		if v.name != "" {
			q.Using = qdrant.PtrOf(v.name)
		}
		qs = append(qs, q)
	}
	for len(qs) > 0 {
		batch := qs[:min(queryBatch, len(qs))]
		qs = qs[len(batch):]
		var res []*qdrant.BatchResult
		err := st.retry(ctx, func() (err error) {
			res, err = st.client.QueryBatch(ctx, &qdrant.QueryBatchPoints{CollectionName: coll, QueryPoints: batch})
			return err
		})
		if err != nil {
			return nil, classify(err)
		}
		for _, r := range res {
			for _, p := range r.GetResult() {
				out[idString(p.GetId())] = p.GetId()
			}
			if uint64(len(r.GetResult())) == limit {
				*truncated = true
			}
		}
	}
	return out, nil
}

// idString is a point id's string form: its number or its UUID.
func idString(id *qdrant.PointId) string {
	if u := id.GetUuid(); u != "" {
		return u
	}
	return strconv.FormatUint(id.GetNum(), 10)
}

// deleteIDs deletes the points ids of coll, waiting for the write.
func (st *Store) deleteIDs(ctx context.Context, coll string, ids map[string]*qdrant.PointId) error {
	if len(ids) == 0 {
		return nil
	}
	list := make([]*qdrant.PointId, 0, len(ids))
	for _, id := range ids {
		list = append(list, id)
	}
	err := st.retry(ctx, func() error {
		r, err := st.client.Delete(ctx, &qdrant.DeletePoints{
			CollectionName: coll, Wait: qdrant.PtrOf(true), Points: qdrant.NewPointsSelector(list...),
		})
		if err != nil {
			return err
		}
		return completed(r)
	})
	if err != nil && status.Code(err) != codes.NotFound {
		return classify(err)
	}
	return nil
}

// similarOf runs the semantic search of Verify over what Erase kept for key, and returns
// the sorted ids found and whether it searched at all.
func (st *Store) similarOf(ctx context.Context, l Locators, key string, f *qdrant.Filter, truncated *bool) ([]string, bool, error) {
	rb := st.pending.get(key)
	if rb == nil || len(rb.colls) == 0 {
		return nil, false, nil
	}
	var ids []string
	for coll, vs := range rb.colls {
		found, err := st.similar(ctx, l, coll, f, vs, truncated)
		if err != nil {
			loc := rb.locs[coll]
			return nil, true, fmt.Errorf("qdrant: similar in %s: %w", loc, redact(err, coll, loc))
		}
		for id := range found {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, true, nil
}
