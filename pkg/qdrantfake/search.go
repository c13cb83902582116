package qdrantfake

import (
	"container/heap"
	"context"
	"math"
	"sort"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Vector search follows Qdrant's scoring (lib/segment/src/spaces/simple.rs, types.rs):
//
//   - Cosine vectors are normalised at upsert, unless their squared length is below
//     f32::EPSILON or within 1e-6 of 1 (is_length_zero_or_normalized), and the query vector
//     is normalised the same way; scroll and get return the normalised vectors.
//   - Cosine and Dot score by the dot product, larger is better.
//   - Euclid scores by the positive L2 distance (sqrt(|-Σ(a-b)²|)), Manhattan by the positive
//     L1 distance; smaller is better.
//   - score_threshold is strict: cosine and dot keep score > t, euclid and manhattan keep
//     distance < t (Distance::check_threshold).
//   - The order of equal scores is unspecified, as in Qdrant (ScoredPoint compares scores
//     only).
//
// The emulator always scores every point passing the filter (it has no HNSW index), so
// params.exact=true and false answer alike: what real Qdrant answers with exact=true.

// preprocess returns v normalised when dist is Cosine and v is neither zero nor already of
// unit length, else v itself. It never modifies v.
func preprocess(dist qdrant.Distance, v []float32) []float32 {
	if dist != qdrant.Distance_Cosine {
		return v
	}
	var sq float32
	for _, x := range v {
		sq += x * x
	}
	if sq < 1.1920929e-07 || float32(math.Abs(float64(sq-1))) <= 1e-6 {
		return v
	}
	n := float32(math.Sqrt(float64(sq)))
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x / n
	}
	return out
}

// score is Qdrant's score of stored vector a against query q under dist, after
// postprocessing: a dot product, or a positive distance.
func score(dist qdrant.Distance, q, a []float32) float32 {
	var s float32
	switch dist {
	case qdrant.Distance_Euclid:
		for i := range q {
			d := q[i] - a[i]
			s -= d * d
		}
		return float32(math.Sqrt(math.Abs(float64(s))))
	case qdrant.Distance_Manhattan:
		for i := range q {
			s -= float32(math.Abs(float64(q[i] - a[i])))
		}
		return float32(math.Abs(float64(s)))
	default:
		for i := range q {
			s += q[i] * a[i]
		}
		return s
	}
}

// largeBetter reports whether a larger score of dist is a better match.
func largeBetter(dist qdrant.Distance) bool {
	return dist != qdrant.Distance_Euclid && dist != qdrant.Distance_Manhattan
}

// vectorParams are the parameters of the vector named name ("" for the unnamed one).
func vectorParams(params *qdrant.CollectionParams, name string) (*qdrant.VectorParams, error) {
	cfg := params.GetVectorsConfig()
	if p := cfg.GetParams(); p != nil {
		if name != "" {
			return nil, status.Errorf(codes.InvalidArgument, "Wrong input: Not existing vector name error: %s", name)
		}
		return p, nil
	}
	if m := cfg.GetParamsMap().GetMap(); m != nil {
		if p, ok := m[name]; ok {
			return p, nil
		}
	}
	return nil, status.Errorf(codes.InvalidArgument, "Wrong input: Not existing vector name error: %s", name)
}

// normalizeVectors returns v with every cosine vector preprocessed, for storing.
func normalizeVectors(params *qdrant.CollectionParams, v *qdrant.Vectors) *qdrant.Vectors {
	if one := v.GetVector(); one != nil {
		p, err := vectorParams(params, "")
		if d := dense(one); err == nil && d != nil {
			return qdrant.NewVectorsDense(preprocess(p.GetDistance(), d))
		}
		return v
	}
	named := v.GetVectors().GetVectors()
	if named == nil {
		return v
	}
	out := make(map[string]*qdrant.Vector, len(named))
	for name, one := range named {
		p, err := vectorParams(params, name)
		if d := dense(one); err == nil && d != nil {
			one = qdrant.NewVectorDense(preprocess(p.GetDistance(), d))
		}
		out[name] = one
	}
	return qdrant.NewVectorsMap(out)
}

