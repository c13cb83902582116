package qdrantstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

var fieldPool = []string{"customer_id", "user-id", "metadata.customer_id", "tags[]", `"user id"`, "a[0].b", "ключ"}

func randomIdentifier(r *rand.Rand) string {
	switch r.IntN(8) {
	case 0:
		return ""
	case 1:
		return fmt.Sprint(r.Int64N(1 << 62))
	case 2:
		return fmt.Sprint(-r.Int64N(1000))
	case 3:
		return "0" + fmt.Sprint(r.IntN(1000))
	case 4:
		u := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", r.Uint32(), r.IntN(1<<16), r.IntN(1<<12), r.IntN(1<<12), r.Int64N(1<<48))
		if r.IntN(2) == 0 {
			return strings.ToUpper(u)
		}
		return u
	case 5:
		return "99999999999999999999" // beyond int64
	case 6:
		return "ü-" + fmt.Sprint(r.IntN(100))
	}
	return fmt.Sprintf("cust-%d", r.IntN(1e6))
}

func pick(r *rand.Rand, max int) []string {
	var out []string
	for range r.IntN(max + 1) {
		out = append(out, fieldPool[r.IntN(len(fieldPool))])
	}
	return out
}

// TestFiltersNeverHoldAnEmptyCondition builds the erasure filter of random inventories
// and identifiers: either there is nothing to match and the refusal is permanent, or the
// filter has conditions, every one of them set, naming only inventory fields and only the
// subject's identifiers.
func TestFiltersNeverHoldAnEmptyCondition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		l := Locators{SubjectFields: pick(r, 3), HashFields: pick(r, 2), SessionFields: pick(r, 2)}
		s := deletion.Subject{Tenant: "acme", ID: randomIdentifier(r), Hash: randomIdentifier(r)}
		for range r.IntN(4) {
			s.Sessions = append(s.Sessions, randomIdentifier(r))
		}
		f, err := subjectFilter(l, s)
		matchable := (s.ID != "" && len(l.SubjectFields) > 0) || (s.Hash != "" && len(l.HashFields) > 0) ||
			(strings.Join(s.Sessions, "") != "" && len(l.SessionFields) > 0)
		if !matchable {
			if !retry.IsPermanent(err) || f != nil {
				t.Fatalf("case %d: %+v %+v: got %v, %v; want a permanent refusal", i, l, s, f, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("case %d: %+v %+v: %v", i, l, s, err)
		}
		if len(f.GetShould()) == 0 || len(f.GetMust())+len(f.GetMustNot()) != 0 || f.GetMinShould() != nil {
			t.Fatalf("case %d: filter %v is not a plain should", i, f)
		}
		fields := strings.Join(append(append(append([]string{}, l.SubjectFields...), l.HashFields...), l.SessionFields...), "\x00")
		ids := append([]string{s.ID, s.Hash}, s.Sessions...)
		for _, c := range f.GetShould() {
			fc := c.GetField()
			if fc == nil {
				t.Fatalf("case %d: condition %v is not a field condition", i, c)
			}
			if !strings.Contains("\x00"+fields+"\x00", "\x00"+fc.GetKey()+"\x00") {
				t.Fatalf("case %d: condition on %q, a field the inventory does not name", i, fc.GetKey())
			}
			for _, v := range matchedValues(fc.GetMatch()) {
				if !fromIdentifiers(v, ids) {
					t.Fatalf("case %d: condition matches %q, which is none of the subject's identifiers %q", i, v, ids)
				}
			}
		}
	}
}

// matchedValues lists what a match condition matches, as strings; none for an empty one.
func matchedValues(m *qdrant.Match) []string {
	switch v := m.GetMatchValue().(type) {
	case *qdrant.Match_Keyword:
		return []string{v.Keyword}
	case *qdrant.Match_Keywords:
		return v.Keywords.GetStrings()
	case *qdrant.Match_Integer:
		return []string{fmt.Sprint(v.Integer)}
	case *qdrant.Match_Integers:
		var out []string
		for _, n := range v.Integers.GetIntegers() {
			out = append(out, fmt.Sprint(n))
		}
		return out
	}
	return []string{"\x00empty match"}
}

// fromIdentifiers reports whether v is one of ids, or a UUID spelling of one.
func fromIdentifiers(v string, ids []string) bool {
	for _, id := range ids {
		if id != "" && (v == id || strings.EqualFold(v, id)) {
			return true
		}
	}
	return false
}

