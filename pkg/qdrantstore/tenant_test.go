package qdrantstore_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/edgediff"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// TestValidateTenantScoping: a collection is the tenant's own ({tenant} in its name) or
// the store names the payload field holding the tenant; anything else is refused with a
// permanent error naming the store and the collection.
func TestValidateTenantScoping(t *testing.T) {
	subj := []string{"customer_id"}
	for _, tc := range []struct {
		name     string
		locators inventory.Locators
		want     string // "" = valid
	}{
		{"per tenant", inventory.Locators{"collections": []string{"kb_{tenant}"}, "subject_fields": subj}, ""},
		{"shared with tenant field", inventory.Locators{"collections": []string{"kb"}, "subject_fields": subj, "tenant_field": "tenant_id"}, ""},
		{"nested tenant field", inventory.Locators{"collections": []string{"docs"}, "subject_fields": []string{"metadata.customer_id"}, "tenant_field": "metadata.tenant_id"}, ""},
		{"per subject with tenant field", inventory.Locators{"collections": []string{"mem_{subject}"}, "subject_fields": subj, "tenant_field": "tenant_id"}, ""},
		{"shared", inventory.Locators{"collections": []string{"kb"}, "subject_fields": subj},
			`store "q": locators.collections: collection "kb" names no {tenant} and the store has no tenant_field`},
		{"one of two shared", inventory.Locators{"collections": []string{"kb_{tenant}", "kb_archive"}, "subject_fields": subj},
			`collection "kb_archive" names no {tenant}`},
		{"per subject", inventory.Locators{"collections": []string{"mem_{subject}"}, "subject_fields": subj},
			`collection "mem_{subject}" names no {tenant}`},
		{"tenant field not a key", inventory.Locators{"collections": []string{"kb"}, "subject_fields": subj, "tenant_field": "tenant id"},
			"locators.tenant_field"},
		{"tenant field is the subject field", inventory.Locators{"collections": []string{"kb"}, "subject_fields": subj, "tenant_field": "customer_id"},
			`locators.tenant_field: "customer_id" is also one of subject_fields`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := qdrantstore.New(nil).Validate(inventory.Entry{Name: "q", Kind: qdrantstore.Kind, Locators: tc.locators})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate = %v, want a permanent error with %q", err, tc.want)
			}
		})
	}
}

// sharedColl is the collection every tenant of a sharedEnv writes to.
const sharedColl = "kb_shared"

// sharedEnv is one collection shared by tenants, each point carrying its tenant in
// tenant_id, and a store over it with that tenant field.
type sharedEnv struct {
	client *qdrant.Client
	store  *qdrantstore.Store
	inv    inventory.Entry
	next   atomic.Uint64
}

func newSharedEnv(t *testing.T, extra map[string]any) *sharedEnv {
	t.Helper()
	client, _ := qdranttest.Connect(t)
	return sharedEnvOver(t, client, extra)
}

// sharedEnvOver is newSharedEnv over client.
func sharedEnvOver(t *testing.T, client *qdrant.Client, extra map[string]any) *sharedEnv {
	t.Helper()
	qdranttest.Collection(t, client, sharedColl)
	l := inventory.Locators{
		"collections":    []string{sharedColl},
		"tenant_field":   "tenant_id",
		"subject_fields": []string{"customer_id"},
		"hash_fields":    []string{"customer_hash"},
		"session_fields": []string{"session_id"},
	}
	maps.Copy(l, extra)
	return &sharedEnv{client: client, store: qdrantstore.New(client), inv: inventory.Entry{Name: "kb", Kind: qdrantstore.Kind, Locators: l}}
}

// put upserts one point per payload, with the same vector for all.
func (e *sharedEnv) put(t *testing.T, payloads ...map[string]any) {
	t.Helper()
	var pts []*qdrant.PointStruct
	for _, p := range payloads {
		pts = append(pts, &qdrant.PointStruct{Id: qdrant.NewIDNum(e.next.Add(1)), Payload: qdrant.NewValueMap(p), Vectors: qdrant.NewVectors(0.1, 0.2, 0.3, 0.4)})
	}
	_, err := e.client.Upsert(context.Background(), &qdrant.UpsertPoints{CollectionName: sharedColl, Points: pts, Wait: qdrant.PtrOf(true)})
	if err != nil {
		t.Fatal(err)
	}
}

