package qdrantfake_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
)

// releaseCase is one filter and the ids each release answers with it.
type releaseCase struct {
	name string
	f    *qdrant.Filter
	r117 string
	r120 string
}

func checkReleases(t *testing.T, c *qdrant.Client, srv *qdrantfake.Server, coll string, cases []releaseCase) {
	t.Helper()
	for _, r := range []qdrantfake.Release{qdrantfake.Release117, qdrantfake.Release120} {
		srv.SetRelease(r)
		for _, tc := range cases {
			want := strings.Fields(tc.r117)
			if r == qdrantfake.Release120 {
				want = strings.Fields(tc.r120)
			}
			if got := scrollAll(t, c, coll, tc.f); !slices.Equal(got, want) {
				t.Errorf("release %d, %s: %v, want %v", r, tc.name, got, want)
			}
		}
	}
}

// TestIsNullOnArraysByRelease: without a payload index, is_null on an array holding a
// null is false up to 1.19 and true from 1.20 (as the null index answers it in both).
func TestIsNullOnArraysByRelease(t *testing.T) {
	c, srv := qdranttest.Emulator(t)
	seed(t, c, "nulls", "v", []any{nil}, nil, "x", []any{}, missing, []any{"a", nil})
	upsert(t, c, "nulls", pt(qdrant.NewIDNum(7), map[string]any{"o": []any{map[string]any{"v": []any{nil}}}}))
	checkReleases(t, c, srv, "nulls", []releaseCase{
		{name: "is_null", f: must(qdrant.NewIsNull("v")), r117: "2", r120: "1 2 6"},
		{name: "is_null in nested", f: must(qdrant.NewNestedFilter("o", must(qdrant.NewIsNull("v")))), r117: "", r120: "7"},
		{name: "is_empty", f: must(qdrant.NewIsEmpty("v")), r117: "2 4 5 7", r120: "2 4 5 7"},
	})
}

// TestUnindexedTextByRelease: without a text index, full-text matches are case-sensitive
// substrings up to 1.19 and tokens of the default text index (word tokenizer, lowercased,
// phrases in order) from 1.20.
func TestUnindexedTextByRelease(t *testing.T) {
	c, srv := qdranttest.Emulator(t)
	seed(t, c, "texts", "body", "Alice Smith", "Malice aforethought", "alice-in-chains", []any{"x", "Alice"}, 42, "smith, alice", "xcust-42y", "cust 42")
	checkReleases(t, c, srv, "texts", []releaseCase{
		{name: "text ice", f: must(qdrant.NewMatchText("body", "ice")), r117: "1 2 3 4 6", r120: ""},
		{name: "text alice", f: must(qdrant.NewMatchText("body", "alice")), r117: "2 3 6", r120: "1 3 4 6"},
		{name: "text every token", f: must(qdrant.NewMatchText("body", "Alice Smith")), r117: "1", r120: "1 6"},
		{name: "text_any", f: must(qdrant.NewMatchTextAny("body", "smith chains")), r117: "3 6", r120: "1 3 6"},
		{name: "phrase in order", f: must(qdrant.NewMatchPhrase("body", "alice smith")), r117: "", r120: "1"},
		{name: "an identifier inside a word", f: must(qdrant.NewMatchText("body", "cust-42")), r117: "7", r120: "8"},
	})
}

// TestTextQueryWithoutTokens: a full-text query without a letter or digit has no token,
// and through a text index (or without one from 1.20) it matches nothing.
func TestTextQueryWithoutTokens(t *testing.T) {
	c, srv := qdranttest.Emulator(t)
	seed(t, c, "marks", "body", "x -- y", "--", "a b")
	checkReleases(t, c, srv, "marks", []releaseCase{
		{name: "text", f: must(qdrant.NewMatchText("body", "--")), r117: "1 2", r120: ""},
		{name: "text_any", f: must(qdrant.NewMatchTextAny("body", "-- ;")), r117: "1 2", r120: ""},
	})
	srv.SetRelease(qdrantfake.Release117)
	runIndexed(t, c, "marks", "body", qdrant.FieldType_FieldTypeText, nil, []indexCase{
		{"text", must(qdrant.NewMatchText("body", "--")), "1 2", ""},
	})
}

