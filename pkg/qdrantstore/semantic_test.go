package qdrantstore_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
)

// kb is a collection kb_acme with vectors of dimension dim and the given distance (named
// vectors when names are given), and a store over it.
type kb struct {
	t      *testing.T
	client *qdrant.Client
	store  *qdrantstore.Store
	next   uint64
}

const kbColl = "kb_acme"

func newKB(t *testing.T, dim uint64, dist qdrant.Distance, names ...string) *kb {
	t.Helper()
	client, _ := qdranttest.Connect(t)
	ctx := context.Background()
	_ = client.DeleteCollection(ctx, kbColl)
	cfg := qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: dim, Distance: dist})
	if len(names) > 0 {
		m := map[string]*qdrant.VectorParams{}
		for _, n := range names {
			m[n] = &qdrant.VectorParams{Size: dim, Distance: dist}
		}
		cfg = qdrant.NewVectorsConfigMap(m)
	}
	if err := client.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: kbColl, VectorsConfig: cfg}); err != nil {
		t.Fatal(err)
	}
	return &kb{t: t, client: client, store: qdrantstore.New(client)}
}

// inv is an inventory store over kb_{tenant} with extra locators.
func kbStore(extra map[string]any) inventory.Entry {
	l := inventory.Locators{
		"collections":    []string{"kb_{tenant}"},
		"subject_fields": []string{"customer_id"},
		"session_fields": []string{"session_id"},
	}
	for k, v := range extra {
		l[k] = v
	}
	return inventory.Entry{Name: "kb", Kind: qdrantstore.Kind, Locators: l}
}

// add upserts one point with payload and vectors (the unnamed one when vs has key "")
// and returns its id.
func (k *kb) add(payload map[string]any, vs map[string][]float32) string {
	k.t.Helper()
	k.next++
	var vec *qdrant.Vectors
	if v, ok := vs[""]; ok {
		vec = qdrant.NewVectorsDense(v)
	} else {
		m := map[string]*qdrant.Vector{}
		for n, v := range vs {
			m[n] = qdrant.NewVectorDense(v)
		}
		vec = qdrant.NewVectorsMap(m)
	}
	_, err := k.client.Upsert(context.Background(), &qdrant.UpsertPoints{CollectionName: kbColl, Wait: qdrant.PtrOf(true),
		Points: []*qdrant.PointStruct{{Id: qdrant.NewIDNum(k.next), Payload: qdrant.NewValueMap(payload), Vectors: vec}}})
	if err != nil {
		k.t.Fatal(err)
	}
	return strconv.FormatUint(k.next, 10)
}

func (k *kb) erase(inv inventory.Entry, s deletion.Subject) (deletion.Result, []string) {
	k.t.Helper()
	res, v := k.eraseVerify(inv, s)
	if v.Remaining != 0 {
		k.t.Fatalf("remaining %d", v.Remaining)
	}
	return res, v.Similar
}

func (k *kb) exists(id string) bool {
	k.t.Helper()
	n, _ := strconv.ParseUint(id, 10, 64)
	pts, err := k.client.Get(context.Background(), &qdrant.GetPoints{CollectionName: kbColl, Ids: []*qdrant.PointId{qdrant.NewIDNum(n)}})
	if err != nil {
		k.t.Fatal(err)
	}
	return len(pts) == 1
}

func randVec(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// noisy is v plus gaussian noise of deviation sigma relative to v's length per component.
func noisy(r *rand.Rand, v []float32, sigma float64) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x * x)
	}
	n = math.Sqrt(n / float64(len(v)))
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x + float32(r.NormFloat64()*sigma*n)
	}
	return out
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	sort.Strings(out)
	return out
}