// storedVector is the dense vector name of v, or nil.
func storedVector(v *qdrant.Vectors, name string) []float32 {
	if one := v.GetVector(); one != nil {
		if name != "" {
			return nil
		}
		return dense(one)
	}
	if one, ok := v.GetVectors().GetVectors()[name]; ok {
		return dense(one)
	}
	return nil
}

// nearest is one nearest-neighbour request, the part Search and Query share.
type nearest struct {
	using       string
	vector      []float32
	filter      *qdrant.Filter
	threshold   *float32
	limit       int
	offset      int
	withPayload *qdrant.WithPayloadSelector
	withVectors *qdrant.WithVectorsSelector
}

// eachFiltered calls fn for every visible point of c that passes pre (a cheap check made
// first) and f, checking only f's index candidates when there are any. Callers hold c.mu.
func (c *collection) eachFiltered(f *qdrant.Filter, pre func(*point) bool, fn func(k pointKey, pt *point)) error {
	pr, err := compile(f, c.scope())
	if err != nil {
		return err
	}
	if f != nil && !isEmptyFilter(f) {
		if ids, ok := c.candidates(f); ok {
			c.examined.Add(uint64(len(ids)))
			for k := range ids {
				if pt, ok := c.points[k]; ok && !pt.deferred && pre(pt) && pr(&k, pt.payload) {
					fn(k, pt)
				}
			}
			return nil
		}
	}
	c.examined.Add(uint64(len(c.points)))
	for k, pt := range c.points {
		if !pt.deferred && pre(pt) && pr(&k, pt.payload) {
			fn(k, pt)
		}
	}
	return nil
}

type hit struct {
	k pointKey
	s float32
}

// scorer collects the hits of one nearest request.
type scorer struct {
	n     nearest
	dist  qdrant.Distance
	q     []float32
	large bool
	hits  []hit
}

// scorerFor checks n against c's vector parameters and prepares its query vector.
func (c *collection) scorerFor(n nearest) (*scorer, error) {
	p, err := vectorParams(c.params, n.using)
	if err != nil {
		return nil, err
	}
	if size := p.GetSize(); size != 0 && uint64(len(n.vector)) != size {
		return nil, status.Errorf(codes.InvalidArgument, "Wrong input: Vector dimension error: expected dim: %d, got %d", size, len(n.vector))
	}
	dist := p.GetDistance()
	return &scorer{n: n, dist: dist, q: preprocess(dist, n.vector), large: largeBetter(dist)}, nil
}

// score scores pt and reports whether it would be kept: it has the vector, passes the
// threshold and ranks among the best offset+limit hits so far.
func (s *scorer) score(pt *point) (float32, bool) {
	a := storedVector(pt.vectors, s.n.using)
	if len(a) != len(s.q) {
		return 0, false
	}
	sc := score(s.dist, s.q, a)
	if t := s.n.threshold; t != nil && (s.large && !(sc > *t) || !s.large && !(sc < *t)) {
		return 0, false
	}
	keep := s.n.offset + s.n.limit
	return sc, keep > 0 && (len(s.hits) < keep || s.better(sc, s.hits[0].s))
}

// keep adds a hit that score admitted. Only the best offset+limit hits are kept (a heap
// with the worst kept hit on top), as Qdrant's own top-k does: a search costs
// O(n log k), not a sort of every point.
func (s *scorer) keep(k pointKey, sc float32) {
	if len(s.hits) < s.n.offset+s.n.limit {
		heap.Push((*worstFirst)(s), hit{k, sc})
		return
	}
	s.hits[0] = hit{k, sc}
	heap.Fix((*worstFirst)(s), 0)
}

// better reports whether score a ranks before score b.
func (s *scorer) better(a, b float32) bool {
	if s.large {
		return a > b
	}
	return a < b
}

// worstFirst is a scorer's hits as a heap whose top is the worst hit kept.
type worstFirst scorer

