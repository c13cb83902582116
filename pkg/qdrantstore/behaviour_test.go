package qdrantstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// onQdrant is a store over the Qdrant of qdranttest.Connect (a real one when
// LETHE_TEST_QDRANT_ADDR is set) with the tenant's collection created empty.
func onQdrant(t *testing.T, tenant string) *env {
	t.Helper()
	client, srv := qdranttest.Connect(t)
	e := envOver(t, client, srv)
	qdranttest.Collection(t, e.client, collection(tenant))
	return e
}

// onEmulator is onQdrant on an emulator, for the tests using its hooks.
func onEmulator(t *testing.T, tenant string) *env {
	t.Helper()
	e := newEnv(t)
	e.store.PreconditionBackoff = time.Millisecond
	qdranttest.Collection(t, e.client, collection(tenant))
	return e
}

// tags scrolls the tenant's collection and returns every point's "tag" payload, sorted.
func (e *env) tags(t *testing.T, tenant string) []string {
	t.Helper()
	pts, err := e.client.Scroll(context.Background(), &qdrant.ScrollPoints{CollectionName: collection(tenant), Limit: qdrant.PtrOf(uint32(1000))})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pts {
		out = append(out, p.GetPayload()["tag"].GetStringValue())
	}
	slices.Sort(out)
	return out
}

func (e *env) erase(t *testing.T, s deletion.Subject) deletion.Result {
	t.Helper()
	res, err := e.store.Erase(context.Background(), e.inv, s)
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.store.Verify(context.Background(), e.inv, s)
	if err != nil || v.Remaining != 0 {
		t.Fatalf("Verify after Erase = %+v, %v", v, err)
	}
	return res
}

// TestIntegerIdentifiersMatchIntegerPayloads writes, with the official client, payloads
// holding the subject id as an integer, as a string and mixed, and erases by the id: every
// one of the subject's points goes, a subject whose id is another integer stays, and the
// same digits as a string in a field the inventory does not name stay. It runs without
// indexes and after EnsureIndexes, on collections of integer-only, string-only and mixed
// payloads.
func TestIntegerIdentifiersMatchIntegerPayloads(t *testing.T) {
	victim := deletiontest.NewSubject("acme", "424242")
	layouts := map[string][]map[string]any{
		"integers": {
			{"tag": "gone-int", "customer_id": 424242},
			{"tag": "gone-int-array", "customer_id": []any{1, 424242}},
			{"tag": "kept-other-int", "customer_id": 424243},
			{"tag": "kept-digits-elsewhere", "customer_id": 7, "order_id": "424242"},
		},
		"strings": {
			{"tag": "gone-string", "customer_id": "424242"},
			{"tag": "kept-other-string", "customer_id": "4242420"},
			{"tag": "kept-digits-elsewhere", "customer_id": "x", "order_id": "424242"},
		},
		"mixed": {
			{"tag": "gone-int", "customer_id": 424242},
			{"tag": "gone-string", "customer_id": "424242"},
			{"tag": "gone-mixed-array", "customer_id": []any{"a", 424242}},
			{"tag": "gone-session-int", "session_id": victim.Sessions[0]},
			{"tag": "kept-other-int", "customer_id": 424243},
			{"tag": "kept-zero-padded", "customer_id": "0424242"},
			{"tag": "kept-double-digits", "order_id": 424242},
		},
	}
	for name, payloads := range layouts {
		for _, indexed := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/no index", true: "/indexed"}[indexed], func(t *testing.T) {
				e := onQdrant(t, "acme")
				e.put(t, "acme", clone(payloads))
				if indexed {
					if err := e.store.EnsureIndexes(context.Background(), e.inv, "acme"); err != nil {
						t.Fatal(err)
					}
				}
				res := e.erase(t, victim)
				var wantGone, wantKept []string
				for _, p := range payloads {
					if tag := p["tag"].(string); strings.HasPrefix(tag, "gone") {
						wantGone = append(wantGone, tag)
					} else {
						wantKept = append(wantKept, tag)
					}
				}
				slices.Sort(wantKept)
				if got := e.tags(t, "acme"); !slices.Equal(got, wantKept) {
					t.Errorf("left %v, want %v", got, wantKept)
				}
				if res.Deleted() != int64(len(wantGone)) {
					t.Errorf("reported %d matched, want %d", res.Deleted(), len(wantGone))
				}
			})
		}
	}
}

