package qdrantstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// mentionKB seeds a subject's tagged point, an untagged point whose page_content names
// the subject's id, one whose metadata.text names its session, one naming a longer id
// that contains the subject's, and an unrelated one; it returns their ids in that order
// after the first.
func mentionKB(t *testing.T, victim deletion.Subject) (*kb, []string) {
	k := newKB(t, 2, qdrant.Distance_Cosine)
	v := map[string][]float32{"": {1, 0}}
	k.add(map[string]any{"customer_id": victim.ID, "page_content": "own chunk"}, v)
	return k, []string{
		k.add(map[string]any{"page_content": "Ticket from " + victim.ID + ": refund; " + victim.ID + " again", "lang": "en"}, map[string][]float32{"": {0, 1}}),
		k.add(map[string]any{"page_content": "no id here", "metadata": map[string]any{"text": "session " + victim.Sessions[0] + ".", "source": "crm"}}, map[string][]float32{"": {0, 1}}),
		k.add(map[string]any{"page_content": "ticket of " + victim.ID + "7"}, map[string][]float32{"": {0, 1}}),
		k.add(map[string]any{"page_content": "unrelated"}, map[string][]float32{"": {0, 1}}),
	}
}

func mentionStore(policy string) inventory.Entry {
	extra := map[string]any{"text_fields": []string{"page_content", "metadata.text"}, "similar": "off"}
	if policy != "" {
		extra["mentions"] = policy
	}
	return kbStore(extra)
}

func (k *kb) payload(id string) map[string]*qdrant.Value {
	k.t.Helper()
	n, _ := strconv.ParseUint(id, 10, 64)
	pts, err := k.client.Get(context.Background(), &qdrant.GetPoints{CollectionName: kbColl, Ids: []*qdrant.PointId{qdrant.NewIDNum(n)}, WithPayload: qdrant.NewWithPayload(true)})
	if err != nil || len(pts) != 1 {
		k.t.Fatalf("get %s: %v %v", id, pts, err)
	}
	return pts[0].GetPayload()
}

func (k *kb) eraseVerify(inv inventory.Entry, s deletion.Subject) (deletion.Result, event.Verification) {
	k.t.Helper()
	ctx := context.Background()
	res, err := k.store.Erase(ctx, inv, s)
	if err != nil {
		k.t.Fatal(err)
	}
	v, err := k.store.Verify(ctx, inv, s)
	if err != nil {
		k.t.Fatal(err)
	}
	return res, v
}

// TestMentionsFailKeepsTheStoreUnclean: under the default policy the two mentioning
// points are counted, nothing else is, nothing is changed, and the store is not clean.
func TestMentionsFailKeepsTheStoreUnclean(t *testing.T) {
	victim := deletiontest.NewSubject("acme", "cust-55")
	k, ids := mentionKB(t, victim)
	res, v := k.eraseVerify(mentionStore(""), victim)
	if v.Mentions != 2 || v.Clean() || !strings.Contains(v.Method, qdrantstore.MethodMentions) {
		t.Errorf("Verify = %+v, want 2 mentions and not clean", v)
	}
	if deletion.StatusOf(res, v) != event.StatusFailed {
		t.Errorf("status %s, want FAILED", deletion.StatusOf(res, v))
	}
	for _, id := range ids {
		if !k.exists(id) {
			t.Errorf("point %s deleted under fail", id)
		}
	}
}

// TestMentionsEraseDeletesTheMentioningPoints: exactly the two mentioning points go.
func TestMentionsEraseDeletesTheMentioningPoints(t *testing.T) {
	victim := deletiontest.NewSubject("acme", "cust-56")
	k, ids := mentionKB(t, victim)
	res, v := k.eraseVerify(mentionStore("erase"), victim)
	if v.Mentions != 0 || !v.Clean() {
		t.Errorf("Verify = %+v, want clean", v)
	}
	for i, id := range ids {
		if want := i >= 2; k.exists(id) != want {
			t.Errorf("point %d exists %v, want %v", i, k.exists(id), want)
		}
	}
	if len(res.Locations) != 2 || res.Locations[1] != (event.LocationCount{Location: "kb_acme (mentions)", Deleted: 2}) {
		t.Errorf("locations %+v", res.Locations)
	}
}