func (h *worstFirst) Len() int           { return len(h.hits) }
func (h *worstFirst) Less(i, j int) bool { return (*scorer)(h).better(h.hits[j].s, h.hits[i].s) }
func (h *worstFirst) Swap(i, j int)      { h.hits[i], h.hits[j] = h.hits[j], h.hits[i] }
func (h *worstFirst) Push(x any)         { h.hits = append(h.hits, x.(hit)) }
func (h *worstFirst) Pop() any {
	x := h.hits[len(h.hits)-1]
	h.hits = h.hits[:len(h.hits)-1]
	return x
}

// result orders the hits best first, applies offset and limit and renders them.
// Callers hold c.mu.
func (c *collection) result(s *scorer) ([]*qdrant.ScoredPoint, error) {
	hits := s.hits
	sort.Slice(hits, func(i, j int) bool { return s.better(hits[i].s, hits[j].s) })
	if s.n.offset >= len(hits) {
		return []*qdrant.ScoredPoint{}, nil
	}
	hits = hits[s.n.offset:]
	if len(hits) > s.n.limit {
		hits = hits[:s.n.limit]
	}
	out := make([]*qdrant.ScoredPoint, 0, len(hits))
	for _, h := range hits {
		pt := c.points[h.k]
		payload, err := selectPayload(s.n.withPayload, false, pt.payload)
		if err != nil {
			return nil, err
		}
		vec, err := selectVectors(s.n.withVectors, pt.vectors)
		if err != nil {
			return nil, err
		}
		out = append(out, &qdrant.ScoredPoint{Id: h.k.id(), Payload: payload, Score: h.s, Vectors: vec})
	}
	return out, nil
}

// nearestOfSearch converts a SearchPoints request.
func nearestOfSearch(req *qdrant.SearchPoints) (nearest, error) {
	if req.GetLimit() == 0 {
		return nearest{}, status.Error(codes.InvalidArgument, "Bad request: Limit cannot be 0")
	}
	if req.SparseIndices != nil {
		return nearest{}, status.Error(codes.Unimplemented, "qdrantfake: sparse search is not implemented")
	}
	return nearest{
		using: req.GetVectorName(), vector: req.GetVector(), filter: req.GetFilter(),
		threshold: req.ScoreThreshold, limit: int(req.GetLimit()), offset: int(req.GetOffset()),
		withPayload: req.GetWithPayload(), withVectors: req.GetWithVectors(),
	}, nil
}

// nearestOfQuery converts a QueryPoints request; only a nearest query by a dense vector
// without prefetch is implemented.
func nearestOfQuery(req *qdrant.QueryPoints) (nearest, error) {
	if len(req.GetPrefetch()) > 0 || req.LookupFrom != nil {
		return nearest{}, status.Error(codes.Unimplemented, "qdrantfake: query with prefetch or lookup_from is not implemented")
	}
	nq, ok := req.GetQuery().GetVariant().(*qdrant.Query_Nearest)
	if !ok {
		return nearest{}, status.Error(codes.Unimplemented, "qdrantfake: only nearest queries are implemented")
	}
	d, ok := nq.Nearest.GetVariant().(*qdrant.VectorInput_Dense)
	if !ok {
		return nearest{}, status.Error(codes.Unimplemented, "qdrantfake: only nearest queries by a dense vector are implemented")
	}
	limit := 10
	if req.Limit != nil {
		if *req.Limit == 0 {
			return nearest{}, status.Error(codes.InvalidArgument, "Bad request: Limit cannot be 0")
		}
		limit = int(*req.Limit)
	}
	return nearest{
		using: req.GetUsing(), vector: d.Dense.GetData(), filter: req.GetFilter(),
		threshold: req.ScoreThreshold, limit: limit, offset: int(req.GetOffset()),
		withPayload: req.GetWithPayload(), withVectors: req.GetWithVectors(),
	}, nil
}

