package edgediff_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/qdrantfake/edgediff"
)

// TestExactSearchWithThresholds compares exact nearest queries (Query, QueryBatch and
// Search, params.exact=true) with score thresholds, as semantic read-back sends them, for
// cosine, dot, euclid and manhattan: the points, their scores and order, with and
// without a filter, and the vectors scroll returns (cosine ones normalised at upsert).
// Thresholds are drawn from the scores themselves, so that they cut through the results.
func TestExactSearchWithThresholds(t *testing.T) {
	base := seed(t)
	ctx := context.Background()
	c, _, m := edgediff.Connect(t)
	queries := 0
	for di, d := range []qdrant.Distance{qdrant.Distance_Cosine, qdrant.Distance_Dot, qdrant.Distance_Euclid, qdrant.Distance_Manhattan} {
		g := &gen{r: rand.New(rand.NewPCG(base, uint64(100+di)))}
		coll := fmt.Sprintf("search_%s", d)
		create(t, c, coll, d, 4)
		var pts []*qdrant.PointStruct
		var vecs [][]float32
		var ids []*qdrant.PointId
		for i := range 60 {
			v := []float32{g.r.Float32()*2 - 1, g.r.Float32()*2 - 1, g.r.Float32()*2 - 1, g.r.Float32()*2 - 1}
			switch {
			case i > 0 && i%7 == 0: // a near-duplicate of an earlier vector
				w := vecs[g.r.IntN(len(vecs))]
				v = []float32{w[0] + 1e-3, w[1], w[2] - 1e-3, w[3]}
			case i > 0 && i%11 == 0: // a scaled copy: cosine 1, other scores not
				w := vecs[g.r.IntN(len(vecs))]
				v = []float32{w[0] * 3, w[1] * 3, w[2] * 3, w[3] * 3}
			}
			vecs = append(vecs, v)
			id := g.id(i)
			ids = append(ids, id)
			pts = append(pts, &qdrant.PointStruct{Id: id, Vectors: qdrant.NewVectors(v...), Payload: qdrant.NewValueMap(g.payload())})
		}
		upsert(t, c, coll, pts)
		if g.chance(0.5) {
			index(t, c, coll, "kw", qdrant.FieldType_FieldTypeKeyword)
		}
		scrollWithVectors(t, c, coll)
		for q := range 150 {
			vec := vecs[g.r.IntN(len(vecs))]
			if q%3 == 0 {
				vec = []float32{g.r.Float32()*2 - 1, g.r.Float32()*2 - 1, g.r.Float32()*2 - 1, g.r.Float32()*2 - 1}
			}
			req := &qdrant.QueryPoints{
				CollectionName: coll,
				Query:          qdrant.NewQueryDense(vec),
				Limit:          qdrant.PtrOf(uint64(1 + g.r.IntN(70))),
				Params:         &qdrant.SearchParams{Exact: qdrant.PtrOf(true)},
				WithPayload:    qdrant.NewWithPayload(g.chance(0.3)),
				WithVectors:    qdrant.NewWithVectors(g.chance(0.3)),
			}
			if g.chance(0.7) {
				th := threshold(d, vec, vecs, g)
				req.ScoreThreshold = &th
			}
			if g.chance(0.3) {
				req.Filter = g.filter(ids, 1, false)
			}
			switch q % 3 {
			case 0:
				if _, err := c.Query(ctx, req); err != nil {
					t.Fatal(err)
				}
			case 1:
				other := &qdrant.QueryPoints{CollectionName: coll, Query: qdrant.NewQueryDense(vecs[0]), Limit: qdrant.PtrOf(uint64(5)), ScoreThreshold: req.ScoreThreshold, Params: req.Params}
				if _, err := c.QueryBatch(ctx, &qdrant.QueryBatchPoints{CollectionName: coll, QueryPoints: []*qdrant.QueryPoints{req, other}}); err != nil {
					t.Fatal(err)
				}
			default:
				_, err := c.GetPointsClient().Search(ctx, &qdrant.SearchPoints{
					CollectionName: coll, Vector: vec, Limit: req.GetLimit(), Filter: req.Filter, ScoreThreshold: req.ScoreThreshold,
					Params: req.Params, WithPayload: req.WithPayload, WithVectors: req.WithVectors,
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			queries++
		}
	}
	t.Logf("%d exact queries with thresholds; reads compared: %v", queries, m.Compared())
	if n := m.Compared()["/qdrant.Points/Query"] + m.Compared()["/qdrant.Points/QueryBatch"] + m.Compared()["/qdrant.Points/Search"]; n < queries {
		t.Errorf("%d of %d queries compared", n, queries)
	}
}

// threshold draws a score threshold among the scores of vec against vecs, nudged off
// them so that rounding cannot decide which side of it a point falls.
func threshold(d qdrant.Distance, vec []float32, vecs [][]float32, g *gen) float32 {
	scores := make([]float64, len(vecs))
	for i, w := range vecs {
		scores[i] = score(d, vec, w)
	}
	sort.Float64s(scores)
	s := scores[g.r.IntN(len(scores))]
	return float32(s + (g.r.Float64()-0.5)*1e-2)
}

func score(d qdrant.Distance, a, b []float32) float64 {
	var dot, na, nb, l1, l2 float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
		l1 += math.Abs(x - y)
		l2 += (x - y) * (x - y)
	}
	switch d {
	case qdrant.Distance_Cosine:
		return dot / math.Sqrt(na*nb)
	case qdrant.Distance_Euclid:
		return math.Sqrt(l2)
	case qdrant.Distance_Manhattan:
		return l1
	}
	return dot
}

// scrollWithVectors reads every point with its vectors, through the mirror.
func scrollWithVectors(t *testing.T, c *qdrant.Client, coll string) {
	t.Helper()
	_, err := c.Scroll(context.Background(), &qdrant.ScrollPoints{
		CollectionName: coll, Limit: qdrant.PtrOf(uint32(100)), WithVectors: qdrant.NewWithVectors(true),
	})
	if err != nil {
		t.Fatal(err)
	}
}
