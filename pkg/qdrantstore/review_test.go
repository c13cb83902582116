package qdrantstore_test

import (
	"context"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// TestEraseItemsOnlyTheTenantsNamedPoint: a review's erase deletes the named point of the
// tenant and nothing else; another tenant's point with that id, an id the store does not
// hold and an id that is not a point id delete nothing.
func TestEraseItemsOnlyTheTenantsNamedPoint(t *testing.T) {
	client, _ := qdranttest.Connect(t)
	ctx := context.Background()
	const coll = "shared_items"
	_ = client.DeleteCollection(ctx, coll)
	if err := client.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: coll,
		VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 2, Distance: qdrant.Distance_Cosine})}); err != nil {
		t.Fatal(err)
	}
	pts := []*qdrant.PointStruct{
		{Id: qdrant.NewIDNum(1), Payload: qdrant.NewValueMap(map[string]any{"tenant_id": "acme", "text": "copy"}), Vectors: qdrant.NewVectors(1, 0)},
		{Id: qdrant.NewIDNum(2), Payload: qdrant.NewValueMap(map[string]any{"tenant_id": "acme", "text": "other"}), Vectors: qdrant.NewVectors(0, 1)},
		{Id: qdrant.NewIDNum(3), Payload: qdrant.NewValueMap(map[string]any{"tenant_id": "globex", "text": "theirs"}), Vectors: qdrant.NewVectors(1, 0)},
	}
	if _, err := client.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: coll, Points: pts, Wait: qdrant.PtrOf(true)}); err != nil {
		t.Fatal(err)
	}
	inv := inventory.Entry{Name: "kb", Kind: qdrantstore.Kind, Locators: inventory.Locators{
		"collections": []string{coll}, "subject_fields": []string{"customer_id"}, "tenant_field": "tenant_id"}}
	st := qdrantstore.New(client)
	left := func() []uint64 {
		t.Helper()
		res, err := client.Scroll(ctx, &qdrant.ScrollPoints{CollectionName: coll, Limit: qdrant.PtrOf(uint32(10))})
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint64
		for _, p := range res {
			ids = append(ids, p.GetId().GetNum())
		}
		return ids
	}

	if d, r, err := st.EraseItems(ctx, inv, "acme", []string{"3"}); err != nil || d != 0 || r != 0 {
		t.Fatalf("another tenant's point: deleted %d remaining %d err %v, want 0 0 nil", d, r, err)
	}
	if d, r, err := st.EraseItems(ctx, inv, "acme", []string{"1"}); err != nil || d != 1 || r != 0 {
		t.Fatalf("the tenant's point: deleted %d remaining %d err %v, want 1 0 nil", d, r, err)
	}
	for _, bad := range []string{"not-an-id", "007", "-1", ""} {
		if _, _, err := st.EraseItems(ctx, inv, "acme", []string{bad}); !retry.IsPermanent(err) {
			t.Errorf("item %q: err %v, want a permanent error", bad, err)
		}
	}
	if got := left(); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("points left %v, want [2 3]", got)
	}
}

// TestEraseItemsRefusesAnAmbiguousID: an id present in two collections of the store is
// not one item; nothing is deleted.
func TestEraseItemsRefusesAnAmbiguousID(t *testing.T) {
	client, _ := qdranttest.Connect(t)
	ctx := context.Background()
	for _, c := range []string{"a_acme", "b_acme"} {
		_ = client.DeleteCollection(ctx, c)
		if err := client.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: c,
			VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 2, Distance: qdrant.Distance_Cosine})}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: c, Wait: qdrant.PtrOf(true), Points: []*qdrant.PointStruct{
			{Id: qdrant.NewIDNum(7), Payload: qdrant.NewValueMap(map[string]any{"text": "x"}), Vectors: qdrant.NewVectors(1, 0)}}}); err != nil {
			t.Fatal(err)
		}
	}
	inv := inventory.Entry{Name: "kb", Kind: qdrantstore.Kind, Locators: inventory.Locators{
		"collections": []string{"a_{tenant}", "b_{tenant}"}, "subject_fields": []string{"customer_id"}}}
	if _, _, err := qdrantstore.New(client).EraseItems(ctx, inv, "acme", []string{"7"}); !retry.IsPermanent(err) {
		t.Fatalf("err %v, want a permanent error", err)
	}
	for _, c := range []string{"a_acme", "b_acme"} {
		if n, err := client.Count(ctx, &qdrant.CountPoints{CollectionName: c, Exact: qdrant.PtrOf(true)}); err != nil || n != 1 {
			t.Errorf("%s: %d points (%v), want 1", c, n, err)
		}
	}
}
