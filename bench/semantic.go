package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
)

// Semantic read-back corpus: vectors of semanticDim dimensions (cosine), semanticChunks
// tagged chunks per subject, each subject with one untagged near-duplicate.
const (
	semanticDim    = 32
	semanticChunks = 10
)

// runSemantic measures, at both sizes and in the same run, what semantic read-back adds
// to an erasure: n subjects erased with similar: off and n with similar: report (the
// default), on one emulator collection of that many unrelated points.
func runSemantic(ctx context.Context, cfg Config, res *Results, logf func(string, ...any)) error {
	srv, err := qdrantfake.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Close()
	q, err := qdrant.NewClient(srv.Config())
	if err != nil {
		return err
	}
	defer q.Close()
	logf("semantic read-back, %d subjects per mode, %d-dimensional vectors, %d chunks per subject", cfg.Subjects, semanticDim, semanticChunks)
	for _, sz := range []Size{cfg.Small, cfg.Large} {
		off, on, found, err := measureSemantic(ctx, q, sz, cfg.Subjects)
		if err != nil {
			return fmt.Errorf("semantic %s: %w", sz.Name, err)
		}
		prefix := "qdrant_semantic/" + sz.Name
		res.AddVs(prefix+"/erase_verify_p50", on.Median(), off.Median(), "ms")
		res.List[len(res.List)-1].Note = fmt.Sprintf("with semantic read-back; baseline: the same erasure with similar: off; %d unrelated points", sz.QdrantPoints)
		res.Add(prefix+"/read_back_cost_p50", on.Median()-off.Median(), "ms",
			fmt.Sprintf("%d exact queries per erasure, each scoring every point outside the subject's tags", semanticChunks))
		res.Add(prefix+"/near_duplicates_found", float64(found), "of subjects", fmt.Sprintf("of %d", cfg.Subjects))
		logf("  %-5s similar off p50 %8.3f ms   report p50 %8.3f ms   (%d/%d near-duplicates found)", sz.Name, off.Median(), on.Median(), found, cfg.Subjects)
	}
	return nil
}

// measureSemantic seeds sz.QdrantPoints unrelated points and 2n subjects, erases n with
// similar: off and n with similar: report, and returns both latencies and how many of the
// second n had their near-duplicate reported.
func measureSemantic(ctx context.Context, q *qdrant.Client, sz Size, n int) (off, on Durations, found int, err error) {
	tenant := "sem" + sz.Name
	coll := "semantic_" + tenant
	err = q.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: coll,
		VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: semanticDim, Distance: qdrant.Distance_Cosine})})
	if err != nil {
		return nil, nil, 0, err
	}
	defer func() { _ = q.DeleteCollection(context.WithoutCancel(ctx), coll) }() // cleanup of a benchmark collection
	base := inventory.Locators{"collections": []string{"semantic_{tenant}"}, "subject_fields": []string{"customer_id"}}
	invOff := inventory.Entry{Name: "semantic", Kind: qdrantstore.Kind, Locators: base.With("similar", qdrantstore.SimilarOff)}
	invOn := inventory.Entry{Name: "semantic", Kind: qdrantstore.Kind, Locators: base}
	st := qdrantstore.New(q)
	if err := st.EnsureIndexes(ctx, invOn, tenant); err != nil {
		return nil, nil, 0, err
	}
	r := rand.New(rand.NewPCG(uint64(sz.QdrantPoints), 32))
	var id uint64
	var batch []*qdrant.PointStruct
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := q.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: coll, Points: batch, Wait: qdrant.PtrOf(true)})
		batch = batch[:0]
		return err
	}
	add := func(payload map[string]any, v []float32) error {
		id++
		batch = append(batch, &qdrant.PointStruct{Id: qdrant.NewIDNum(id), Vectors: qdrant.NewVectorsDense(v), Payload: qdrant.NewValueMap(payload)})
		if len(batch) == qdrantBatch {
			return flush()
		}
		return nil
	}
	subjects := make([]deletion.Subject, 2*n)
	for i := range subjects {
		subjects[i] = deletion.Subject{Tenant: tenant, ID: fmt.Sprintf("sem-%s-%d", sz.Name, i), Scope: event.ScopeSubject}
		for c := range semanticChunks {
			v := randomVector(r)
			if err := add(map[string]any{"customer_id": subjects[i].ID, "chunk": c}, v); err != nil {
				return nil, nil, 0, err
			}
			if c == 0 {
				for j := range v {
					v[j] += float32(r.NormFloat64() * 0.02)
				}
				if err := add(map[string]any{"source": "re-ingested"}, v); err != nil {
					return nil, nil, 0, err
				}
			}
		}
	}
	for i := range sz.QdrantPoints {
		if err := add(map[string]any{"customer_id": fmt.Sprintf("other-%d", i%1000)}, randomVector(r)); err != nil {
			return nil, nil, 0, err
		}
	}
	if err := flush(); err != nil {
		return nil, nil, 0, err
	}
	for i, s := range subjects {
		inv := invOff
		if i >= n {
			inv = invOn
		}
		start := time.Now()
		if _, err := st.Erase(ctx, inv, s); err != nil {
			return nil, nil, 0, err
		}
		v, err := st.Verify(ctx, inv, s)
		if err != nil {
			return nil, nil, 0, err
		}
		d := time.Since(start)
		if v.Remaining != 0 {
			return nil, nil, 0, fmt.Errorf("%d points of a subject remain", v.Remaining)
		}
		if i < n {
			off = append(off, d)
			continue
		}
		on = append(on, d)
		if len(v.Similar) > 0 {
			found++
		}
	}
	return off, on, found, nil
}

// randomVector is a vector of independent standard normal components.
func randomVector(r *rand.Rand) []float32 {
	v := make([]float32, semanticDim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}
