package qdrantstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"reflect"
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
	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/edgediff"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// env is one emulator with a client and the store under test.
type env struct {
	srv    *qdrantfake.Server
	client *qdrant.Client
	store  *qdrantstore.Store
	inv    inventory.Entry
	nextID atomic.Uint64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	client, srv := qdranttest.Emulator(t)
	return envOver(t, client, srv)
}

func envOver(t *testing.T, client *qdrant.Client, srv *qdrantfake.Server) *env {
	t.Helper()
	inv, ok := inventory.Reference().Entry("qdrant")
	if !ok {
		t.Fatal("reference inventory has no qdrant store")
	}
	return &env{srv: srv, client: client, store: qdrantstore.New(client), inv: inv}
}

func collection(tenant string) string { return "shopbot_" + tenant }

// ensureCollection creates the tenant's collection (without indexes) if missing.
func (e *env) ensureCollection(t *testing.T, tenant string) {
	t.Helper()
	ctx := context.Background()
	ok, err := e.client.CollectionExists(ctx, collection(tenant))
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		return
	}
	err = e.client.CreateCollection(ctx, &qdrant.CreateCollection{
		CollectionName: collection(tenant),
		VectorsConfig:  qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 4, Distance: qdrant.Distance_Cosine}),
	})
	if err != nil {
		t.Fatal(err)
	}
}

