package qdrantfake_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
)

// indexCase is one filter and the ids Qdrant answers with it, without a payload index on
// the field and with one.
type indexCase struct {
	name            string
	f               *qdrant.Filter
	scan, byIndexed string
}

// runIndexed checks every case on coll, first without an index on field, then with an
// index of type ft (and params) on it.
func runIndexed(t *testing.T, c *qdrant.Client, coll, field string, ft qdrant.FieldType, params *qdrant.PayloadIndexParams, cases []indexCase) {
	t.Helper()
	check := func(t *testing.T, indexed bool) {
		for _, tc := range cases {
			want := strings.Fields(tc.scan)
			if indexed {
				want = strings.Fields(tc.byIndexed)
			}
			if got := scrollAll(t, c, coll, tc.f); !slices.Equal(got, want) {
				t.Errorf("%s: scroll = %v, want %v", tc.name, got, want)
			}
			if got := count(t, c, coll, tc.f); got != len(want) {
				t.Errorf("%s: count = %d, want %d", tc.name, got, len(want))
			}
		}
	}
	t.Run("no index", func(t *testing.T) { check(t, false) })
	qdranttest.Index(t, c, coll, field, ft, params)
	t.Run(strings.ToLower(strings.TrimPrefix(ft.String(), "FieldType"))+" index", func(t *testing.T) { check(t, true) })
}

func seed(t *testing.T, c *qdrant.Client, coll, field string, values ...any) {
	t.Helper()
	createCollection(t, c, coll)
	var pts []*qdrant.PointStruct
	for i, v := range values {
		p := map[string]any{}
		if v != missing {
			p[field] = v
		}
		pts = append(pts, pt(qdrant.NewIDNum(uint64(i+1)), p))
	}
	upsert(t, c, coll, pts...)
}

// missing stands for a point without the field.
var missing = new(int)

func TestExceptSeesOnlyIndexedValues(t *testing.T) {
	c := connect(t)
	seed(t, c, "except_kw", "tag", []any{"a", 7}, 7, "b", []any{"a"}, map[string]any{"x": 1}, true, nil, missing)
	runIndexed(t, c, "except_kw", "tag", qdrant.FieldType_FieldTypeKeyword, nil, []indexCase{
		{"except a", must(qdrant.NewMatchExcept("tag", "a")), "1 2 3 5 6", "3"},
		{"except nothing listed", must(qdrant.NewMatchExcept("tag", "zzz")), "1 2 3 4 5 6", "1 3 4"},
	})
	seed(t, c, "except_int", "n", []any{1, "x"}, "x", 2, []any{1}, 2.5)
	runIndexed(t, c, "except_int", "n", qdrant.FieldType_FieldTypeInteger, nil, []indexCase{
		{"except 1", must(qdrant.NewMatchExceptInts("n", 1)), "1 2 3 5", "3"},
	})
}

func TestIntegerIndexHoldsIntegralDoubles(t *testing.T) {
	c := connect(t)
	seed(t, c, "ints", "n", 4, 4.0, 4.5, "4", []any{3, 4.0})
	runIndexed(t, c, "ints", "n", qdrant.FieldType_FieldTypeInteger, nil, []indexCase{
		{"integer 4", must(qdrant.NewMatchInt("n", 4)), "1", "1 2 5"},
		{"keyword 4 never matches a number", must(qdrant.NewMatch("n", "4")), "4", "4"},
		{"range", must(qdrant.NewRange("n", &qdrant.Range{Gte: qdrant.PtrOf(4.0), Lte: qdrant.PtrOf(5.0)})), "1 2 3 5", "1 2 5"},
	})
}

func TestUUIDIndexMatchesAnySpelling(t *testing.T) {
	c := connect(t)
	const u = "5c56c793-69f3-4fbf-87e6-c4bf54c28c26"
	seed(t, c, "uuids", "owner", u, strings.ToUpper(u), "{"+u+"}", strings.ReplaceAll(u, "-", ""), "alice", "ALICE", []any{"x", strings.ToUpper(u)})
	runIndexed(t, c, "uuids", "owner", qdrant.FieldType_FieldTypeUuid, nil, []indexCase{
		{"lower case", must(qdrant.NewMatch("owner", u)), "1", "1 2 3 4 7"},
		{"upper case", must(qdrant.NewMatch("owner", strings.ToUpper(u))), "2 7", "1 2 3 4 7"},
		{"not a uuid is matched exactly", must(qdrant.NewMatch("owner", "alice")), "5", "5"},
		{"any with a non-uuid is matched exactly", must(qdrant.NewMatchKeywords("owner", strings.ToUpper(u), "zz")), "2 7", "2 7"},
		{"any of uuids", must(qdrant.NewMatchKeywords("owner", strings.ToUpper(u), "00000000-0000-4000-8000-000000000000")), "2 7", "1 2 3 4 7"},
	})
}