// TestMentionsRedactRewritesOnlyTheIdentifier: the identifier is replaced in its field,
// every other key (top-level and nested) is kept, other points are untouched.
func TestMentionsRedactRewritesOnlyTheIdentifier(t *testing.T) {
	victim := deletiontest.NewSubject("acme", "cust-57")
	k, ids := mentionKB(t, victim)
	_, v := k.eraseVerify(mentionStore("redact"), victim)
	if v.Mentions != 0 || !v.Clean() {
		t.Errorf("Verify = %+v, want clean", v)
	}
	p := k.payload(ids[0])
	if got := p["page_content"].GetStringValue(); got != "Ticket from [redacted]: refund; [redacted] again" || p["lang"].GetStringValue() != "en" {
		t.Errorf("redacted payload %v", p)
	}
	md := k.payload(ids[1])["metadata"].GetStructValue().GetFields()
	if md["text"].GetStringValue() != "session [redacted]." || md["source"].GetStringValue() != "crm" || k.payload(ids[1])["page_content"].GetStringValue() != "no id here" {
		t.Errorf("redacted nested payload %v", md)
	}
	if got := k.payload(ids[2])["page_content"].GetStringValue(); got != "ticket of "+victim.ID+"7" {
		t.Errorf("a longer id was rewritten: %q", got)
	}
}

// TestMentionsUnderBatching: a batch redacts and erases mentions as Erase does, with the
// similar search off (the batch must not skip the mention handling).
func TestMentionsUnderBatching(t *testing.T) {
	for _, policy := range []string{"redact", "erase"} {
		t.Run(policy, func(t *testing.T) {
			victim := deletiontest.NewSubject("acme", "cust-59")
			other := deletiontest.NewSubject("acme", "cust-60")
			k, ids := mentionKB(t, victim)
			inv := mentionStore(policy)
			ctx := context.Background()
			res, errs := k.store.EraseBatch(ctx, inv, []deletion.Subject{victim, other})
			if errs[0] != nil || errs[1] != nil {
				t.Fatal(errs)
			}
			vs, errs := k.store.VerifyBatch(ctx, inv, []deletion.Subject{victim, other})
			if errs[0] != nil || !vs[0].Clean() || vs[0].Mentions != 0 {
				t.Fatalf("VerifyBatch = %+v, %v; want clean, the mentions handled", vs[0], errs[0])
			}
			if got := deletion.StatusOf(res[0], vs[0]); got != event.StatusDeleted {
				t.Errorf("status %s, want DELETED", got)
			}
			switch policy {
			case "redact":
				if got := k.payload(ids[0])["page_content"].GetStringValue(); strings.Contains(got, victim.ID+":") || !strings.Contains(got, "[redacted]") {
					t.Errorf("mention kept under batching: %q", got)
				}
			case "erase":
				if k.exists(ids[0]) || k.exists(ids[1]) || !k.exists(ids[2]) {
					t.Errorf("mentioning points left, or a longer id's point erased")
				}
			}
		})
	}
}

// TestMentionsThroughATextIndex: with a full-text index on page_content Qdrant matches by
// tokens; the store still counts only real occurrences.
func TestMentionsThroughATextIndex(t *testing.T) {
	victim := deletiontest.NewSubject("acme", "cust-58")
	k, _ := mentionKB(t, victim)
	qdranttest.Index(t, k.client, kbColl, "page_content", qdrant.FieldType_FieldTypeText, nil)
	_, v := k.eraseVerify(mentionStore(""), victim)
	if v.Mentions != 2 {
		t.Errorf("mentions %d through a text index, want 2", v.Mentions)
	}
}

func TestValidateReadBackLocators(t *testing.T) {
	for _, tc := range []struct {
		extra map[string]any
		want  string
	}{
		{map[string]any{"similar": "delete"}, "locators.similar"},
		{map[string]any{"similarity": -0.5}, "locators.similarity"},
		{map[string]any{"max_distance": 0.0}, "locators.max_distance"},
		{map[string]any{"mentions": "shred", "text_fields": []string{"t"}}, "locators.mentions"},
		{map[string]any{"mentions": "redact"}, "needs text_fields"},
		{map[string]any{"text_fields": []string{"chunks[].text"}}, "locators.text_fields"},
		{map[string]any{"vectors": []string{""}}, "locators.vectors"},
	} {
		err := qdrantstore.Validate(kbStore(tc.extra))
		if err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%v) = %v, want a permanent error naming %s", tc.extra, err, tc.want)
		}
	}
	ok := map[string]any{"similar": "erase", "similarity": 0.9, "max_distance": 0.3, "vectors": []string{"text"},
		"text_fields": []string{"page_content", "metadata.text"}, "mentions": "redact", "redaction": "[gone]"}
	if err := qdrantstore.Validate(kbStore(ok)); err != nil {
		t.Errorf("Validate(%v) = %v", ok, err)
	}
}