func clone(ps []map[string]any) []map[string]any {
	out := make([]map[string]any, len(ps))
	for i, p := range ps {
		out[i] = map[string]any{}
		for k, v := range p {
			out[i][k] = v
		}
	}
	return out
}

func TestEnsureIndexesChoosesIntegerForIntegerFields(t *testing.T) {
	e := onQdrant(t, "acme")
	e.put(t, "acme", []map[string]any{{"customer_id": 1, "session_id": "s"}, {"customer_id": 2, "session_id": 3}})
	if err := e.store.EnsureIndexes(context.Background(), e.inv, "acme"); err != nil {
		t.Fatal(err)
	}
	info, err := e.client.GetCollectionInfo(context.Background(), collection("acme"))
	if err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]qdrant.PayloadSchemaType{
		"customer_id":   qdrant.PayloadSchemaType_Integer,
		"session_id":    qdrant.PayloadSchemaType_Keyword, // holds a string
		"customer_hash": qdrant.PayloadSchemaType_Keyword, // holds nothing
	} {
		if got := info.GetPayloadSchema()[f].GetDataType(); got != want {
			t.Errorf("%s indexed as %v, want %v", f, got, want)
		}
	}
}

// TestExistingIntegerIndexSurvivesEnsureIndexes: a customer's integer index on
// customer_id is kept (and reported), and erasure still finds integer-tagged points.
func TestExistingIntegerIndexSurvivesEnsureIndexes(t *testing.T) {
	ctx := context.Background()
	e := onQdrant(t, "acme")
	qdranttest.Index(t, e.client, collection("acme"), "customer_id", qdrant.FieldType_FieldTypeInteger, nil)
	qdranttest.Index(t, e.client, collection("acme"), "session_id", qdrant.FieldType_FieldTypeText, nil)
	e.put(t, "acme", []map[string]any{
		{"tag": "gone-int", "customer_id": 77},
		{"tag": "gone-string", "customer_id": "77"},
		{"tag": "gone-session", "session_id": "sess-77"},
		{"tag": "kept", "customer_id": 78, "session_id": "sess-78 sess-77-x"},
	})
	kept, err := e.store.EnsureIndexesReport(ctx, e.inv, "acme")
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(kept, func(a, b qdrantstore.KeptIndex) int { return strings.Compare(a.Field, b.Field) })
	want := []qdrantstore.KeptIndex{
		{Collection: collection("acme"), Field: "customer_id", Type: qdrant.PayloadSchemaType_Integer},
		{Collection: collection("acme"), Field: "session_id", Type: qdrant.PayloadSchemaType_Text},
	}
	if !slices.Equal(kept, want) {
		t.Errorf("kept = %v, want %v", kept, want)
	}
	info, err := e.client.GetCollectionInfo(ctx, collection("acme"))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.GetPayloadSchema()["customer_id"].GetDataType(); got != qdrant.PayloadSchemaType_Integer {
		t.Errorf("customer_id is now indexed as %v", got)
	}
	if got := info.GetPayloadSchema()["session_id"].GetDataType(); got != qdrant.PayloadSchemaType_Text {
		t.Errorf("session_id is now indexed as %v", got)
	}
	e.erase(t, deletiontest.NewSubject("acme", "77"))
	if got := e.tags(t, "acme"); !slices.Equal(got, []string{"kept"}) {
		t.Errorf("left %v, want only kept", got)
	}
}

