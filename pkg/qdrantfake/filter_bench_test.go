package qdrantfake_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
)

// BenchmarkIndexedSubjectFilter counts, then deletes and restores, the points of subjects
// matched the way qdrantstore matches them (a should of keyword conditions on indexed
// fields), among 10,000 unrelated points: the emulator's share of an erasure's Qdrant calls.
func BenchmarkIndexedSubjectFilter(b *testing.B) {
	for _, subjects := range []int{1, 32} {
		b.Run(fmt.Sprintf("subjects=%d", subjects), func(b *testing.B) {
			c, _ := qdranttest.Emulator(b)
			ctx := context.Background()
			const coll = "bench"
			qdranttest.Collection(b, c, coll)
			for _, f := range []string{"customer_id", "customer_hash", "session_id"} {
				qdranttest.Index(b, c, coll, f, qdrant.FieldType_FieldTypeKeyword, nil)
			}
			var pts []*qdrant.PointStruct
			var ids, hashes, sessions []string
			add := func(id uint64, customer string, tagged bool) {
				p := map[string]any{"session_id": "s-" + customer, "chunk": int64(id % 50)}
				if tagged {
					p["customer_id"], p["customer_hash"] = customer, "h-"+customer
				}
				pts = append(pts, &qdrant.PointStruct{Id: qdrant.NewIDNum(id), Payload: qdrant.NewValueMap(p), Vectors: qdrant.NewVectors(0.1, 0.2, 0.3, 0.4)})
			}
			id := uint64(1)
			for i := range 500 { // 500 unrelated customers, 20 chunks each
				for range 20 {
					add(id, fmt.Sprintf("other-%d", i), true)
					id++
				}
			}
			var targets []*qdrant.PointStruct
			for i := range subjects { // 33 tagged chunks and 17 legacy ones (session only)
				cu := fmt.Sprintf("sub-%d", i)
				ids, hashes, sessions = append(ids, cu), append(hashes, "h-"+cu), append(sessions, "s-"+cu)
				for j := range 50 {
					add(id, cu, j < 33)
					targets = append(targets, pts[len(pts)-1])
					id++
				}
			}
			if _, err := c.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: coll, Points: pts, Wait: qdrant.PtrOf(true)}); err != nil {
				b.Fatal(err)
			}
			f := &qdrant.Filter{Should: []*qdrant.Condition{
				qdrant.NewMatchKeywords("customer_id", ids...),
				qdrant.NewMatchKeywords("customer_hash", hashes...),
				qdrant.NewMatchKeywords("session_id", sessions...),
			}}
			want := uint64(50 * subjects)
			b.ResetTimer()
			for b.Loop() {
				n, err := c.Count(ctx, &qdrant.CountPoints{CollectionName: coll, Filter: f, Exact: qdrant.PtrOf(true)})
				if err != nil || n != want {
					b.Fatalf("count %d, %v; want %d", n, err, want)
				}
				if _, err := c.Delete(ctx, &qdrant.DeletePoints{CollectionName: coll, Points: qdrant.NewPointsSelectorFilter(f), Wait: qdrant.PtrOf(true)}); err != nil {
					b.Fatal(err)
				}
				if n, err := c.Count(ctx, &qdrant.CountPoints{CollectionName: coll, Filter: f, Exact: qdrant.PtrOf(true)}); err != nil || n != 0 {
					b.Fatalf("count after delete %d, %v", n, err)
				}
				b.StopTimer()
				if _, err := c.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: coll, Points: targets, Wait: qdrant.PtrOf(true)}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