// searchAll answers each request on the collection name under one read lock.
func (ps *pointsService) searchAll(name string, reqs []nearest) ([][]*qdrant.ScoredPoint, error) {
	for _, n := range reqs {
		if _, err := compile(n.filter, scope{}); err != nil {
			return nil, err
		}
	}
	out := make([][]*qdrant.ScoredPoint, len(reqs))
	err := ps.s.read(name, func(c *collection) error {
		// Consecutive searches that share a filter are answered in one pass over the
		// points that pass it.
		for i := 0; i < len(reqs); {
			j := i + 1
			for j < len(reqs) && proto.Equal(reqs[j].filter, reqs[i].filter) {
				j++
			}
			group := make([]*scorer, 0, j-i)
			for _, n := range reqs[i:j] {
				s, err := c.scorerFor(n)
				if err != nil {
					return err
				}
				group = append(group, s)
			}
			// A point is scored first and its payload filtered only when a search would
			// keep it: the answer is the same, and a selective threshold spares the filter.
			scores, admitted := make([]float32, len(group)), make([]bool, len(group))
			pre := func(pt *point) bool {
				anyKept := false
				for g, s := range group {
					scores[g], admitted[g] = s.score(pt)
					anyKept = anyKept || admitted[g]
				}
				return anyKept
			}
			err := c.eachFiltered(reqs[i].filter, pre, func(k pointKey, _ *point) {
				for g, s := range group {
					if admitted[g] {
						s.keep(k, scores[g])
					}
				}
			})
			if err != nil {
				return err
			}
			for g, s := range group {
				if out[i+g], err = c.result(s); err != nil {
					return err
				}
			}
			i = j
		}
		return nil
	})
	return out, err
}

// Search is the nearest-neighbour search of one dense vector.
func (ps *pointsService) Search(_ context.Context, req *qdrant.SearchPoints) (*qdrant.SearchResponse, error) {
	n, err := nearestOfSearch(req)
	if err != nil {
		return nil, err
	}
	r, err := ps.searchAll(req.GetCollectionName(), []nearest{n})
	if err != nil {
		return nil, err
	}
	return &qdrant.SearchResponse{Result: r[0]}, nil
}

// SearchBatch answers several searches of one collection.
func (ps *pointsService) SearchBatch(_ context.Context, req *qdrant.SearchBatchPoints) (*qdrant.SearchBatchResponse, error) {
	r, err := batch(ps, req.GetCollectionName(), req.GetSearchPoints(), nearestOfSearch)
	return &qdrant.SearchBatchResponse{Result: r}, err
}

// batch converts each request with conv and answers them all on the collection name.
func batch[R any](ps *pointsService, name string, reqs []R, conv func(R) (nearest, error)) ([]*qdrant.BatchResult, error) {
	ns := make([]nearest, len(reqs))
	for i, r := range reqs {
		n, err := conv(r)
		if err != nil {
			return nil, err
		}
		ns[i] = n
	}
	res, err := ps.searchAll(name, ns)
	if err != nil {
		return nil, err
	}
	out := make([]*qdrant.BatchResult, len(res))
	for i, r := range res {
		out[i] = &qdrant.BatchResult{Result: r}
	}
	return out, nil
}

// Query is the universal query, implemented for a nearest query by a dense vector.
func (ps *pointsService) Query(_ context.Context, req *qdrant.QueryPoints) (*qdrant.QueryResponse, error) {
	n, err := nearestOfQuery(req)
	if err != nil {
		return nil, err
	}
	r, err := ps.searchAll(req.GetCollectionName(), []nearest{n})
	if err != nil {
		return nil, err
	}
	return &qdrant.QueryResponse{Result: r[0]}, nil
}

// QueryBatch answers several nearest queries of one collection.
func (ps *pointsService) QueryBatch(_ context.Context, req *qdrant.QueryBatchPoints) (*qdrant.QueryBatchResponse, error) {
	r, err := batch(ps, req.GetCollectionName(), req.GetQueryPoints(), nearestOfQuery)
	return &qdrant.QueryBatchResponse{Result: r}, err
}