func TestUUIDIdentifiersMatchEverySpelling(t *testing.T) {
	const u = "5c56c793-69f3-4fbf-87e6-c4bf54c28c26"
	for _, indexed := range []bool{false, true} {
		t.Run(map[bool]string{false: "no index", true: "uuid index"}[indexed], func(t *testing.T) {
			e := onQdrant(t, "acme")
			if indexed {
				qdranttest.Index(t, e.client, collection("acme"), "customer_id", qdrant.FieldType_FieldTypeUuid, nil)
			}
			e.put(t, "acme", []map[string]any{
				{"tag": "gone-lower", "customer_id": u},
				{"tag": "gone-upper", "customer_id": strings.ToUpper(u)},
				{"tag": "kept-other", "customer_id": "00000000-0000-4000-8000-000000000000"},
			})
			e.erase(t, deletiontest.NewSubject("acme", strings.ToUpper(u)))
			if got := e.tags(t, "acme"); !slices.Equal(got, []string{"kept-other"}) {
				t.Errorf("left %v", got)
			}
		})
	}
}

// TestDeferredPointsAreErased: points written just before the erasure, which a count
// does not see yet, are deleted all the same, and the verification after they become
// visible finds 0.
func TestDeferredPointsAreErased(t *testing.T) {
	ctx := context.Background()
	e := onEmulator(t, "acme")
	late, partly := deletiontest.NewSubject("acme", "late"), deletiontest.NewSubject("acme", "partly")
	bystander := deletiontest.NewSubject("acme", "bystander")
	kept := e.seed(t, bystander, 2)
	e.seed(t, partly, 1)
	e.srv.SetDeferredVisibility(true)
	e.seed(t, late, 2)
	e.seed(t, partly, 2)
	e.seed(t, bystander, 1)
	e.srv.SetDeferredVisibility(false)
	if v, err := e.store.Verify(ctx, e.inv, late); err != nil || v.Remaining != 0 {
		t.Fatalf("Verify before = %+v, %v: the deferred points should not be counted yet", v, err)
	}
	for _, s := range []deletion.Subject{late, partly} {
		if _, err := e.store.Erase(ctx, e.inv, s); err != nil {
			t.Fatal(err)
		}
	}
	e.srv.Reveal()
	for _, s := range []deletion.Subject{late, partly} {
		if v, err := e.store.Verify(ctx, e.inv, s); err != nil || v.Remaining != 0 {
			t.Errorf("Verify after the points became visible = %+v, %v; want 0", v, err)
		}
	}
	if n := e.countOf(t, bystander); n != kept+2 {
		t.Errorf("bystander: %d points, want %d", n, kept+2)
	}
}

func TestWriteNotCompletedIsTransient(t *testing.T) {
	ctx := context.Background()
	e := onEmulator(t, "acme")
	s := deletiontest.NewSubject("acme", "c1")
	e.seed(t, s, 2)
	for _, st := range []qdrant.UpdateStatus{qdrant.UpdateStatus_WaitTimeout, qdrant.UpdateStatus_Acknowledged, qdrant.UpdateStatus_ClockRejected} {
		e.srv.InjectFault(qdrantfake.Fault{Method: "Delete", Status: st, Times: 1})
		_, err := e.store.Erase(ctx, e.inv, s)
		if err == nil || retry.IsPermanent(err) || !strings.Contains(err.Error(), st.String()) {
			t.Errorf("%v: Erase = %v, want a transient error naming the status", st, err)
		}
	}
	if _, err := e.store.Erase(ctx, e.inv, s); err != nil {
		t.Errorf("Erase once the writes complete: %v", err)
	}
}

func TestFailedPreconditionIsRetriedThenTransient(t *testing.T) {
	ctx := context.Background()
	e := onEmulator(t, "acme")
	s := deletiontest.NewSubject("acme", "c1")
	e.seed(t, s, 2)
	fault := qdrantfake.Fault{Method: "Delete", Code: codes.FailedPrecondition, Message: "No target shard 0 found for update"}
	fault.Times = qdrantstore.DefaultPreconditionTries - 1
	e.srv.InjectFault(fault)
	before := e.srv.Calls("Delete")
	if _, err := e.store.Erase(ctx, e.inv, s); err != nil {
		t.Fatalf("Erase through %d FailedPrecondition answers: %v", fault.Times, err)
	}
	if got := e.srv.Calls("Delete") - before; got != qdrantstore.DefaultPreconditionTries {
		t.Errorf("sent %d deletes, want %d", got, qdrantstore.DefaultPreconditionTries)
	}
	if n := e.countOf(t, s); n != 0 {
		t.Errorf("%d points left", n)
	}
	fault.Times = 0
	e.srv.InjectFault(fault)
	before = e.srv.Calls("Delete")
	_, err := e.store.Erase(ctx, e.inv, s)
	if err == nil || retry.IsPermanent(err) {
		t.Errorf("Erase under a standing FailedPrecondition = %v, want a transient error", err)
	}
	if got := e.srv.Calls("Delete") - before; got != qdrantstore.DefaultPreconditionTries {
		t.Errorf("sent %d deletes under a standing fault, want the cap of %d", got, qdrantstore.DefaultPreconditionTries)
	}
}

