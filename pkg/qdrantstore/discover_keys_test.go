package qdrantstore_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/pii"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
)

// Raw values seeded by the key discovery tests, none of which may reach a report.
const (
	keysCustomer = "cust-1"
	keysEmail    = "ana.lopez@example.com"
	keysOther    = "bo.ng@example.org"
	keysMapKey   = "cust-42"
)

// seedPayloads creates coll holding one point per payload, with ids 1, 2, ... in order.
func seedPayloads(t *testing.T, client *qdrant.Client, coll string, payloads ...map[string]any) {
	t.Helper()
	qdranttest.Collection(t, client, coll)
	var pts []*qdrant.PointStruct
	for i, p := range payloads {
		pts = append(pts, &qdrant.PointStruct{Id: qdrant.NewIDNum(uint64(i + 1)), Payload: qdrant.NewValueMap(p), Vectors: qdrant.NewVectors(0.1, 0.2, 0.3, 0.4)})
	}
	if _, err := client.Upsert(context.Background(), &qdrant.UpsertPoints{CollectionName: coll, Points: pts, Wait: qdrant.PtrOf(true)}); err != nil {
		t.Fatal(err)
	}
}

// langchainPoint is a LangChain-shaped point of tenant: free text, the tenant field, and
// metadata holding the customer id when customer is not empty.
func langchainPoint(tenant, customer string) map[string]any {
	meta := map[string]any{"source": "crm"}
	if customer != "" {
		meta["customer_id"] = customer
	}
	return map[string]any{"page_content": "write to " + keysEmail + " about " + keysCustomer, "tenant": tenant, "lang": "en", "metadata": meta}
}

// seedLangChain seeds kb_acme (ids 1, 3, 4 carry metadata.customer_id, 2 does not) and
// kb_globex (its one point carries it).
func seedLangChain(t *testing.T, client *qdrant.Client) {
	seedPayloads(t, client, "kb_acme", langchainPoint("acme", keysCustomer), langchainPoint("acme", ""), langchainPoint("acme", keysCustomer), langchainPoint("acme", keysCustomer))
	seedPayloads(t, client, "kb_globex", langchainPoint("globex", "cust-2"))
}

// kbInventory covers kb_{tenant} with subject_fields, a tenant field and page_content as
// a text field.
func kbInventory(subjectFields ...string) *inventory.Inventory {
	return &inventory.Inventory{Version: "1", Stores: []inventory.Entry{{Name: "kb", Kind: qdrantstore.Kind, Locators: inventory.Locators{
		"collections": []string{"kb_{tenant}"}, "subject_fields": subjectFields, "tenant_field": "tenant", "text_fields": []string{"page_content"},
	}}}}
}

// sameFinding reports whether got equals want, Suggest aside (the tests of Suggest check
// it apart).
func sameFinding(got, want deletion.Uncovered) bool {
	got.Suggest, want.Suggest = "", ""
	return reflect.DeepEqual(got, want)
}

// assertNoValue fails when the JSON of found holds one of the seeded raw values.
func assertNoValue(t *testing.T, found []deletion.Uncovered) {
	t.Helper()
	b, err := json.Marshal(found)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{keysCustomer, "cust-2", keysEmail, keysOther, keysMapKey, "ana", "example.com", "example.org", "crm", "acme", "globex"} {
		if strings.Contains(string(b), v) {
			t.Errorf("report holds the value %q: %s", v, b)
		}
	}
}