func TestIsNullOnArrayOfNull(t *testing.T) {
	c := connect(t)
	seed(t, c, "nulls", "v", []any{nil}, nil, "x", []any{}, missing, []any{"a", nil})
	runIndexed(t, c, "nulls", "v", qdrant.FieldType_FieldTypeKeyword, nil, []indexCase{
		{"is_null", must(qdrant.NewIsNull("v")), "2", "1 2 6"},
		{"is_empty", must(qdrant.NewIsEmpty("v")), "2 4 5", "2 4 5"},
	})
}

func TestFullTextMatch(t *testing.T) {
	c := connect(t)
	seed(t, c, "texts", "body", "Alice Smith", "Malice aforethought", "alice-in-chains", []any{"x", "Alice"}, 42)
	runIndexed(t, c, "texts", "body", qdrant.FieldType_FieldTypeText, nil, []indexCase{
		{"substring without index, tokens with", must(qdrant.NewMatchText("body", "ice")), "1 2 3 4", ""},
		{"case-sensitive without index, lowercased with", must(qdrant.NewMatchText("body", "alice")), "2 3", "1 3 4"},
		{"every token", must(qdrant.NewMatchText("body", "Alice Smith")), "1", "1"},
		{"any token", must(qdrant.NewMatchTextAny("body", "smith chains")), "3", "1 3"},
		{"phrase needs phrase_matching", must(qdrant.NewMatchPhrase("body", "Alice Smith")), "1", ""},
	})
	seed(t, c, "phrases", "body", "Alice Smith", "Smith Alice", "alice smith jones")
	runIndexed(t, c, "phrases", "body", qdrant.FieldType_FieldTypeText,
		qdrant.NewPayloadIndexParamsText(&qdrant.TextIndexParams{Tokenizer: qdrant.TokenizerType_Word, PhraseMatching: qdrant.PtrOf(true)}),
		[]indexCase{{"phrase", must(qdrant.NewMatchPhrase("body", "alice smith")), "3", "1 3"}})
}

func TestEmptyConditionIsDropped(t *testing.T) {
	c := connect(t)
	seedCities(t, c)
	all := "1 2 3 4 6 " + uuid5
	for _, tc := range []struct {
		name string
		f    *qdrant.Filter
		want string
	}{
		{"should of one empty condition matches all", should(&qdrant.Condition{}), all},
		{"should of empty conditions matches all", should(&qdrant.Condition{}, &qdrant.Condition{}), all},
		{"empty condition beside a match is dropped", should(&qdrant.Condition{}, qdrant.NewMatch("city", "Berlin")), "3"},
		{"empty must", must(&qdrant.Condition{}), all},
		{"empty must_not", mustNot(&qdrant.Condition{}), all},
		{"empty nested filter matches all", should(qdrant.NewFilterAsCondition(&qdrant.Filter{}), qdrant.NewMatch("city", "Berlin")), all},
	} {
		want := strings.Fields(tc.want)
		if got := scrollAll(t, c, "cities", tc.f); !slices.Equal(got, want) {
			t.Errorf("%s: scroll = %v, want %v", tc.name, got, want)
		}
	}
	// And a delete with such a filter empties the collection.
	if _, err := c.Delete(context.Background(), &qdrant.DeletePoints{CollectionName: "cities", Wait: qdrant.PtrOf(true),
		Points: qdrant.NewPointsSelectorFilter(should(&qdrant.Condition{}))}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, c, "cities", nil); n != 0 {
		t.Errorf("delete with an empty condition left %d points", n)
	}
}

func TestPayloadKeyGrammar(t *testing.T) {
	c := connect(t)
	createCollection(t, c, "keys")
	upsert(t, c, "keys", pt(qdrant.NewIDNum(1), map[string]any{"user id": "u", "a": map[string]any{"b c": []any{"v"}}, "é1": "x"}))
	for key, want := range map[string]int{
		"a": 0, "a_b-c": 0, "é1": 1, "A9": 0, `"user id"`: 1, `a."b c"[0]`: 1, `a."b c"[]`: 1, `""`: 0, `a.b[0][1]`: 0,
	} {
		if got, err := c.Count(context.Background(), &qdrant.CountPoints{CollectionName: "keys", Filter: must(qdrant.NewMatchKeywords(key, "u", "v", "x"))}); err != nil || int(got) != want {
			t.Errorf("key %s: count %d, %v; want %d", key, got, err, want)
		}
	}
	for _, key := range []string{"user id", "user:id", "$id", "a..b", "a.", ".a", "a[x]", "a[", "a[-1]", `"a\"`, `"a`, "a b", "a]", "", "a[]b"} {
		_, err := c.Count(context.Background(), &qdrant.CountPoints{CollectionName: "keys", Filter: must(qdrant.NewMatch(key, "u"))})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("key %q: %v, want InvalidArgument", key, err)
		}
	}
}