// seed writes n chunks of s (half with its hash) and n legacy chunks with its session only.
func (e *sharedEnv) seed(t *testing.T, s deletion.Subject, n int) int {
	t.Helper()
	var ps []map[string]any
	for i := range n {
		p := map[string]any{"tenant_id": s.Tenant, "customer_id": s.ID, "session_id": s.Sessions[0], "text": "chunk text"}
		if i%2 == 1 {
			p["customer_hash"] = s.Hash
		}
		ps = append(ps, p, map[string]any{"tenant_id": s.Tenant, "session_id": s.Sessions[0], "text": "chunk text"})
	}
	e.put(t, ps...)
	return 2 * n
}

// countOf counts s's chunks with a filter written here.
func (e *sharedEnv) countOf(t *testing.T, s deletion.Subject) int {
	t.Helper()
	f := &qdrant.Filter{
		Must: []*qdrant.Condition{qdrant.NewMatch("tenant_id", s.Tenant)},
		Should: []*qdrant.Condition{
			qdrant.NewMatch("customer_id", s.ID),
			qdrant.NewMatch("customer_hash", s.Hash),
			qdrant.NewMatchKeywords("session_id", s.Sessions...),
		},
	}
	n, err := e.client.Count(context.Background(), &qdrant.CountPoints{CollectionName: sharedColl, Filter: f, Exact: qdrant.PtrOf(true)})
	if status.Code(err) == codes.NotFound {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func (e *sharedEnv) fixture() deletiontest.Fixture {
	return deletiontest.Fixture{
		Impl:  e.store,
		Store: e.inv,
		Seed:  e.seed,
		Count: e.countOf,
		Down: func(t *testing.T) deletion.Store {
			c, err := qdrantstore.Dial(fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return qdrantstore.New(c)
		},
		NoMalformed: "Qdrant evaluates the filter on every payload itself: no point makes it fail",
	}
}

// TestCrossTenant: erasing a subject of acme, a batch mixing tenants, or the tenant acme
// never removes a point of globex or acme-eu whose ids and sessions equal acme's. Over the
// reference store (a collection per tenant on one Qdrant), and over one collection the
// tenants share, whose store names their tenant field: there the tenant erasure deletes
// acme's points and keeps the collection, with semantic read-back on (erasure one by one)
// and off (one delete per collection and tenant).
func TestCrossTenant(t *testing.T) {
	t.Run("collection per tenant", func(t *testing.T) {
		e := newEnv(t)
		deletiontest.CrossTenant(t, deletiontest.Fixture{Impl: e.store, Store: e.inv, Seed: e.seed, Count: e.countOf})
	})
	for _, similar := range []string{"report", "off"} {
		t.Run("shared collection similar="+similar, func(t *testing.T) {
			e := newSharedEnv(t, map[string]any{"similar": similar})
			deletiontest.CrossTenant(t, e.fixture())
			ok, err := e.client.CollectionExists(context.Background(), sharedColl)
			if err != nil || !ok {
				t.Errorf("the shared collection is gone after a tenant erasure (%v)", err)
			}
		})
	}
}

// TestConformanceSharedCollection runs the whole suite over the shared collection, on the
// emulator alone and with every call replayed on Qdrant's engine (edgediff).
func TestConformanceSharedCollection(t *testing.T) {
	oracle := edgediff.StartOracle(t)
	for _, against := range []bool{false, true} {
		t.Run(map[bool]string{false: "emulator", true: "edge"}[against], func(t *testing.T) {
			deletiontest.Run(t, func(t *testing.T) deletiontest.Fixture {
				var e *sharedEnv
				if against {
					client, _, _ := edgediff.ConnectWith(t, oracle)
					e = sharedEnvOver(t, client, nil)
				} else {
					e = newSharedEnv(t, nil)
				}
				if err := e.store.EnsureIndexes(context.Background(), e.inv, "acme"); err != nil {
					t.Fatal(err)
				}
				return e.fixture()
			})
		})
	}
}

// TestSharedCollectionReadBack: with similar and mentions set to erase, an erasure of
// acme's subject deletes acme's untagged copies and the acme points mentioning it, and no
// point of globex, though globex's points carry the same vector and mention the same id.
func TestSharedCollectionReadBack(t *testing.T) {
	ctx := context.Background()
	e := newSharedEnv(t, map[string]any{"similar": "erase", "text_fields": []string{"text"}, "mentions": "erase"})
	s := deletiontest.NewSubject("acme", "same-1")
	e.put(t,
		map[string]any{"tenant_id": "acme", "customer_id": "same-1", "text": "mine"}, // 1: the subject's
		map[string]any{"tenant_id": "acme", "text": "an untagged copy"},              // 2: acme's copy
		map[string]any{"tenant_id": "acme", "text": "note on same-1"},                // 3: acme's mention
		map[string]any{"tenant_id": "globex", "text": "an untagged copy"},            // 4
		map[string]any{"tenant_id": "globex", "text": "note on same-1"},              // 5
		map[string]any{"tenant_id": "globex", "customer_id": "same-1", "text": "x"},  // 6
	)
	if _, err := e.store.Erase(ctx, e.inv, s); err != nil {
		t.Fatal(err)
	}
	v, err := e.store.Verify(ctx, e.inv, s)
	if err != nil || !v.Clean() || len(v.Similar) != 0 || v.Mentions != 0 {
		t.Errorf("Verify = %+v, %v; want clean, no similar point and no mention", v, err)
	}
	pts, err := e.client.Scroll(ctx, &qdrant.ScrollPoints{CollectionName: sharedColl, Limit: qdrant.PtrOf(uint32(100))})
	if err != nil {
		t.Fatal(err)
	}
	var left []uint64
	for _, p := range pts {
		left = append(left, p.GetId().GetNum())
	}
	if fmt.Sprint(left) != "[4 5 6]" {
		t.Errorf("points left %v, want globex's [4 5 6]", left)
	}
}

// TestTenantEraseKeepsPointsWithoutTheTenant: a tenant erasure by tenant field deletes
// the points whose field is the tenant exactly, not those of a tenant whose id extends it,
// nor points without the field, nor the tenant written in another case.
func TestTenantEraseKeepsPointsWithoutTheTenant(t *testing.T) {
	ctx := context.Background()
	e := newSharedEnv(t, nil)
	e.put(t,
		map[string]any{"tenant_id": "acme", "customer_id": "a"},
		map[string]any{"tenant_id": []any{"acme"}, "customer_id": "b"},
		map[string]any{"tenant_id": "acme-eu", "customer_id": "a"},
		map[string]any{"tenant_id": "ACME", "customer_id": "a"},
		map[string]any{"customer_id": "a"},
	)
	tenant := deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}
	res, err := e.store.Erase(ctx, e.inv, tenant)
	if err != nil || res.Deleted() != 2 {
		t.Fatalf("tenant Erase = %+v, %v; want the 2 points of acme", res, err)
	}
	if v, err := e.store.Verify(ctx, e.inv, tenant); err != nil || !v.Clean() || v.Method != qdrantstore.MethodTenantFilter {
		t.Errorf("Verify = %+v, %v; want clean by tenant field", v, err)
	}
	n, err := e.client.Count(ctx, &qdrant.CountPoints{CollectionName: sharedColl, Exact: qdrant.PtrOf(true)})
	if err != nil || n != 3 {
		t.Errorf("%d points left, %v; want 3", n, err)
	}
}

// TestTenantFieldMatchesEveryFormOfTheTenant: the tenant field matches the tenant as an
// identifier matches (a decimal tenant id as a string and as an integer), exactly.
func TestTenantFieldMatchesEveryFormOfTheTenant(t *testing.T) {
	ctx := context.Background()
	e := newSharedEnv(t, nil)
	e.put(t,
		map[string]any{"tenant_id": "42", "customer_id": "a"},
		map[string]any{"tenant_id": 42, "customer_id": "a"},
		map[string]any{"tenant_id": "042", "customer_id": "a"},
		map[string]any{"tenant_id": 420, "customer_id": "a"},
	)
	s := deletion.Subject{Tenant: "42", ID: "a"}
	if res, err := e.store.Erase(ctx, e.inv, s); err != nil || res.Deleted() != 2 {
		t.Fatalf("Erase = %+v, %v; want the tenant's 2 points", res, err)
	}
	n, err := e.client.Count(ctx, &qdrant.CountPoints{CollectionName: sharedColl, Exact: qdrant.PtrOf(true)})
	if err != nil || n != 2 {
		t.Errorf("%d points left, %v; want the other tenants' 2", n, err)
	}
}
