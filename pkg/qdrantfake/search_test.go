package qdrantfake_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// vcoll creates coll with 2-dimensional vectors of distance d and the given points, each
// a vector with a payload naming its id.
func vcoll(t *testing.T, c *qdrant.Client, coll string, d qdrant.Distance, vecs map[uint64][]float32) {
	t.Helper()
	ctx := context.Background()
	_ = c.DeleteCollection(ctx, coll)
	err := c.CreateCollection(ctx, &qdrant.CreateCollection{
		CollectionName: coll,
		VectorsConfig:  qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 2, Distance: d}),
	})
	if err != nil {
		t.Fatal(err)
	}
	var pts []*qdrant.PointStruct
	for id, v := range vecs {
		pts = append(pts, &qdrant.PointStruct{Id: qdrant.NewIDNum(id), Vectors: qdrant.NewVectorsDense(v),
			Payload: qdrant.NewValueMap(map[string]any{"n": int64(id), "even": id%2 == 0})})
	}
	upsert(t, c, coll, pts...)
}

func query(t *testing.T, c *qdrant.Client, q *qdrant.QueryPoints) map[uint64]float32 {
	t.Helper()
	res, err := c.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]float32{}
	for _, p := range res {
		out[p.GetId().GetNum()] = p.GetScore()
	}
	return out
}

func near(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-5 }