// TestSemanticReadBackFindsUntaggedNearDuplicates is the property: over random
// collections, the untagged near-duplicates of the subject's vectors (its vectors plus
// small noise) are exactly what the read-back reports; unrelated vectors and other
// subjects' points are not reported, and nothing but the subject's points is deleted.
func TestSemanticReadBackFindsUntaggedNearDuplicates(t *testing.T) {
	for seed := range uint64(12) {
		r := rand.New(rand.NewPCG(seed, 7))
		dim := 16 + r.IntN(3)*8
		k := newKB(t, uint64(dim), qdrant.Distance_Cosine)
		victim := deletiontest.NewSubject("acme", "cust-"+strconv.FormatUint(seed, 10))
		other := deletiontest.NewSubject("acme", "other-"+strconv.FormatUint(seed, 10))
		var want, kept []string
		for range 1 + r.IntN(6) {
			v := randVec(r, dim)
			tag := map[string]any{"customer_id": victim.ID}
			if r.IntN(2) == 0 {
				tag = map[string]any{"session_id": victim.Sessions[0]}
			}
			k.add(tag, map[string][]float32{"": v})
			if r.IntN(3) > 0 {
				want = append(want, k.add(map[string]any{"source": "re-ingested"}, map[string][]float32{"": noisy(r, v, 0.02)}))
			}
		}
		for range 20 + r.IntN(60) {
			kept = append(kept, k.add(map[string]any{"customer_id": other.ID}, map[string][]float32{"": randVec(r, dim)}))
		}
		for range 20 + r.IntN(60) {
			kept = append(kept, k.add(map[string]any{"source": "unrelated"}, map[string][]float32{"": randVec(r, dim)}))
		}
		_, got := k.erase(kbStore(nil), victim)
		if !slices.Equal(sorted(got), sorted(want)) {
			t.Errorf("seed %d: similar %v, want %v", seed, sorted(got), sorted(want))
		}
		for _, id := range append(slices.Clone(want), kept...) {
			if !k.exists(id) {
				t.Errorf("seed %d: point %s deleted under similar: report", seed, id)
			}
		}
	}
}

// TestSimilarEraseDeletesTheCopies: with similar: erase the copies go too, are counted as
// a location of their own, and Verify finds none left.
func TestSimilarEraseDeletesTheCopies(t *testing.T) {
	k := newKB(t, 4, qdrant.Distance_Cosine)
	victim := deletiontest.NewSubject("acme", "cust-9")
	k.add(map[string]any{"customer_id": victim.ID}, map[string][]float32{"": {1, 2, 3, 4}})
	dup := k.add(map[string]any{"source": "copy"}, map[string][]float32{"": {1, 2, 3, 4.05}})
	far := k.add(map[string]any{"source": "other"}, map[string][]float32{"": {4, -3, 2, -1}})
	res, similar := k.erase(kbStore(map[string]any{"similar": "erase"}), victim)
	if len(similar) != 0 {
		t.Errorf("after erase, similar %v", similar)
	}
	if k.exists(dup) || !k.exists(far) {
		t.Errorf("dup exists %v (want false), far exists %v (want true)", k.exists(dup), k.exists(far))
	}
	want := []string{"kb_acme:1", "kb_acme (similar):1"}
	var got []string
	for _, l := range res.Locations {
		got = append(got, l.Location+":"+strconv.FormatInt(l.Deleted, 10))
	}
	if !slices.Equal(got, want) {
		t.Errorf("locations %v, want %v", got, want)
	}
}

// TestSimilarityThresholdPerDistance: cosine keeps score > similarity; euclid and
// manhattan keep distance < max_distance and are not searched without it.
func TestSimilarityThresholdPerDistance(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dist  qdrant.Distance
		extra map[string]any
		dup   []float32 // the copy of {3, 4}
		found bool
	}{
		// cos({3,4},{4,3}) = 24/25 = 0.96
		{"cosine below default", qdrant.Distance_Cosine, nil, []float32{4, 3}, false},
		{"cosine above set", qdrant.Distance_Cosine, map[string]any{"similarity": 0.95}, []float32{4, 3}, true},
		// distance √2 ≈ 1.414
		{"euclid without max_distance", qdrant.Distance_Euclid, nil, []float32{4, 3}, false},
		{"euclid within", qdrant.Distance_Euclid, map[string]any{"max_distance": 1.5}, []float32{4, 3}, true},
		{"euclid beyond", qdrant.Distance_Euclid, map[string]any{"max_distance": 1.4}, []float32{4, 3}, false},
		// distance 2
		{"manhattan within", qdrant.Distance_Manhattan, map[string]any{"max_distance": 2.5}, []float32{4, 3}, true},
		// dot 3·4+4·3 = 24
		{"dot above", qdrant.Distance_Dot, map[string]any{"similarity": 23.5}, []float32{4, 3}, true},
	} {
		k := newKB(t, 2, tc.dist)
		victim := deletiontest.NewSubject("acme", "cust-t")
		k.add(map[string]any{"customer_id": victim.ID}, map[string][]float32{"": {3, 4}})
		dup := k.add(map[string]any{}, map[string][]float32{"": tc.dup})
		_, similar := k.erase(kbStore(tc.extra), victim)
		if got := slices.Contains(similar, dup); got != tc.found {
			t.Errorf("%s: found %v, want %v (similar %v)", tc.name, got, tc.found, similar)
		}
	}
}

