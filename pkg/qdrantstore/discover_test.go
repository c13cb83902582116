package qdrantstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
)

// TestDiscoverReportsOnlyUncoveredCollections seeds covered collections (a tenant
// template, a per-subject template) and uncovered ones (identity-like nested field,
// personal data in free text, nothing subject-shaped) and checks the report lists every
// uncovered one holding subject-shaped data, no covered one, and no value (a covered
// collection shows only through its keys no locator names).
func TestDiscoverReportsOnlyUncoveredCollections(t *testing.T) {
	client, _ := qdranttest.Connect(t)
	ctx := context.Background()
	put := func(coll string, payloads ...map[string]any) {
		qdranttest.Collection(t, client, coll)
		var pts []*qdrant.PointStruct
		for i, p := range payloads {
			pts = append(pts, &qdrant.PointStruct{Id: qdrant.NewIDNum(uint64(i + 1)), Payload: qdrant.NewValueMap(p), Vectors: qdrant.NewVectors(0.1, 0.2, 0.3, 0.4)})
		}
		if _, err := client.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: coll, Points: pts, Wait: qdrant.PtrOf(true)}); err != nil {
			t.Fatal(err)
		}
	}
	const email, id = "ana.lopez@example.com", "cust-981"
	put("shopbot_acme", map[string]any{"customer_id": id})
	put("mem_cust-981_v2", map[string]any{"user_id": id})
	put("shopbot_acme_old", map[string]any{"metadata": map[string]any{"Customer_ID": id, "source": "crm"}}, map[string]any{"text": "x"})
	put("notes_globex", map[string]any{"page_content": "write to " + email + " tomorrow"}, map[string]any{"page_content": "nothing"})
	put("products", map[string]any{"sku": "A-1", "title": "lamp"})

	inv := &inventory.Inventory{Version: "1", Stores: []inventory.Entry{
		{Name: "qdrant", Kind: qdrantstore.Kind, Locators: inventory.Locators{"collections": []string{"shopbot_{tenant}"}, "subject_fields": []string{"customer_id"}}},
		{Name: "memory", Kind: qdrantstore.Kind, Locators: inventory.Locators{"collections": []string{"mem_{subject}_v2"}, "subject_fields": []string{"user_id"}, "tenant_field": "tenant_id"}},
		{Name: "cache", Kind: "redis", Locators: inventory.Locators{"keys": []string{"x"}}},
	}}
	st := qdrantstore.New(client)
	for _, tenants := range [][]string{nil, {"acme", "globex"}} {
		got, err := st.Discover(ctx, inv, deletion.DiscoverOptions{Sample: 10, Tenants: tenants})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]deletion.Uncovered{
			"notes_globex": {Kind: "qdrant", Location: "notes_globex", Reason: "personal data patterns: [email]", Count: 1},
		}
		if tenants != nil {
			// With known tenants, shopbot_acme_old is no tenant's shopbot_{tenant}.
			want["shopbot_acme_old"] = deletion.Uncovered{Kind: "qdrant", Location: "shopbot_acme_old", Reason: "identity-like fields: metadata.Customer_ID", Count: 1, Fields: []string{"metadata.Customer_ID"}}
		} else {
			// Without, it is covered, and its nested key is one the store's locators miss.
			want["shopbot_{tenant}/metadata.Customer_ID"] = deletion.Uncovered{Kind: "qdrant", Location: "shopbot_{tenant}/metadata.Customer_ID", Reason: "identity-like field name; not named by the locators of store qdrant", Count: 1, Fields: []string{"metadata.Customer_ID"}}
		}
		if len(got) != len(want) {
			t.Errorf("tenants %v: Discover = %+v, want %+v", tenants, got, want)
		}
		for _, u := range got {
			if w, ok := want[u.Location]; !ok || !sameFinding(u, w) {
				t.Errorf("tenants %v: %+v, want %+v", tenants, u, w)
			}
		}
		if s := fmt.Sprint(got); strings.Contains(s, email) || strings.Contains(s, id) || strings.Contains(s, "ana") {
			t.Errorf("report holds a value: %s", s)
		}
	}
}