func storedVectors(t *testing.T, c *qdrant.Client, coll string) map[uint64][]float32 {
	t.Helper()
	pts, err := c.Scroll(context.Background(), &qdrant.ScrollPoints{CollectionName: coll, Limit: qdrant.PtrOf(uint32(100)),
		WithVectors: qdrant.NewWithVectors(true)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64][]float32{}
	for _, p := range pts {
		out[p.GetId().GetNum()] = p.GetVectors().GetVector().GetDense().GetData()
	}
	return out
}

// TestCosineVectorsAreNormalisedAtUpsert: scroll returns cosine vectors of unit length;
// a zero vector and a unit one are kept as sent, and a dot collection keeps every vector.
func TestCosineVectorsAreNormalisedAtUpsert(t *testing.T) {
	c := connect(t)
	vecs := map[uint64][]float32{1: {3, 4}, 2: {0, 0}, 3: {1, 0}}
	vcoll(t, c, "norm_cos", qdrant.Distance_Cosine, vecs)
	got := storedVectors(t, c, "norm_cos")
	want := map[uint64][]float32{1: {0.6, 0.8}, 2: {0, 0}, 3: {1, 0}}
	for id, w := range want {
		if len(got[id]) != 2 || !near(got[id][0], w[0]) || !near(got[id][1], w[1]) {
			t.Errorf("cosine point %d stored as %v, want %v", id, got[id], w)
		}
	}
	vcoll(t, c, "norm_dot", qdrant.Distance_Dot, vecs)
	for id, v := range storedVectors(t, c, "norm_dot") {
		if v[0] != vecs[id][0] || v[1] != vecs[id][1] {
			t.Errorf("dot point %d stored as %v, want %v", id, v, vecs[id])
		}
	}
}

// TestScoresMatchHandComputedValues: cosine is the cosine of the angle, dot the dot
// product, euclid the positive L2 distance and manhattan the positive L1 distance.
func TestScoresMatchHandComputedValues(t *testing.T) {
	c := connect(t)
	vecs := map[uint64][]float32{1: {3, 4}, 2: {-1, 2}}
	cases := []struct {
		d    qdrant.Distance
		q    []float32
		want map[uint64]float32
	}{
		// (3·1+4·1)/(5·√2) and (-1+2)/(√5·√2)
		{qdrant.Distance_Cosine, []float32{1, 1}, map[uint64]float32{1: 0.98994949, 2: 0.31622777}},
		{qdrant.Distance_Dot, []float32{1, 2}, map[uint64]float32{1: 11, 2: 3}},
		// √((3-0)²+(4-1)²) = √18, √((-1)²+(2-1)²) = √2
		{qdrant.Distance_Euclid, []float32{0, 1}, map[uint64]float32{1: 4.2426407, 2: 1.4142135}},
		// |3-0|+|4-1| = 6, |-1|+|2-1| = 2
		{qdrant.Distance_Manhattan, []float32{0, 1}, map[uint64]float32{1: 6, 2: 2}},
	}
	for _, tc := range cases {
		vcoll(t, c, "scores", tc.d, vecs)
		got := query(t, c, &qdrant.QueryPoints{CollectionName: "scores", Query: qdrant.NewQueryDense(tc.q)})
		for id, w := range tc.want {
			if s, ok := got[id]; !ok || !near(s, w) {
				t.Errorf("%s: point %d score %v (found %v), want %v", tc.d, id, s, ok, w)
			}
		}
	}
}

// TestSearchOrdersBestFirst: larger first for dot, smaller first for euclid; limit and
// offset cut the ordered list.
func TestSearchOrdersBestFirst(t *testing.T) {
	c := connect(t)
	vecs := map[uint64][]float32{1: {1, 0}, 2: {2, 0}, 3: {3, 0}, 4: {4, 0}}
	for _, tc := range []struct {
		d    qdrant.Distance
		want []uint64
	}{
		{qdrant.Distance_Dot, []uint64{4, 3, 2, 1}},
		{qdrant.Distance_Euclid, []uint64{1, 2, 3, 4}},
	} {
		vcoll(t, c, "order", tc.d, vecs)
		res, err := c.Query(context.Background(), &qdrant.QueryPoints{CollectionName: "order", Query: qdrant.NewQuery(0.5, 0),
			Limit: qdrant.PtrOf(uint64(2)), Offset: qdrant.PtrOf(uint64(1))})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 2 || res[0].GetId().GetNum() != tc.want[1] || res[1].GetId().GetNum() != tc.want[2] {
			t.Errorf("%s: got %v, want %v", tc.d, res, tc.want[1:3])
		}
	}
}

// TestScoreThresholdIsStrict: a point whose score equals the threshold is left out, for
// larger-better (score > t) and smaller-better (distance < t) distances alike.
func TestScoreThresholdIsStrict(t *testing.T) {
	c := connect(t)
	vecs := map[uint64][]float32{1: {3, 4}, 2: {1, 1}}
	for _, tc := range []struct {
		d        qdrant.Distance
		q        []float32
		at, past float32 // at: point 1's exact score; past: a threshold that keeps it
		other    bool    // whether point 2 passes past
	}{
		{qdrant.Distance_Dot, []float32{1, 2}, 11, 10.5, false},
		{qdrant.Distance_Euclid, []float32{0, 0}, 5, 5.5, true},
		{qdrant.Distance_Manhattan, []float32{0, 0}, 7, 7.5, true},
	} {
		vcoll(t, c, "threshold", tc.d, vecs)
		got := query(t, c, &qdrant.QueryPoints{CollectionName: "threshold", Query: qdrant.NewQueryDense(tc.q), ScoreThreshold: &tc.at})
		if _, ok := got[1]; ok {
			t.Errorf("%s: score equal to threshold %v kept", tc.d, tc.at)
		}
		got = query(t, c, &qdrant.QueryPoints{CollectionName: "threshold", Query: qdrant.NewQueryDense(tc.q), ScoreThreshold: &tc.past})
		if _, ok := got[1]; !ok {
			t.Errorf("%s: threshold %v dropped point 1", tc.d, tc.past)
		}
		if _, ok := got[2]; ok != tc.other {
			t.Errorf("%s: threshold %v kept point 2: %v", tc.d, tc.past, ok)
		}
	}
}

// TestSearchFiltersWithTheFilterEngine: the filter of a search, query and batch keeps only
// the points it passes; params.exact is accepted.
func TestSearchFiltersWithTheFilterEngine(t *testing.T) {
	c := connect(t)
	vcoll(t, c, "filtered", qdrant.Distance_Cosine, map[uint64][]float32{1: {1, 0}, 2: {1, 0.1}, 3: {1, 0.2}, 4: {0, 1}})
	f := mustNot(qdrant.NewMatchBool("even", true))
	got := query(t, c, &qdrant.QueryPoints{CollectionName: "filtered", Query: qdrant.NewQuery(1, 0), Filter: f,
		Params: &qdrant.SearchParams{Exact: qdrant.PtrOf(true)}})
	if len(got) != 2 || got[1] == 0 || got[3] == 0 {
		t.Errorf("query with filter: %v, want points 1 and 3", got)
	}
	ctx := context.Background()
	sr, err := c.GetPointsClient().Search(ctx, &qdrant.SearchPoints{CollectionName: "filtered", Vector: []float32{0, 1}, Filter: f, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.GetResult()) != 2 || sr.GetResult()[0].GetId().GetNum() != 3 {
		t.Errorf("search with filter: %v, want 3 then 1", sr.GetResult())
	}
	br, err := c.QueryBatch(ctx, &qdrant.QueryBatchPoints{CollectionName: "filtered", QueryPoints: []*qdrant.QueryPoints{
		{CollectionName: "filtered", Query: qdrant.NewQuery(0, 1), Filter: must(qdrant.NewMatchBool("even", true)), Limit: qdrant.PtrOf(uint64(1))},
		{CollectionName: "filtered", Query: qdrant.NewQuery(1, 0), Limit: qdrant.PtrOf(uint64(1))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(br) != 2 || len(br[0].GetResult()) != 1 || br[0].GetResult()[0].GetId().GetNum() != 4 ||
		len(br[1].GetResult()) != 1 || br[1].GetResult()[0].GetId().GetNum() != 1 {
		t.Errorf("query batch: %v", br)
	}
}

// TestSearchReturnsVectorsAndPayloadOnRequest: by default a query returns neither; with
// with_vectors the stored (normalised) vector comes back.
func TestSearchReturnsVectorsAndPayloadOnRequest(t *testing.T) {
	c := connect(t)
	vcoll(t, c, "with", qdrant.Distance_Cosine, map[uint64][]float32{1: {3, 4}})
	ctx := context.Background()
	res, err := c.Query(ctx, &qdrant.QueryPoints{CollectionName: "with", Query: qdrant.NewQuery(1, 1)})
	if err != nil || len(res) != 1 {
		t.Fatal(res, err)
	}
	if len(res[0].GetPayload()) != 0 || res[0].GetVectors() != nil {
		t.Errorf("default query returned payload %v vectors %v", res[0].GetPayload(), res[0].GetVectors())
	}
	res, err = c.Query(ctx, &qdrant.QueryPoints{CollectionName: "with", Query: qdrant.NewQuery(1, 1),
		WithPayload: qdrant.NewWithPayload(true), WithVectors: qdrant.NewWithVectors(true)})
	if err != nil || len(res) != 1 {
		t.Fatal(res, err)
	}
	v := res[0].GetVectors().GetVector().GetDense().GetData()
	if len(v) != 2 || !near(v[0], 0.6) || !near(v[1], 0.8) || res[0].GetPayload()["n"].GetIntegerValue() != 1 {
		t.Errorf("query with payload and vectors: %v", res[0])
	}
}

// TestSearchRefusesAWrongDimension answers InvalidArgument, as Qdrant does.
func TestSearchRefusesAWrongDimension(t *testing.T) {
	c := connect(t)
	vcoll(t, c, "dims", qdrant.Distance_Cosine, map[uint64][]float32{1: {3, 4}})
	_, err := c.Query(context.Background(), &qdrant.QueryPoints{CollectionName: "dims", Query: qdrant.NewQuery(1, 2, 3)})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("wrong dimension: %v", err)
	}
}

// TestSetPayloadUnderKeyKeepsTheRest: set_payload with key replaces one key of a nested
// object and keeps every other key.
func TestSetPayloadUnderKeyKeepsTheRest(t *testing.T) {
	c := connect(t)
	createCollection(t, c, "setp")
	upsert(t, c, "setp", pt(qdrant.NewIDNum(1), map[string]any{"top": "x", "metadata": map[string]any{"text": "old", "lang": "en"}}))
	ctx := context.Background()
	_, err := c.SetPayload(ctx, &qdrant.SetPayloadPoints{CollectionName: "setp", Wait: qdrant.PtrOf(true), Key: qdrant.PtrOf("metadata"),
		Payload: qdrant.NewValueMap(map[string]any{"text": "new"}), PointsSelector: qdrant.NewPointsSelector(qdrant.NewIDNum(1))})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := c.Get(ctx, &qdrant.GetPoints{CollectionName: "setp", Ids: []*qdrant.PointId{qdrant.NewIDNum(1)}, WithPayload: qdrant.NewWithPayload(true)})
	if err != nil || len(pts) != 1 {
		t.Fatal(pts, err)
	}
	p := pts[0].GetPayload()
	md := p["metadata"].GetStructValue().GetFields()
	if p["top"].GetStringValue() != "x" || md["text"].GetStringValue() != "new" || md["lang"].GetStringValue() != "en" {
		t.Errorf("payload after set_payload: %v", p)
	}
}

// TestTopKMatchesAFullSort: over random collections, batched queries that share a filter
// (answered in one pass that scores before it filters, keeping a top-k heap) return what
// scoring, filtering and sorting every point would: the same points, in the same order.
func TestTopKMatchesAFullSort(t *testing.T) {
	c := connect(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 11))
	for round := range 6 {
		d := []qdrant.Distance{qdrant.Distance_Dot, qdrant.Distance_Euclid}[round%2]
		vecs := map[uint64][]float32{}
		for id := uint64(1); id <= 300; id++ {
			vecs[id] = []float32{float32(r.NormFloat64()), float32(r.NormFloat64())}
		}
		vcoll(t, c, "topk", d, vecs)
		score := func(q, v []float32) float32 {
			if d == qdrant.Distance_Dot {
				return q[0]*v[0] + q[1]*v[1]
			}
			return float32(math.Hypot(float64(q[0]-v[0]), float64(q[1]-v[1])))
		}
		filter := []*qdrant.Filter{nil, {Must: []*qdrant.Condition{qdrant.NewMatchBool("even", true)}},
			{MustNot: []*qdrant.Condition{qdrant.NewMatchBool("even", true)}}}[round%3]
		var qs []*qdrant.QueryPoints
		var want [][]uint64
		for range 5 {
			q := []float32{float32(r.NormFloat64()), float32(r.NormFloat64())}
			limit, offset := uint64(1+r.IntN(20)), uint64(r.IntN(5))
			var th *float32
			if r.IntN(2) == 0 {
				v := float32(r.Float64() * 2)
				th = &v
			}
			qs = append(qs, &qdrant.QueryPoints{CollectionName: "topk", Query: qdrant.NewQueryDense(q), Filter: filter,
				Limit: qdrant.PtrOf(limit), Offset: qdrant.PtrOf(offset), ScoreThreshold: th})
			var ids []uint64
			for id, v := range vecs {
				even := id%2 == 0
				if filter != nil && (len(filter.Must) > 0 && !even || len(filter.MustNot) > 0 && even) {
					continue
				}
				s := score(q, v)
				if th != nil && (d == qdrant.Distance_Dot && !(s > *th) || d == qdrant.Distance_Euclid && !(s < *th)) {
					continue
				}
				ids = append(ids, id)
			}
			sort.Slice(ids, func(i, j int) bool {
				a, b := score(q, vecs[ids[i]]), score(q, vecs[ids[j]])
				if d == qdrant.Distance_Dot {
					return a > b
				}
				return a < b
			})
			ids = ids[min(int(offset), len(ids)):]
			want = append(want, ids[:min(int(limit), len(ids))])
		}
		res, err := c.QueryBatch(ctx, &qdrant.QueryBatchPoints{CollectionName: "topk", QueryPoints: qs})
		if err != nil {
			t.Fatal(err)
		}
		for i, br := range res {
			var got []uint64
			for _, p := range br.GetResult() {
				got = append(got, p.GetId().GetNum())
			}
			if !slices.Equal(got, want[i]) {
				t.Errorf("round %d query %d (%s, filter %v): got %v, want %v", round, i, d, filter, got, want[i])
			}
		}
	}
}
