package edgediff_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/edgediff"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
)

// deleterStores are the inventory shapes whose filters the deleter's scenarios exercise:
// flat fields over per-tenant collections, dotted fields under a tenant field in one
// shared collection, residual mentions redacted, and semantic read-back by exact search.
var deleterStores = []struct {
	name     string
	locators inventory.Locators
	// dotted: the fields sit under metadata, as LangChain writes them.
	dotted bool
	coll   func(tenant string) string
}{
	{"flat", inventory.Locators{
		"collections": []string{"kb_{tenant}"}, "subject_fields": []string{"customer_id"},
		"hash_fields": []string{"customer_hash"}, "session_fields": []string{"session_id"}, "similar": "off",
	}, false, func(tenant string) string { return "kb_" + tenant }},
	{"dotted", inventory.Locators{
		"collections": []string{"shared"}, "subject_fields": []string{"metadata.customer_id"},
		"hash_fields": []string{"metadata.customer_hash"}, "session_fields": []string{"metadata.session_id"},
		"tenant_field": "metadata.tenant", "similar": "off",
	}, true, func(string) string { return "shared" }},
	{"mentions", inventory.Locators{
		"collections": []string{"notes_{tenant}"}, "subject_fields": []string{"customer_id"},
		"session_fields": []string{"session_id"}, "similar": "off", "text_fields": []string{"page_content"}, "mentions": "redact",
	}, false, func(tenant string) string { return "notes_" + tenant }},
	{"semantic", inventory.Locators{
		"collections": []string{"mem_{tenant}"}, "subject_fields": []string{"user_id"},
		"session_fields": []string{"run_id"}, "similar": "report", "similar_search": "exact", "similarity": 0.95,
	}, false, func(tenant string) string { return "mem_" + tenant }},
}

// subjects of the scenarios: a plain id, a decimal-integer id, a UUID id in capitals,
// and their bystanders of the same and another tenant.
func deleterSubjects() []deletion.Subject {
	return []deletion.Subject{
		deletiontest.NewSubject("acme", "cust-1"),
		deletiontest.NewSubject("acme", "424242"),
		deletiontest.NewSubject("acme", "5F0E8A1C-3B2D-4C1E-9A7F-0123456789AB"),
		deletiontest.NewSubject("acme", "cust-2"),
		deletiontest.NewSubject("globex", "cust-1"),
		deletiontest.NewSubject("globex", "424242"),
	}
}

// spellings are the forms an identifier is stored in by writers: as sent, as an integer
// when it is one (and as an integral double), in other UUID spellings, inside an array.
func spellings(id string) []any {
	out := []any{id, []any{"other", id}}
	var n int64
	if _, err := fmt.Sscan(id, &n); err == nil && fmt.Sprint(n) == id {
		out = append(out, n, float64(n), []any{n})
	}
	if len(id) == 36 && strings.Count(id, "-") == 4 {
		l := strings.ToLower(id)
		out = append(out, l, strings.ToUpper(id), "{"+l+"}", strings.ReplaceAll(l, "-", ""), "urn:uuid:"+l)
	}
	return out
}

// chunks are the points the scenarios erase from: per subject, one point per spelling of
// its id in the subject field, one with its hash, one legacy chunk with only its session;
// vectors of a per-subject direction, so semantic read-back has near-duplicates to find.
func chunks(dotted bool, ss []deletion.Subject) map[string][]*qdrant.PointStruct {
	byTenant := map[string][]*qdrant.PointStruct{}
	n := uint64(0)
	for si, s := range ss {
		var ps []map[string]any
		for _, v := range spellings(s.ID) {
			ps = append(ps, map[string]any{"customer_id": v, "user_id": v})
		}
		ps = append(ps, map[string]any{"customer_hash": s.Hash}, map[string]any{"session_id": s.Sessions[0], "run_id": s.Sessions[0]},
			map[string]any{"customer_id": nil, "session_id": []any{s.Sessions[0], "sess-other"}}, map[string]any{"page_content": "no identifier"},
			map[string]any{"page_content": "ticket of " + s.ID + ", see " + s.Sessions[0] + "."}, map[string]any{"page_content": []any{"x" + s.ID, strings.ToUpper(s.ID)}})
		for pi, p := range ps {
			n++
			payload := p
			if dotted {
				payload = map[string]any{"metadata": p}
				if pi%4 == 0 {
					payload = map[string]any{"metadata": []any{p}} // an array of objects: keys do not reach into it
				}
				p["tenant"] = s.Tenant
			}
			id := qdrant.NewIDNum(n)
			if n%2 == 0 {
				id = qdrant.NewID(fmt.Sprintf("00000000-0000-4000-8000-%012d", n))
			}
			v := []float32{float32(si + 1), float32(pi%3) * 0.01, 1, float32(si % 2)}
			byTenant[s.Tenant] = append(byTenant[s.Tenant], &qdrant.PointStruct{Id: id, Vectors: qdrant.NewVectors(v...), Payload: qdrant.NewValueMap(payload)})
		}
	}
	return byTenant
}