// TestUUIDKeywordOnANumericIndex: a keyword match whose value parses as a UUID, on a key
// with an integer or float index, is served by the index as the UUID's number: it finds
// no point holding the string, only one holding that number (what qdrant-edge-py 0.9.0
// answers); under must_not, or in a should beside a condition no index serves, the
// payload is checked and the string matches.
func TestUUIDKeywordOnANumericIndex(t *testing.T) {
	const u = "ffffffff-0000-4000-8000-000000000001"
	low := int64(-0x7fffffffffffffff) // the low 64 bits of u, 0x8000000000000001, as an i64
	for _, ft := range []qdrant.FieldType{qdrant.FieldType_FieldTypeInteger, qdrant.FieldType_FieldTypeFloat} {
		t.Run(ft.String(), func(t *testing.T) {
			c := connect(t)
			seed(t, c, "ids", "owner", u, strings.ToUpper(u), "abc", low, 7)
			byNumber, inShould, besideID := "4", "4 5", "3 4"
			if ft == qdrant.FieldType_FieldTypeFloat {
				// The u128 as an f64 is no i64; and no float index serves the integer
				// match beside it, so the should is checked on the payload.
				byNumber, inShould, besideID = "", "1 5", "3"
			}
			runIndexed(t, c, "ids", "owner", ft, nil, []indexCase{
				{"keyword uuid", must(qdrant.NewMatchKeyword("owner", u)), "1", byNumber},
				{"keyword uuid in should", &qdrant.Filter{Should: []*qdrant.Condition{qdrant.NewMatchKeyword("owner", u), qdrant.NewMatchInt("owner", 7)}}, "1 5", inShould},
				{"keyword uuid beside has_id", &qdrant.Filter{Should: []*qdrant.Condition{qdrant.NewMatchKeyword("owner", u), qdrant.NewHasID(qdrant.NewIDNum(3))}}, "1 3", besideID},
				{"keyword uuid under must_not", &qdrant.Filter{MustNot: []*qdrant.Condition{qdrant.NewMatchKeyword("owner", u)}}, "2 3 4 5", "2 3 4 5"},
				{"any of its spellings", must(qdrant.NewMatchKeywords("owner", u, strings.ToUpper(u))), "1 2", "1 2"},
				{"a keyword that is no uuid", must(qdrant.NewMatchKeyword("owner", "abc")), "3", "3"},
			})
		})
	}
}

// TestNestedIsEmptyThroughAnIndex: in a nested condition, is_empty on a field that an
// index on key[].field covers is answered by that index for the whole point (no value
// of key[].field but nulls and empty arrays) where the planner reads the clause from the
// indexes, and object by object where it checks points one by one (under a must_not,
// beside a condition no index serves); other conditions stay per object (what
// qdrant-edge-py 0.9.0 answers).
func TestNestedIsEmptyThroughAnIndex(t *testing.T) {
	c, srv := qdranttest.Emulator(t)
	srv.SetRelease(qdrantfake.Release120) // is_null on [null], case 8, is 1.20's
	obj := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	seed(t, c, "nested", "items",
		[]any{obj("k", nil)}, []any{obj("k", int64(4))}, []any{obj("k", nil), obj("k", int64(4))},
		[]any{obj("k", "a"), obj("k", nil)}, []any{obj()}, []any{obj("k", []any{})}, []any{obj("k", "a")},
		[]any{obj("k", []any{nil})}, []any{obj("k", "a"), obj()}, []any{obj("n", int64(1)), obj("k", "b")})
	nested := func(c *qdrant.Condition) *qdrant.Filter { return must(qdrant.NewNestedFilter("items", must(c))) }
	byObject := "1 3 4 5 6 9 10"
	runIndexed(t, c, "nested", "items[].k", qdrant.FieldType_FieldTypeKeyword, nil, []indexCase{
		{"is_empty", nested(qdrant.NewIsEmpty("k")), byObject, "1 5 6"},
		{"is_empty alone in a should", &qdrant.Filter{Should: []*qdrant.Condition{qdrant.NewNestedFilter("items", &qdrant.Filter{Should: []*qdrant.Condition{qdrant.NewIsEmpty("k")}})}}, byObject, "1 5 6"},
		{"is_empty under must_not", &qdrant.Filter{MustNot: []*qdrant.Condition{qdrant.NewNestedFilter("items", must(qdrant.NewIsEmpty("k")))}}, "2 7 8", "2 7 8"},
		{"is_empty beside an unindexed condition", must(qdrant.NewNestedFilter("items", &qdrant.Filter{Should: []*qdrant.Condition{qdrant.NewIsEmpty("k"), qdrant.NewMatchInt("n", 1)}})), byObject, byObject},
		{"nested beside an unindexed condition", &qdrant.Filter{Should: []*qdrant.Condition{qdrant.NewNestedFilter("items", must(qdrant.NewIsEmpty("k"))), qdrant.NewMatchKeyword("zz", "x")}}, byObject, byObject},
		{"is_null", nested(qdrant.NewIsNull("k")), "1 3 4 8", "1 3 4 8"},
		{"keyword", nested(qdrant.NewMatchKeyword("k", "a")), "4 7 9", "4 7 9"},
		{"except", nested(qdrant.NewMatchExcept("k", "a")), "2 3 10", "2 3 10"},
	})
}