func TestAliases(t *testing.T) {
	c := connect(t)
	ctx := context.Background()
	createCollection(t, c, "alias_target")
	upsert(t, c, "alias_target", pt(qdrant.NewIDNum(1), map[string]any{"k": "a"}), pt(qdrant.NewIDNum(2), map[string]any{"k": "b"}))
	_ = c.DeleteAlias(ctx, "alias_name")
	if err := c.CreateAlias(ctx, "alias_name", "alias_target"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateAlias(ctx, "alias_other", "alias_missing"); status.Code(err) != codes.NotFound {
		t.Errorf("alias of a missing collection: %v, want NotFound", err)
	}
	if got, err := c.ListCollectionAliases(ctx, "alias_target"); err != nil || !slices.Equal(got, []string{"alias_name"}) {
		t.Errorf("aliases of the target = %v, %v", got, err)
	}
	if ok, err := c.CollectionExists(ctx, "alias_name"); !ok || err != nil {
		t.Errorf("exists(alias) = %v, %v; want true", ok, err)
	}
	if n := count(t, c, "alias_name", nil); n != 2 {
		t.Errorf("count through the alias = %d, want 2", n)
	}
	if got := scrollAll(t, c, "alias_name", must(qdrant.NewMatch("k", "a"))); !slices.Equal(got, []string{"1"}) {
		t.Errorf("scroll through the alias = %v", got)
	}
	if _, err := c.Delete(ctx, &qdrant.DeletePoints{CollectionName: "alias_name", Wait: qdrant.PtrOf(true), Points: qdrant.NewPointsSelectorFilter(must(qdrant.NewMatch("k", "a")))}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, c, "alias_target", nil); n != 1 {
		t.Errorf("delete through the alias left %d of 2 in the target, want 1", n)
	}
	// Dropping the alias as a collection answers false and changes nothing.
	if err := c.DeleteCollection(ctx, "alias_name"); err == nil {
		t.Error("DeleteCollection(alias) succeeded")
	}
	if n := count(t, c, "alias_name", nil); n != 1 {
		t.Errorf("after DeleteCollection(alias): %d points through the alias, want 1", n)
	}
	// Dropping the target drops its aliases.
	if err := c.DeleteCollection(ctx, "alias_target"); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.CollectionExists(ctx, "alias_name"); ok || err != nil {
		t.Errorf("exists(alias) after dropping its target = %v, %v", ok, err)
	}
	if got, err := c.ListAliases(ctx); err != nil || slices.ContainsFunc(got, func(a *qdrant.AliasDescription) bool { return a.GetAliasName() == "alias_name" }) {
		t.Errorf("aliases after dropping the target = %v, %v", got, err)
	}
}

func TestMalformedConditionsAreRefused(t *testing.T) {
	c := connect(t)
	seedCities(t, c)
	for name, f := range map[string]*qdrant.Filter{
		"nested without a filter":        must(&qdrant.Condition{ConditionOneOf: &qdrant.Condition_Nested{Nested: &qdrant.NestedCondition{Key: "parts"}}}),
		"field condition without a test": must(&qdrant.Condition{ConditionOneOf: &qdrant.Condition_Field{Field: &qdrant.FieldCondition{Key: "city"}}}),
		"match without a value":          must(&qdrant.Condition{ConditionOneOf: &qdrant.Condition_Field{Field: &qdrant.FieldCondition{Key: "city", Match: &qdrant.Match{}}}}),
	} {
		if _, err := c.Count(context.Background(), &qdrant.CountPoints{CollectionName: "cities", Filter: f}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
}

func TestIndexOfAnotherTypeReplacesIt(t *testing.T) {
	c := connect(t)
	createCollection(t, c, "retype")
	upsert(t, c, "retype", pt(qdrant.NewIDNum(1), map[string]any{"meta": map[string]any{"n": []any{1, "x"}}}))
	index(t, c, "retype", "meta.n", qdrant.FieldType_FieldTypeKeyword)
	except1 := must(qdrant.NewMatchExceptInts("meta.n", 1))
	if n := count(t, c, "retype", except1); n != 1 {
		t.Errorf("keyword index: except 1 counts %d, want 1 (\"x\" is not 1)", n)
	}
	index(t, c, "retype", `"meta".n`, qdrant.FieldType_FieldTypeInteger) // the same key, spelled otherwise
	info, err := c.GetCollectionInfo(context.Background(), "retype")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.GetPayloadSchema()) != 1 {
		t.Errorf("schema = %v, want one index", info.GetPayloadSchema())
	}
	for _, si := range info.GetPayloadSchema() {
		if si.GetDataType() != qdrant.PayloadSchemaType_Integer {
			t.Errorf("index type %v, want integer", si.GetDataType())
		}
	}
	if n := count(t, c, "retype", except1); n != 0 {
		t.Errorf("integer index: except 1 counts %d, want 0 (the index holds only 1)", n)
	}
}
