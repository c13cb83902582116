package main

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
)

// demoDim is the dimension of the demo's chunk vectors: large enough that unrelated
// random chunks are never near-duplicates at the default similarity.
const demoDim = 16

// nearDuplicateID is the point id of the untagged copy of the customer's first chunk that
// the semantic read-back must find: written by "another pipeline" without its tags.
const nearDuplicateID = 900_001

// demoVector is the vector of chunk i of the customer with id owner: pseudo-random, the
// same on every run.
func demoVector(owner string, i int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(owner))
	r := rand.New(rand.NewPCG(h.Sum64(), uint64(i)))
	v := make([]float32, demoDim)
	for j := range v {
		v[j] = float32(r.NormFloat64())
	}
	return v
}

// nearDuplicate is the untagged copy of the target's first chunk: its vector plus small
// noise, a payload without customer_id or session_id.
func nearDuplicate() *qdrant.PointStruct {
	v := demoVector(target.id, 0)
	r := rand.New(rand.NewPCG(1, 2))
	for j := range v {
		v[j] += float32(r.NormFloat64() * 0.02)
	}
	return &qdrant.PointStruct{Id: qdrant.NewIDNum(nearDuplicateID), Vectors: qdrant.NewVectorsDense(v),
		Payload: qdrant.NewValueMap(map[string]any{"text": "chunk 0 of a product answer, re-ingested by the export job"})}
}

// similarSummary reports the similar points of the receipt's qdrant stores, and fails
// unless the seeded near-duplicate is among them.
func similarSummary(r event.Receipt) (string, error) {
	var ids []string
	for _, s := range r.Stores {
		if s.Kind == qdrantstore.Kind {
			ids = append(ids, s.Verification.Similar...)
		}
	}
	if !slices.Contains(ids, strconv.Itoa(nearDuplicateID)) {
		return "", fmt.Errorf("semantic read-back did not report the untagged near-duplicate %d (similar: %v)", nearDuplicateID, ids)
	}
	return fmt.Sprintf("semantic read-back: %d untagged near-duplicate(s) of the customer's chunks reported in qdrant, point ids %v (kept: the inventory says similar: report)", len(ids), ids), nil
}