// TestSemanticReadBackOfNamedVectors: every named vector is searched by default, only the
// named ones with vectors: [...].
func TestSemanticReadBackOfNamedVectors(t *testing.T) {
	for _, tc := range []struct {
		vectors []string
		want    []string // which copies are found: "text", "image"
	}{
		{nil, []string{"image", "text"}},
		{[]string{"text"}, []string{"text"}},
	} {
		k := newKB(t, 3, qdrant.Distance_Cosine, "text", "image")
		victim := deletiontest.NewSubject("acme", "cust-n")
		k.add(map[string]any{"customer_id": victim.ID}, map[string][]float32{"text": {1, 0, 0}, "image": {0, 1, 0}})
		ids := map[string]string{
			k.add(nil, map[string][]float32{"text": {1, 0.01, 0}, "image": {0, 0, 1}}): "text",
			k.add(nil, map[string][]float32{"text": {0, 0, 1}, "image": {0.01, 1, 0}}): "image",
		}
		extra := map[string]any{}
		if tc.vectors != nil {
			extra["vectors"] = tc.vectors
		}
		_, similar := k.erase(kbStore(extra), victim)
		var got []string
		for _, id := range similar {
			got = append(got, ids[id])
		}
		if !slices.Equal(sorted(got), tc.want) {
			t.Errorf("vectors %v: found %v, want %v", tc.vectors, sorted(got), tc.want)
		}
	}
}

// TestSimilarOffSearchesNothing: similar: off reads no vectors and reports nothing.
func TestSimilarOffSearchesNothing(t *testing.T) {
	k := newKB(t, 2, qdrant.Distance_Cosine)
	victim := deletiontest.NewSubject("acme", "cust-o")
	k.add(map[string]any{"customer_id": victim.ID}, map[string][]float32{"": {3, 4}})
	k.add(nil, map[string][]float32{"": {3, 4}})
	ctx := context.Background()
	inv := kbStore(map[string]any{"similar": "off"})
	if _, err := k.store.Erase(ctx, inv, victim); err != nil {
		t.Fatal(err)
	}
	v, err := k.store.Verify(ctx, inv, victim)
	if err != nil || len(v.Similar) != 0 || v.Method != qdrantstore.MethodSubject {
		t.Errorf("Verify = %+v, %v", v, err)
	}
}

// TestSimilarSearchModeIsStated: the read-back searches through the HNSW index unless the
// store asks for exact search, and the verification's method says which ran; an unknown
// mode is refused when the inventory is validated.
func TestSimilarSearchModeIsStated(t *testing.T) {
	for _, tc := range []struct {
		mode, method string
	}{
		{"", qdrantstore.MethodSimilarIndexed},
		{"approximate", qdrantstore.MethodSimilarIndexed},
		{"exact", qdrantstore.MethodSimilar},
	} {
		k := newKB(t, 2, qdrant.Distance_Cosine)
		victim := deletiontest.NewSubject("acme", "cust-m")
		k.add(map[string]any{"customer_id": victim.ID}, map[string][]float32{"": {3, 4}})
		copyID := k.add(nil, map[string][]float32{"": {3, 4.01}})
		_, v := k.eraseVerify(kbStore(map[string]any{"similar_search": tc.mode}), victim)
		if !strings.HasSuffix(v.Method, tc.method) || !slices.Equal(v.Similar, []string{copyID}) {
			t.Errorf("similar_search %q: method %q similar %v, want suffix %q and [%s]", tc.mode, v.Method, v.Similar, tc.method, copyID)
		}
	}
	err := qdrantstore.Validate(kbStore(map[string]any{"similar_search": "fast"}))
	if err == nil || !strings.Contains(err.Error(), "similar_search") {
		t.Errorf("Validate(similar_search: fast) = %v, want an error naming similar_search", err)
	}
}