func uuid() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// put upserts one chunk per payload into the tenant's collection, alternating numeric and
// UUID ids, in batches.
func (e *env) put(t *testing.T, tenant string, payloads []map[string]any) {
	t.Helper()
	e.ensureCollection(t, tenant)
	for len(payloads) > 0 {
		batch := payloads[:min(500, len(payloads))]
		payloads = payloads[len(batch):]
		pts := make([]*qdrant.PointStruct, 0, len(batch))
		for _, p := range batch {
			id := qdrant.NewIDNum(e.nextID.Add(1))
			if id.GetNum()%2 == 0 {
				id = qdrant.NewID(uuid())
			}
			p["text"] = "chunk text"
			pts = append(pts, &qdrant.PointStruct{Id: id, Payload: qdrant.NewValueMap(p), Vectors: qdrant.NewVectors(0.1, 0.2, 0.3, 0.4)})
		}
		_, err := e.client.Upsert(context.Background(), &qdrant.UpsertPoints{CollectionName: collection(tenant), Points: pts, Wait: qdrant.PtrOf(true)})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// seed writes n chunks tagged with the subject id (half with its hash too) and n legacy
// chunks carrying only its first session.
func (e *env) seed(t *testing.T, s deletion.Subject, n int) int {
	t.Helper()
	var ps []map[string]any
	for i := range n {
		p := map[string]any{"customer_id": s.ID, "session_id": s.Sessions[0]}
		if i%2 == 1 {
			p["customer_hash"] = s.Hash
		}
		ps = append(ps, p)
	}
	for range n {
		ps = append(ps, map[string]any{"session_id": s.Sessions[0]})
	}
	e.put(t, s.Tenant, ps)
	return 2 * n
}

// countOf counts the subject's chunks with a filter written here, not the store's.
func (e *env) countOf(t *testing.T, s deletion.Subject) int {
	t.Helper()
	f := &qdrant.Filter{Should: []*qdrant.Condition{
		qdrant.NewMatch("customer_id", s.ID),
		qdrant.NewMatch("customer_hash", s.Hash),
		qdrant.NewMatchKeywords("session_id", s.Sessions...),
	}}
	return e.count(t, s.Tenant, f)
}

func (e *env) count(t *testing.T, tenant string, f *qdrant.Filter) int {
	t.Helper()
	n, err := e.client.Count(context.Background(), &qdrant.CountPoints{CollectionName: collection(tenant), Filter: f, Exact: qdrant.PtrOf(true)})
	if status.Code(err) == codes.NotFound {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// TestConformance runs the shared suite with keyword indexes on the subject fields (the
// production setup) and without (the emulator scans), each on the emulator alone and on
// the emulator with every call replayed on Qdrant's engine (edgediff), which fails the
// run on any answer the two give differently.
func TestConformance(t *testing.T) {
	oracle := edgediff.StartOracle(t)
	for _, run := range []struct {
		name             string
		indexed, against bool
	}{{"indexed", true, false}, {"scan", false, false}, {"indexed-edge", true, true}, {"scan-edge", false, true}} {
		indexed := run.indexed
		t.Run(run.name, func(t *testing.T) {
			deletiontest.Run(t, func(t *testing.T) deletiontest.Fixture {
				var e *env
				if run.against {
					client, srv, _ := edgediff.ConnectWith(t, oracle)
					e = envOver(t, client, srv)
				} else {
					e = newEnv(t)
				}
				return deletiontest.Fixture{
					Impl:  e.store,
					Store: e.inv,
					Seed: func(t *testing.T, s deletion.Subject, n int) int {
						k := e.seed(t, s, n)
						if indexed {
							if err := e.store.EnsureIndexes(context.Background(), e.inv, s.Tenant); err != nil {
								t.Fatal(err)
							}
						}
						return k
					},
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
			})
		})
	}
}

func TestErasesEveryMatchWithoutPageCap(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	victim := deletiontest.NewSubject("acme", "big-footprint")
	var ps []map[string]any
	for i := range 2500 {
		ps = append(ps, map[string]any{"customer_id": victim.ID, "chunk": i})
	}
	for i := range 3000 {
		ps = append(ps, map[string]any{"customer_id": fmt.Sprintf("other-%d", i%50), "session_id": fmt.Sprintf("sess-other-%d", i%70)})
	}
	e.put(t, "acme", ps)
	if err := e.store.EnsureIndexes(ctx, e.inv, "acme"); err != nil {
		t.Fatal(err)
	}
	before := e.srv.PointsExamined()
	res, err := e.store.Erase(ctx, e.inv, victim)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted() != 2500 || len(res.Locations) != 1 || res.Locations[0].Location != "shopbot_acme" {
		t.Errorf("Erase = %+v, want 2500 deleted at shopbot_acme", res)
	}
	// Count, read the vectors, then delete, each reading only the indexed matches (the
	// vector read pages by 256 and looks one point past each page): no scan of the others.
	if got := e.srv.PointsExamined() - before; got > 3*2500+2500/256+1 {
		t.Errorf("erasure examined %d points: it scanned instead of using the indexes", got)
	}
	if n := e.countOf(t, victim); n != 0 {
		t.Errorf("%d of the subject's points remain", n)
	}
	if n := e.count(t, "acme", nil); n != 3000 {
		t.Errorf("%d unrelated points left of 3000", n)
	}
	v, err := e.store.Verify(ctx, e.inv, victim)
	if err != nil || v.Remaining != 0 || !strings.HasPrefix(v.Method, qdrantstore.MethodSubject) {
		t.Errorf("Verify = %+v, %v", v, err)
	}
}

func TestSessionArraysMatchAnyElement(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	victim := deletiontest.NewSubject("acme", "arr")
	e.put(t, "acme", []map[string]any{
		{"session_id": []any{"sess-someone", victim.Sessions[0], "sess-else"}},
		{"customer_id": []any{"x", victim.ID}},
		{"session_id": []any{"sess-someone", "sess-else"}, "customer_id": "x"},
		{"session_id": "sess-" + victim.ID + "-2"}, // a longer session id: not the victim's
	})
	v, err := e.store.Verify(ctx, e.inv, victim)
	if err != nil || v.Remaining != 2 {
		t.Fatalf("Verify before erase = %+v, %v; want 2 remaining", v, err)
	}
	res, err := e.store.Erase(ctx, e.inv, victim)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted() != 2 {
		t.Errorf("deleted %d, want the 2 points whose arrays hold the victim", res.Deleted())
	}
	if n := e.count(t, "acme", nil); n != 2 {
		t.Errorf("%d points left, want the 2 unrelated ones", n)
	}
}

func TestMissingCollectionIsNothingFound(t *testing.T) {
	e := newEnv(t)
	s := deletiontest.NewSubject("nowhere", "c1")
	res, err := e.store.Erase(context.Background(), e.inv, s)
	if err != nil || res.Deleted() != 0 || len(res.Locations) != 1 || res.Locations[0].Location != "shopbot_nowhere" {
		t.Errorf("Erase = %+v, %v", res, err)
	}
	v, err := e.store.Verify(context.Background(), e.inv, s)
	if err != nil || v.Remaining != 0 {
		t.Errorf("Verify = %+v, %v", v, err)
	}
	if err := e.store.EnsureIndexes(context.Background(), e.inv, "nowhere"); err != nil {
		t.Errorf("EnsureIndexes on a missing collection: %v", err)
	}
}

func TestTenantScopeDropsTheCollection(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seed(t, deletiontest.NewSubject("acme", "a1"), 3)
	e.seed(t, deletiontest.NewSubject("acme", "a2"), 2)
	keep := deletiontest.NewSubject("globex", "a1")
	kept := e.seed(t, keep, 2)
	tenant := deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}
	v, err := e.store.Verify(ctx, e.inv, tenant)
	if err != nil || v.Remaining != 10 || v.Method != qdrantstore.MethodTenant {
		t.Errorf("Verify before = %+v, %v", v, err)
	}
	res, err := e.store.Erase(ctx, e.inv, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted() != 10 || res.Locations[0].Location != "shopbot_acme" {
		t.Errorf("Erase = %+v, want 10 at shopbot_acme", res)
	}
	if ok, err := e.client.CollectionExists(ctx, "shopbot_acme"); ok || err != nil {
		t.Errorf("collection still exists: %v, %v", ok, err)
	}
	if v, err := e.store.Verify(ctx, e.inv, tenant); err != nil || v.Remaining != 0 {
		t.Errorf("Verify after = %+v, %v", v, err)
	}
	if res, err := e.store.Erase(ctx, e.inv, tenant); err != nil || res.Deleted() != 0 {
		t.Errorf("second Erase = %+v, %v", res, err)
	}
	if n := e.countOf(t, keep); n != kept {
		t.Errorf("other tenant: %d left of %d", n, kept)
	}
}

func TestEnsureIndexesIsIdempotent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.ensureCollection(t, "acme")
	for range 2 {
		if err := e.store.EnsureIndexes(ctx, e.inv, "acme"); err != nil {
			t.Fatal(err)
		}
	}
	info, err := e.client.GetCollectionInfo(ctx, "shopbot_acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"customer_id", "customer_hash", "session_id"} {
		if got := info.GetPayloadSchema()[f].GetDataType(); got != qdrant.PayloadSchemaType_Keyword {
			t.Errorf("%s indexed as %v, want keyword", f, got)
		}
	}
}

func TestSubjectWithoutIdentifiersIsRefused(t *testing.T) {
	e := newEnv(t)
	bystander := deletiontest.NewSubject("acme", "b")
	n := e.seed(t, bystander, 2)
	e.put(t, "acme", []map[string]any{{"customer_id": "", "session_id": ""}})
	empty := deletion.Subject{Tenant: "acme", Sessions: []string{""}}
	_, err := e.store.Erase(context.Background(), e.inv, empty)
	if !retry.IsPermanent(err) {
		t.Errorf("Erase of a subject with no identifiers: %v, want a permanent error", err)
	}
	if _, err := e.store.Verify(context.Background(), e.inv, empty); !retry.IsPermanent(err) {
		t.Errorf("Verify: %v, want a permanent error", err)
	}
	if got := e.count(t, "acme", nil); got != n+1 {
		t.Errorf("%d points left of %d", got, n+1)
	}
}

func TestErrorClasses(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := deletiontest.NewSubject("acme", "c1")
	e.seed(t, s, 1)

	// A field path Qdrant cannot parse is refused before anything is sent, permanently.
	bad := e.inv
	bad.Locators = bad.Locators.With("subject_fields", []string{"customer_id["})
	if _, err := e.store.Erase(ctx, bad, s); !retry.IsPermanent(err) || !strings.Contains(err.Error(), "locators.subject_fields") {
		t.Errorf("refused field: %v, want a permanent error naming locators.subject_fields", err)
	}
	// An unreachable server is transient, and the error names no identifier.
	e.srv.Close()
	_, err := e.store.Erase(ctx, e.inv, s)
	if err == nil || retry.IsPermanent(err) {
		t.Errorf("server down: %v, want a transient error", err)
	}
	if err != nil && (strings.Contains(err.Error(), s.ID) || strings.Contains(err.Error(), s.Sessions[0])) {
		t.Errorf("error names the subject: %v", err)
	}
	if _, err := e.store.Verify(ctx, e.inv, s); err == nil || retry.IsPermanent(err) {
		t.Errorf("Verify with server down: %v, want transient", err)
	}
}

// VerifyBatch proves a batch clean with one union count per collection, and never lets
// that shortcut hide a subject's remaining points: when something of the batch is still
// in a collection, each of its subjects is counted on its own, so the one whose points
// remain is not clean and the others are.
func TestVerifyBatchCountsEachSubjectWhereSomethingRemains(t *testing.T) {
	e := newEnv(t)
	e.inv.Locators = e.inv.Locators.With("similar", qdrantstore.SimilarOff) // with it, each subject's vectors are searched alone
	ctx := context.Background()
	e.ensureCollection(t, "acme")
	var batch []deletion.Subject
	for i := range 4 {
		s := deletiontest.NewSubject("acme", fmt.Sprintf("cust-%d", i))
		e.seed(t, s, 3)
		batch = append(batch, s)
	}
	for _, s := range batch[:3] {
		if _, err := e.store.Erase(ctx, e.inv, s); err != nil {
			t.Fatal(err)
		}
	}
	vs, errs := e.store.VerifyBatch(ctx, e.inv, batch)
	for i, v := range vs {
		if errs[i] != nil {
			t.Fatalf("subject %d: %v", i, errs[i])
		}
		if want := map[bool]int64{true: 6, false: 0}[i == 3]; v.Remaining != want {
			t.Errorf("subject %d: %d remaining, want %d", i, v.Remaining, want)
		}
	}
	if _, err := e.store.Erase(ctx, e.inv, batch[3]); err != nil {
		t.Fatal(err)
	}
	before := e.srv.Calls("Count")
	vs, errs = e.store.VerifyBatch(ctx, e.inv, batch)
	for i, v := range vs {
		one, err := e.store.Verify(ctx, e.inv, batch[i])
		if errs[i] != nil || err != nil || !v.Clean() || !reflect.DeepEqual(v, one) {
			t.Errorf("subject %d after every erase: VerifyBatch %+v (%v), Verify %+v (%v)", i, v, errs[i], one, err)
		}
	}
	// one union count for the batch, then one count per subject for the Verify calls above
	if n := e.srv.Calls("Count") - before; n != 1+len(batch) {
		t.Errorf("a clean batch and %d single verifications sent %d counts, want %d", len(batch), n, 1+len(batch))
	}
}
