package qdrantfake_test

import (
	"context"
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

func TestFilterSemantics(t *testing.T) {
	_, c := start(t)
	seedCities(t, c)
	london, red := qdrant.NewMatch("city", "London"), qdrant.NewMatch("color", "red")
	cases := []struct {
		name string
		f    *qdrant.Filter
		want string
	}{
		{"no filter", nil, "1 2 3 4 6 " + uuid5},
		{"empty filter", &qdrant.Filter{}, "1 2 3 4 6 " + uuid5},
		{"must", must(london), "1 2"},
		{"must and", must(london, red), "2"},
		{"should or", should(london, qdrant.NewMatch("city", "Berlin")), "1 2 3"},
		{"must_not passes missing and null", mustNot(london), "3 4 6 " + uuid5},
		{"array element matches", must(red), "2 3 " + uuid5},
		{"any", must(qdrant.NewMatchKeywords("color", "red", "green")), "1 2 3 " + uuid5},
		{"any of nothing", must(qdrant.NewMatchKeywords("color")), ""},
		{"except", must(qdrant.NewMatchExcept("color", "red")), "1 4 " + uuid5},
		{"except on arrays", must(qdrant.NewMatchExcept("tags", "a")), "1 2 4"},
		{"keyword in array", must(qdrant.NewMatch("tags", "a")), "1 4"},
		{"keyword is case sensitive", must(qdrant.NewMatch("city", "london")), ""},
		{"keyword never matches a number", must(qdrant.NewMatch("n", "1")), ""},
		{"integer", must(qdrant.NewMatchInt("n", 2)), "2"},
		{"integer never matches a double", must(qdrant.NewMatchInts("n", 4, 5)), ""},
		{"except integers", must(qdrant.NewMatchExceptInts("n", 1, 2)), "3 4"},
		{"bool", must(qdrant.NewMatchBool("ok", true)), "1"},
		{"range", must(qdrant.NewRange("n", &qdrant.Range{Gte: qdrant.PtrOf(2.0), Lt: qdrant.PtrOf(5.0)})), "2 3 4"},
		{"nested filters", should(
			qdrant.NewFilterAsCondition(must(london, qdrant.NewMatchBool("ok", true))),
			qdrant.NewFilterAsCondition(must(qdrant.NewMatch("city", "Berlin")))), "1 3"},
		{"must_not inside must", must(qdrant.NewFilterAsCondition(mustNot(red))), "1 4 6"},
		{"must with should", &qdrant.Filter{Must: []*qdrant.Condition{red}, Should: []*qdrant.Condition{london, qdrant.NewMatch("city", "Berlin")}}, "2 3"},
		{"min_should", &qdrant.Filter{MinShould: &qdrant.MinShould{MinCount: 2, Conditions: []*qdrant.Condition{london, red, qdrant.NewMatchBool("ok", true)}}}, "1 2"},
		{"has_id", must(qdrant.NewHasID(qdrant.NewIDNum(1), qdrant.NewID(uuid5), qdrant.NewIDNum(99))), "1 " + uuid5},
		{"has_id negated", mustNot(qdrant.NewHasID(qdrant.NewIDNum(1))), "2 3 4 6 " + uuid5},
		{"is_empty", must(qdrant.NewIsEmpty("tags")), "3 6 " + uuid5},
		{"is_null", must(qdrant.NewIsNull("city")), uuid5},
		{"dotted key", must(qdrant.NewMatch("meta.lang", "en")), "1"},
		{"flattened array path", must(qdrant.NewMatch("parts[].name", "x"), qdrant.NewMatchInt("parts[].q", 2)), uuid5},
		{"nested condition is per object", must(qdrant.NewNestedFilter("parts", must(qdrant.NewMatch("name", "x"), qdrant.NewMatchInt("q", 2)))), ""},
		{"nested condition", must(qdrant.NewNestedFilter("parts", must(qdrant.NewMatch("name", "x"), qdrant.NewMatchInt("q", 1)))), uuid5},
	}
	run := func(t *testing.T) {
		for _, tc := range cases {
			want := strings.Fields(tc.want)
			if got := scrollAll(t, c, "cities", tc.f); !slices.Equal(got, want) {
				t.Errorf("%s: scroll = %v, want %v", tc.name, got, want)
			}
			if got := count(t, c, "cities", tc.f); got != len(want) {
				t.Errorf("%s: count = %d, want %d", tc.name, got, len(want))
			}
		}
	}
	t.Run("scan", run)
	for _, f := range []string{"city", "color", "tags", "meta.lang"} {
		if _, err := c.CreateFieldIndex(context.Background(), &qdrant.CreateFieldIndexCollection{
			CollectionName: "cities", FieldName: f, FieldType: qdrant.FieldType_FieldTypeKeyword.Enum(), Wait: qdrant.PtrOf(true),
		}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("indexed", run)
}