// TestDiscoverReportsCoveredCollectionsUnnamedKeys covers LangChain-shaped collections
// with subject_fields [customer_id] while the id sits in metadata.customer_id, and checks
// that the key is reported once for the template, counting the sampled points carrying
// it (ids 1 and 3 of kb_acme's first 3, and kb_globex's one), and that the text field
// (holding an email address), the tenant field (named like identity here) and unrelated
// keys (lang, metadata.source) are not.
func TestDiscoverReportsCoveredCollectionsUnnamedKeys(t *testing.T) {
	client, _ := qdranttest.Connect(t)
	seedLangChain(t, client)
	st := qdrantstore.New(client)
	for _, tenants := range [][]string{nil, {"acme", "globex"}} {
		opts := deletion.DiscoverOptions{Sample: 3, Tenants: tenants, Fields: []string{"customer_id", "tenant"}}
		got, err := st.Discover(context.Background(), kbInventory("customer_id"), opts)
		if err != nil {
			t.Fatal(err)
		}
		want := deletion.Uncovered{Kind: "qdrant", Location: "kb_{tenant}/metadata.customer_id", Reason: "identity-like field name; not named by the locators of store kb", Count: 3, Fields: []string{"metadata.customer_id"}}
		if len(got) != 1 || !sameFinding(got[0], want) {
			t.Errorf("tenants %v: Discover = %+v, want [%+v]", tenants, got, want)
		}
		assertNoValue(t, got)
	}
}

// TestDiscoverKeyNamedByALocatorIsNotReported covers the same collections with
// subject_fields [metadata.customer_id]: nothing is left to report.
func TestDiscoverKeyNamedByALocatorIsNotReported(t *testing.T) {
	client, _ := qdranttest.Connect(t)
	seedLangChain(t, client)
	st := qdrantstore.New(client)
	for _, tenants := range [][]string{nil, {"acme", "globex"}} {
		got, err := st.Discover(context.Background(), kbInventory("metadata.customer_id"), deletion.DiscoverOptions{Tenants: tenants})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 0 {
			t.Errorf("tenants %v: Discover = %+v, want nothing", tenants, got)
		}
	}
}

// TestDiscoverReportsKeysByTheirValues covers a collection whose nested user.email is
// not named like identity (Fields holds only customer_id) but holds email addresses, and
// whose per-customer map is keyed by customer ids: both are reported with the pattern
// name, the map key written {id}, and the array of objects in Qdrant's grammar.
func TestDiscoverReportsKeysByTheirValues(t *testing.T) {
	client, _ := qdranttest.Connect(t)
	seedPayloads(t, client, "profiles",
		map[string]any{"customer_id": keysCustomer, "tenant": "acme", "user": map[string]any{"email": keysEmail, "lang": "es"}},
		map[string]any{"customer_id": "cust-2", "tenant": "acme", "user": map[string]any{"email": keysOther}, "by_customer": map[string]any{keysMapKey: map[string]any{"contact": keysOther}}},
		map[string]any{"customer_id": "cust-3", "tenant": "acme", "user": map[string]any{"lang": "en"}, "messages": []any{map[string]any{"from": keysEmail}, map[string]any{"from": "support"}}},
	)
	inv := &inventory.Inventory{Version: "1", Stores: []inventory.Entry{{Name: "profiles", Kind: qdrantstore.Kind, Locators: inventory.Locators{
		"collections": []string{"profiles"}, "subject_fields": []string{"customer_id"}, "tenant_field": "tenant",
	}}}}
	got, err := qdrantstore.New(client).Discover(context.Background(), inv, deletion.DiscoverOptions{Fields: []string{"customer_id"}})
	if err != nil {
		t.Fatal(err)
	}
	reason := "personal data patterns: " + pii.Email + "; not named by the locators of store profiles"
	want := []deletion.Uncovered{
		{Kind: "qdrant", Location: "profiles/by_customer.{id}.contact", Reason: reason, Count: 1, Fields: []string{"by_customer.{id}.contact"}},
		{Kind: "qdrant", Location: "profiles/messages[].from", Reason: reason, Count: 1, Fields: []string{"messages[].from"}},
		{Kind: "qdrant", Location: "profiles/user.email", Reason: reason, Count: 2, Fields: []string{"user.email"}},
	}
	if len(got) != len(want) {
		t.Fatalf("Discover = %+v, want %+v", got, want)
	}
	for i := range want {
		if !sameFinding(got[i], want[i]) {
			t.Errorf("Discover[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	assertNoValue(t, got)
}