func TestTenantScopeResolvesAliases(t *testing.T) {
	ctx := context.Background()
	e := onQdrant(t, "keep")
	tenant := deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}
	_ = e.client.DeleteAlias(ctx, collection("acme"))
	if ok, _ := e.client.CollectionExists(ctx, collection("acme")); ok {
		_ = e.client.DeleteCollection(ctx, collection("acme"))
	}
	qdranttest.Collection(t, e.client, "shopbot_acme_v2")
	if err := e.client.CreateAlias(ctx, collection("acme"), "shopbot_acme_v2"); err != nil {
		t.Fatal(err)
	}
	e.put(t, "acme", []map[string]any{{"customer_id": "a"}, {"customer_id": "b"}})
	e.put(t, "keep", []map[string]any{{"customer_id": "a"}})
	res, err := e.store.Erase(ctx, e.inv, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted() != 2 || res.Locations[0].Location != collection("acme") {
		t.Errorf("Erase = %+v, want 2 at %s", res, collection("acme"))
	}
	for _, name := range []string{collection("acme"), "shopbot_acme_v2"} {
		if ok, err := e.client.CollectionExists(ctx, name); ok || err != nil {
			t.Errorf("%s still exists: %v, %v", name, ok, err)
		}
	}
	if v, err := e.store.Verify(ctx, e.inv, tenant); err != nil || v.Remaining != 0 {
		t.Errorf("Verify = %+v, %v", v, err)
	}
	if n := e.count(t, "keep", nil); n != 1 {
		t.Errorf("other tenant: %d points, want 1", n)
	}
	if res, err := e.store.Erase(ctx, e.inv, tenant); err != nil || res.Deleted() != 0 {
		t.Errorf("second Erase = %+v, %v", res, err)
	}
}

func TestTenantScopeRefusesASharedAliasTarget(t *testing.T) {
	ctx := context.Background()
	e := onQdrant(t, "keep")
	qdranttest.Collection(t, e.client, "shopbot_shared")
	for _, a := range []string{collection("acme"), "shopbot_other_app"} {
		_ = e.client.DeleteAlias(ctx, a)
		if err := e.client.CreateAlias(ctx, a, "shopbot_shared"); err != nil {
			t.Fatal(err)
		}
	}
	e.put(t, "acme", []map[string]any{{"customer_id": "a"}})
	_, err := e.store.Erase(ctx, e.inv, deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant})
	if !retry.IsPermanent(err) || !strings.Contains(err.Error(), "shopbot_other_app") {
		t.Errorf("Erase = %v, want a permanent error naming the other alias", err)
	}
	if n := e.count(t, "acme", nil); n != 1 {
		t.Errorf("the shared collection lost points: %d left of 1", n)
	}
	for _, a := range []string{collection("acme"), "shopbot_other_app"} {
		_ = e.client.DeleteAlias(ctx, a)
	}
}

func TestKeyOutsideQdrantGrammarIsPermanent(t *testing.T) {
	e := onQdrant(t, "acme")
	s := deletiontest.NewSubject("acme", "c1")
	e.seed(t, s, 1)
	bad := e.inv
	bad.Locators = bad.Locators.With("subject_fields", []string{"customer id"})
	_, err := e.store.Erase(context.Background(), bad, s)
	if !retry.IsPermanent(err) {
		t.Errorf("Erase with a key Qdrant refuses = %v, want permanent", err)
	}
	if n := e.countOf(t, s); n != 2 {
		t.Errorf("%d of 2 points left", n)
	}
}
