package qdrantfake_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/qdrant/go-client/qdrant"
)

const uuid5 = "5c56c793-69f3-4fbf-87e6-c4bf54c28c26"

func seedCities(t *testing.T, c *qdrant.Client) {
	createCollection(t, c, "cities")
	upsert(t, c, "cities",
		pt(qdrant.NewIDNum(1), map[string]any{"city": "London", "color": "green", "n": 1, "tags": []any{"a", "b"}, "ok": true, "meta": map[string]any{"lang": "en"}}),
		pt(qdrant.NewIDNum(2), map[string]any{"city": "London", "color": "red", "n": 2, "tags": []any{"c"}, "ok": false}),
		pt(qdrant.NewIDNum(3), map[string]any{"city": "Berlin", "color": "red", "n": 3, "tags": []any{}}),
		pt(qdrant.NewIDNum(4), map[string]any{"city": "Moscow", "color": "blue", "n": 4.5, "tags": []any{"a", 7}}),
		pt(qdrant.NewID(strings.ToUpper(uuid5)), map[string]any{"city": nil, "color": []any{"red", "blue"},
			"parts": []any{map[string]any{"name": "x", "q": 1}, map[string]any{"name": "y", "q": 2}}}),
		pt(qdrant.NewIDNum(6), map[string]any{}),
	)
}

func must(cs ...*qdrant.Condition) *qdrant.Filter    { return &qdrant.Filter{Must: cs} }
func should(cs ...*qdrant.Condition) *qdrant.Filter  { return &qdrant.Filter{Should: cs} }
func mustNot(cs ...*qdrant.Condition) *qdrant.Filter { return &qdrant.Filter{MustNot: cs} }

// TestFilterSemantics runs every case without payload indexes and then with keyword
// indexes on city, color, tags and meta.lang. A case with an indexed answer expects it
// in the indexed run, where Qdrant answers through the index.
func TestFilterSemantics(t *testing.T) {
	c := connect(t)
	seedCities(t, c)
	london, red := qdrant.NewMatch("city", "London"), qdrant.NewMatch("color", "red")
	cases := []struct {
		name    string
		f       *qdrant.Filter
		want    string
		indexed *string // the answer with the indexes, when it differs
	}{
		{"no filter", nil, "1 2 3 4 6 " + uuid5, nil},
		{"empty filter", &qdrant.Filter{}, "1 2 3 4 6 " + uuid5, nil},
		{"must", must(london), "1 2", nil},
		{"must and", must(london, red), "2", nil},
		{"should or", should(london, qdrant.NewMatch("city", "Berlin")), "1 2 3", nil},
		{"must_not passes missing and null", mustNot(london), "3 4 6 " + uuid5, nil},
		{"array element matches", must(red), "2 3 " + uuid5, nil},
		{"any", must(qdrant.NewMatchKeywords("color", "red", "green")), "1 2 3 " + uuid5, nil},
		{"any of nothing", must(qdrant.NewMatchKeywords("color")), "", nil},
		{"except", must(qdrant.NewMatchExcept("color", "red")), "1 4 " + uuid5, nil},
		// Point 4 holds ["a", 7]: unindexed, 7 is not "a"; the keyword index holds only "a".
		{"except on arrays", must(qdrant.NewMatchExcept("tags", "a")), "1 2 4", qdrant.PtrOf("1 2")},
		{"keyword in array", must(qdrant.NewMatch("tags", "a")), "1 4", nil},
		{"keyword is case sensitive", must(qdrant.NewMatch("city", "london")), "", nil},
		{"keyword never matches a number", must(qdrant.NewMatch("n", "1")), "", nil},
		{"integer", must(qdrant.NewMatchInt("n", 2)), "2", nil},
		{"integer never matches a double", must(qdrant.NewMatchInts("n", 4, 5)), "", nil},
		{"except integers", must(qdrant.NewMatchExceptInts("n", 1, 2)), "3 4", nil},
		{"bool", must(qdrant.NewMatchBool("ok", true)), "1", nil},
		{"range", must(qdrant.NewRange("n", &qdrant.Range{Gte: qdrant.PtrOf(2.0), Lt: qdrant.PtrOf(5.0)})), "2 3 4", nil},
		{"nested filters", should(
			qdrant.NewFilterAsCondition(must(london, qdrant.NewMatchBool("ok", true))),
			qdrant.NewFilterAsCondition(must(qdrant.NewMatch("city", "Berlin")))), "1 3", nil},
		{"must_not inside must", must(qdrant.NewFilterAsCondition(mustNot(red))), "1 4 6", nil},
		{"must with should", &qdrant.Filter{Must: []*qdrant.Condition{red}, Should: []*qdrant.Condition{london, qdrant.NewMatch("city", "Berlin")}}, "2 3", nil},
		{"min_should", &qdrant.Filter{MinShould: &qdrant.MinShould{MinCount: 2, Conditions: []*qdrant.Condition{london, red, qdrant.NewMatchBool("ok", true)}}}, "1 2", nil},
		{"has_id", must(qdrant.NewHasID(qdrant.NewIDNum(1), qdrant.NewID(uuid5), qdrant.NewIDNum(99))), "1 " + uuid5, nil},
		{"has_id negated", mustNot(qdrant.NewHasID(qdrant.NewIDNum(1))), "2 3 4 6 " + uuid5, nil},
		{"is_empty", must(qdrant.NewIsEmpty("tags")), "3 6 " + uuid5, nil},
		{"is_null", must(qdrant.NewIsNull("city")), uuid5, nil},
		{"dotted key", must(qdrant.NewMatch("meta.lang", "en")), "1", nil},
		{"flattened array path", must(qdrant.NewMatch("parts[].name", "x"), qdrant.NewMatchInt("parts[].q", 2)), uuid5, nil},
		{"nested condition is per object", must(qdrant.NewNestedFilter("parts", must(qdrant.NewMatch("name", "x"), qdrant.NewMatchInt("q", 2)))), "", nil},
		{"nested condition", must(qdrant.NewNestedFilter("parts", must(qdrant.NewMatch("name", "x"), qdrant.NewMatchInt("q", 1)))), uuid5, nil},
	}
	run := func(t *testing.T, indexed bool) {
		for _, tc := range cases {
			want := strings.Fields(tc.want)
			if indexed && tc.indexed != nil {
				want = strings.Fields(*tc.indexed)
			}
			if got := scrollAll(t, c, "cities", tc.f); !slices.Equal(got, want) {
				t.Errorf("%s: scroll = %v, want %v", tc.name, got, want)
			}
			if got := count(t, c, "cities", tc.f); got != len(want) {
				t.Errorf("%s: count = %d, want %d", tc.name, got, len(want))
			}
		}
	}
	t.Run("scan", func(t *testing.T) { run(t, false) })
	for _, f := range []string{"city", "color", "tags", "meta.lang"} {
		index(t, c, "cities", f, qdrant.FieldType_FieldTypeKeyword)
	}
	t.Run("indexed", func(t *testing.T) { run(t, true) })
}
