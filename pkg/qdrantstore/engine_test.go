package qdrantstore_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
)

// The tests of this file pin what each difference the emulator showed against Qdrant's
// engine (pkg/qdrantfake/edgediff) does to an erasure.

// releaseKB is a kb on an emulator following release r.
func releaseKB(t *testing.T, r qdrantfake.Release) *kb {
	t.Helper()
	client, srv := qdranttest.Emulator(t)
	srv.SetRelease(r)
	if err := client.CreateCollection(context.Background(), &qdrant.CreateCollection{
		CollectionName: kbColl, VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 2, Distance: qdrant.Distance_Cosine}),
	}); err != nil {
		t.Fatal(err)
	}
	return &kb{t: t, client: client, store: qdrantstore.New(client)}
}

// TestMentionsOfAnIdentifierWithoutLettersOrDigits: a session id such as "--" has no
// token, so Qdrant's match text finds no mention of it through a text index, or from
// 1.20 without one; only 1.17 to 1.19 without an index find it, as a substring. The
// emulator used to match every string for such a query, so its tests found the mention
// that Qdrant misses, and a store holding it would have been verified clean. Verify
// reports the identifier unexamined wherever it runs, so the store is never clean.
func TestMentionsOfAnIdentifierWithoutLettersOrDigits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		release   qdrantfake.Release
		indexed   bool
		mentioned int64 // what the mention search finds
	}{
		{"1.17 without an index", qdrantfake.Release117, false, 1},
		{"1.17 with a text index", qdrantfake.Release117, true, 0},
		{"1.20 without an index", qdrantfake.Release120, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := releaseKB(t, tc.release)
			victim := deletion.Subject{Tenant: "acme", ID: "cust-77", Hash: "h77", Sessions: []string{"--"}, Scope: event.ScopeSubject}
			k.add(map[string]any{"customer_id": victim.ID, "page_content": "own chunk"}, map[string][]float32{"": {1, 0}})
			k.add(map[string]any{"page_content": "call ref -- noted"}, map[string][]float32{"": {0, 1}})
			if tc.indexed {
				qdranttest.Index(t, k.client, kbColl, "page_content", qdrant.FieldType_FieldTypeText, nil)
			}
			_, v := k.eraseVerify(mentionStore(""), victim)
			if v.Mentions != tc.mentioned || v.Unexamined != 1 || v.Clean() {
				t.Errorf("Verify = %+v, want %d mentions, 1 unexamined, not clean", v, tc.mentioned)
			}
			if len(v.UnexaminedItems) != 1 || strings.Contains(v.UnexaminedItems[0], "--") {
				t.Errorf("unexamined items %q: want one, naming no identifier", v.UnexaminedItems)
			}
			vs, errs := k.store.VerifyBatch(context.Background(), mentionStore(""), []deletion.Subject{victim, deletiontest.NewSubject("acme", "cust-78")})
			if errs[0] != nil || vs[0].Unexamined != 1 {
				t.Errorf("VerifyBatch = %+v, %v; want the identifier unexamined", vs[0], errs[0])
			}
		})
	}
}

// TestUUIDIdentifierOnAnIntegerIndexedField: Qdrant's integer (or float) index serves a
// keyword match of a UUID as the UUID's number, so a filter of one keyword finds no point
// holding the UUID as a string. Lethe matches a UUID in several spellings at once
// (match-any), which the index does not serve, so the payload is checked and every point
// is found. The emulator used to check the payload for the single keyword as well, which
// hid that one spelling alone would leave the subject's points behind.
func TestUUIDIdentifierOnAnIntegerIndexedField(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	const id = "5f0e8a1c-3b2d-4c1e-9a7f-0123456789ab"
	victim := deletiontest.NewSubject("acme", id)
	e.put(t, "acme", []map[string]any{{"customer_id": int64(7)}, {"customer_id": id}, {"customer_id": id}, {"customer_id": []any{id, int64(8)}}})
	qdranttest.Index(t, e.client, collection("acme"), "customer_id", qdrant.FieldType_FieldTypeInteger, nil)
	one := &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchKeyword("customer_id", id)}}
	if n := e.count(t, "acme", one); n != 0 {
		t.Fatalf("one keyword on the integer index counts %d, want 0 (served as a number)", n)
	}
	res, err := e.store.Erase(ctx, e.inv, victim)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Locations) != 1 || res.Locations[0].Deleted != 3 {
		t.Errorf("Erase = %+v, want 3 matched", res)
	}
	v, err := e.store.Verify(ctx, e.inv, victim)
	if err != nil || !v.Clean() {
		t.Errorf("Verify = %+v, %v; want clean", v, err)
	}
	any := &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchKeywords("customer_id", id, strings.ToUpper(id))}}
	if n := e.count(t, "acme", any); n != 0 {
		t.Errorf("%d of the subject's points left", n)
	}
	if n := e.count(t, "acme", nil); n != 1 {
		t.Errorf("%d points left, want the bystander's", n)
	}
}

// TestErasureIsTheSameOnEveryRelease: the releases differ on is_null over arrays and on
// full-text matches without a text index, neither of which an erasure filter holds; the
// mention search's text matches differ in candidates, which Lethe confirms itself. So an
// erasure with mentions, over payloads of arrays, nulls and texts, deletes and reports
// the same on 1.17 and on 1.20.
func TestErasureIsTheSameOnEveryRelease(t *testing.T) {
	type outcome struct {
		res deletion.Result
		v   event.Verification
		ids []string
	}
	run := func(r qdrantfake.Release) outcome {
		k := releaseKB(t, r)
		victim := deletiontest.NewSubject("acme", "cust-42")
		for _, p := range []map[string]any{
			{"customer_id": "cust-42", "page_content": "own chunk"},
			{"customer_id": []any{nil, "cust-42"}},
			{"customer_id": []any{nil}, "session_id": victim.Sessions[0]},
			{"customer_id": nil, "page_content": "see cust-42."},
			{"page_content": "xcust-42y and CUST-42"},
			{"page_content": []any{"notes", "cust 42"}},
			{"page_content": "cust-420"},
		} {
			k.add(p, map[string][]float32{"": {1, 0}})
		}
		res, v := k.eraseVerify(mentionStore(""), victim)
		pts, err := k.client.Scroll(context.Background(), &qdrant.ScrollPoints{CollectionName: kbColl, Limit: qdrant.PtrOf(uint32(100))})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range pts {
			ids = append(ids, p.GetId().String())
		}
		return outcome{res, v, ids}
	}
	old, now := run(qdrantfake.Release117), run(qdrantfake.Release120)
	if !reflect.DeepEqual(old, now) {
		t.Errorf("1.17: %+v\n1.20: %+v", old, now)
	}
	if old.v.Mentions != 1 || old.res.Locations[0].Deleted != 3 || len(old.ids) != 4 {
		t.Errorf("got %+v, want 3 erased, 1 mention, 4 points left", old)
	}
}