// TestDeleterFiltersAgree drives the deleter (Erase, EraseBatch, Verify, VerifyBatch,
// tenant-scope erasure, EnsureIndexes) through a client whose every call is replayed on Qdrant's
// engine, so the filters compared are those the deleter sends: single subjects and
// batches, legacy session-only chunks, integer and UUID identifiers, dotted fields, a
// tenant field, residual mentions' text matches, and semantic read-back's exact searches. Each store runs without payload
// indexes and with the ones EnsureIndexes creates.
func TestDeleterFiltersAgree(t *testing.T) {
	ctx := context.Background()
	oracle := edgediff.StartOracle(t)
	for _, st := range deleterStores {
		for _, indexed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/indexed=%v", st.name, indexed), func(t *testing.T) {
				c, _, m := edgediff.ConnectWith(t, oracle)
				inv := inventory.Entry{Name: st.name, Kind: qdrantstore.Kind, Locators: st.locators}
				store := qdrantstore.New(c)
				ss := deleterSubjects()
				for tenant, pts := range chunks(st.dotted, ss) {
					coll := st.coll(tenant)
					if ok, _ := c.CollectionExists(ctx, coll); !ok {
						create(t, c, coll, qdrant.Distance_Cosine, 4)
					}
					upsert(t, c, coll, pts)
					if indexed {
						if err := store.EnsureIndexes(ctx, inv, tenant); err != nil {
							t.Fatal(err)
						}
					}
				}
				// One subject alone, two in a batch, verification of all, then the tenant.
				if _, err := store.Erase(ctx, inv, ss[0]); err != nil {
					t.Fatal(err)
				}
				if _, errs := store.EraseBatch(ctx, inv, ss[1:3]); errs[0] != nil || errs[1] != nil {
					t.Fatal(errs)
				}
				for i, s := range ss {
					v, err := store.Verify(ctx, inv, s)
					if err != nil {
						t.Fatal(err)
					}
					erased := i < 3
					if erased && v.Remaining != 0 || !erased && v.Remaining == 0 {
						t.Errorf("%s/%s: %d remaining after erasing %v", s.Tenant, s.ID, v.Remaining, erased)
					}
					// The subject's untagged chunks share its direction: the search finds them.
					if erased && st.locators["similar"] == "report" && len(v.Similar) == 0 {
						t.Errorf("%s/%s: no similar point found", s.Tenant, s.ID)
					}
				}
				vs, errs := store.VerifyBatch(ctx, inv, ss)
				for i := range ss {
					if errs[i] != nil || (vs[i].Remaining == 0) != (i < 3) {
						t.Errorf("VerifyBatch %s/%s: %+v, %v", ss[i].Tenant, ss[i].ID, vs[i], errs[i])
					}
				}
				if st.locators["tenant_field"] != nil {
					tenant := deletion.Subject{Tenant: "globex", Scope: event.ScopeTenant}
					if _, err := store.Erase(ctx, inv, tenant); err != nil {
						t.Fatal(err)
					}
					if _, err := store.Verify(ctx, inv, tenant); err != nil {
						t.Fatal(err)
					}
				}
				got := m.Compared()
				t.Logf("reads compared: %v", got)
				if got["/qdrant.Points/Count"] == 0 {
					t.Error("no count compared")
				}
				if st.locators["similar"] == "report" && got["/qdrant.Points/QueryBatch"] == 0 {
					t.Error("no semantic search compared")
				}
			})
		}
	}
}