// TestEmptyConditionMatchesAllAndIsRefused: a Condition with nothing set, or an empty
// nested filter, makes Qdrant (and the emulator) match every point; the store refuses to
// send such a filter at all.
func TestEmptyConditionMatchesAllAndIsRefused(t *testing.T) {
	ctx := context.Background()
	client, srv := qdranttest.Connect(t)
	qdranttest.Collection(t, client, "shopbot_acme")
	var pts []*qdrant.PointStruct
	for i := range 5 {
		pts = append(pts, &qdrant.PointStruct{Id: qdrant.NewIDNum(uint64(i + 1)), Vectors: qdrant.NewVectors(0.1, 0.2, 0.3, 0.4),
			Payload: qdrant.NewValueMap(map[string]any{"customer_id": fmt.Sprint("c", i)})})
	}
	if _, err := client.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: "shopbot_acme", Points: pts, Wait: qdrant.PtrOf(true)}); err != nil {
		t.Fatal(err)
	}
	st := New(client)
	inv, _ := inventory.Reference().Entry("qdrant")
	s := deletion.Subject{Tenant: "acme", ID: "c0", Scope: event.ScopeSubject}
	for name, f := range map[string]*qdrant.Filter{
		"empty condition":                  {Should: []*qdrant.Condition{{}}},
		"empty nested filter":              {Should: []*qdrant.Condition{qdrant.NewFilterAsCondition(&qdrant.Filter{})}},
		"empty condition beside a match":   {Should: []*qdrant.Condition{qdrant.NewMatch("customer_id", "c0"), {}}},
		"nested filter of empty condition": {Should: []*qdrant.Condition{qdrant.NewFilterAsCondition(&qdrant.Filter{Should: []*qdrant.Condition{{}}})}},
	} {
		if name != "empty condition beside a match" {
			n, err := client.Count(ctx, &qdrant.CountPoints{CollectionName: "shopbot_acme", Filter: f, Exact: qdrant.PtrOf(true)})
			if err != nil || n != 5 {
				t.Errorf("%s: Qdrant counts %d, %v; want all 5", name, n, err)
			}
		}
		var sent int
		if srv != nil {
			sent = srv.Calls("Delete") + srv.Calls("Count")
		}
		l, err := LocatorsOf(inv)
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.eraseFilter(ctx, inv, l, s, f)
		if !retry.IsPermanent(err) || !errors.Is(err, errMatchAll) {
			t.Errorf("%s: eraseFilter = %v, want the permanent match-all refusal", name, err)
		}
		if srv != nil && srv.Calls("Delete")+srv.Calls("Count") != sent {
			t.Errorf("%s: requests were sent before the refusal", name)
		}
	}
	if n, err := client.Count(ctx, &qdrant.CountPoints{CollectionName: "shopbot_acme", Exact: qdrant.PtrOf(true)}); err != nil || n != 5 {
		t.Errorf("%d points left of 5, %v", n, err)
	}
}

// TestBatchFilterStaysSmall: the filter of a batch matches every subject's identifiers
// with at most two conditions per field (keywords and integers), however many subjects.
func TestBatchFilterStaysSmall(t *testing.T) {
	l := Locators{SubjectFields: []string{"customer_id", "metadata.user"}, HashFields: []string{"customer_hash"}, SessionFields: []string{"session_id"}}
	var ss []deletion.Subject
	for i := range 128 {
		ss = append(ss, deletion.Subject{Tenant: "acme", ID: strconv.Itoa(424200 + i), Hash: fmt.Sprintf("h%03d", i), Sessions: []string{fmt.Sprintf("s%03d", i)}})
	}
	f, err := filterOf(l, "acme", ss)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.GetShould()); n > 2*4 {
		t.Errorf("batch of %d subjects: %d conditions, want at most 8", len(ss), n)
	}
	for _, s := range ss {
		one, err := subjectFilter(l, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range one.GetShould() {
			if !covered(f, c) {
				t.Fatalf("subject %s: condition %v is not covered by the batch filter", s.ID, c)
			}
		}
	}
}

// covered reports whether some condition of f matches on c's key every value c matches.
func covered(f *qdrant.Filter, c *qdrant.Condition) bool {
	values := func(c *qdrant.Condition) (key string, vs []string) {
		fc := c.GetField()
		m := fc.GetMatch()
		switch {
		case m.GetKeyword() != "":
			vs = []string{m.GetKeyword()}
		case m.GetKeywords() != nil:
			vs = m.GetKeywords().GetStrings()
		case m.GetIntegers() != nil:
			for _, n := range m.GetIntegers().GetIntegers() {
				vs = append(vs, "int:"+strconv.FormatInt(n, 10))
			}
		default:
			vs = []string{"int:" + strconv.FormatInt(m.GetInteger(), 10)}
		}
		return fc.GetKey(), vs
	}
	key, want := values(c)
	for _, b := range f.GetShould() {
		if k, have := values(b); k == key && !slices.ContainsFunc(want, func(v string) bool { return !slices.Contains(have, v) }) {
			return true
		}
	}
	return false
}
