package qdrantfake_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
)

// A filter the indexes answer alone (matches on indexed keys, has_id, nested filters of
// them, in one must or in should) selects the same points as the same filter checked point
// by point: the check is forced here by a must_not that excludes nothing. Payloads mix
// strings, integers, integral doubles, UUID spellings, arrays, nulls and missing keys, on
// keyword, integer and uuid indexes and on a key without an index.
func TestIndexAnsweredFiltersSelectWhatTheirCheckSelects(t *testing.T) {
	c, _ := qdranttest.Emulator(t)
	ctx := context.Background()
	const coll = "exact"
	qdranttest.Collection(t, c, coll)
	qdranttest.Index(t, c, coll, "kw", qdrant.FieldType_FieldTypeKeyword, nil)
	qdranttest.Index(t, c, coll, "n", qdrant.FieldType_FieldTypeInteger, nil)
	qdranttest.Index(t, c, coll, "u", qdrant.FieldType_FieldTypeUuid, nil)
	qdranttest.Index(t, c, coll, "obj.kw", qdrant.FieldType_FieldTypeKeyword, nil)
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", "b", "c", "d", "7", "3"}
	uuids := []string{"6ba7b810-9dad-11d1-80b4-00c04fd430c8", "6BA7B810-9DAD-11D1-80B4-00C04FD430C8", "6ba7b8109dad11d180b400c04fd430c8", "123e4567-e89b-12d3-a456-426614174000"}
	value := func() any {
		switch r.IntN(7) {
		case 0:
			return words[r.IntN(len(words))]
		case 1:
			return int64(r.IntN(5))
		case 2:
			return float64(r.IntN(5))
		case 3:
			return uuids[r.IntN(len(uuids))]
		case 4:
			return []any{words[r.IntN(len(words))], int64(r.IntN(5)), uuids[r.IntN(len(uuids))]}
		case 5:
			return nil
		}
		return []any{}
	}
	var pts []*qdrant.PointStruct
	for i := range 300 {
		p := map[string]any{}
		for _, k := range []string{"kw", "n", "u", "plain"} {
			if r.IntN(4) > 0 {
				p[k] = value()
			}
		}
		if r.IntN(2) == 0 {
			p["obj"] = map[string]any{"kw": words[r.IntN(len(words))]}
		}
		pts = append(pts, pt(qdrant.NewIDNum(uint64(i+1)), p))
	}
	upsert(t, c, coll, pts...)

	cond := func(depth int) *qdrant.Condition {
		var build func(depth int) *qdrant.Condition
		build = func(depth int) *qdrant.Condition {
			key := []string{"kw", "n", "u", "plain", "obj.kw"}[r.IntN(5)]
			switch r.IntN(6) {
			case 0:
				return qdrant.NewMatch(key, words[r.IntN(len(words))])
			case 1:
				return qdrant.NewMatchKeywords(key, words[r.IntN(len(words))], uuids[r.IntN(len(uuids))])
			case 2:
				return qdrant.NewMatchInt(key, int64(r.IntN(5)))
			case 3:
				return qdrant.NewMatchInts(key, int64(r.IntN(5)), int64(r.IntN(5)))
			case 4:
				return qdrant.NewHasID(qdrant.NewIDNum(uint64(r.IntN(320))), qdrant.NewIDNum(uint64(r.IntN(320))))
			}
			if depth == 0 {
				return qdrant.NewMatch(key, uuids[r.IntN(len(uuids))])
			}
			return qdrant.NewFilterAsCondition(&qdrant.Filter{Should: []*qdrant.Condition{build(depth - 1), build(depth - 1)}})
		}
		return build(depth)
	}
	ids := func(f *qdrant.Filter) []uint64 {
		pts, err := c.Scroll(ctx, &qdrant.ScrollPoints{CollectionName: coll, Filter: f, Limit: qdrant.PtrOf(uint32(1000))})
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, p := range pts {
			out = append(out, p.GetId().GetNum())
		}
		return out
	}
	count := func(f *qdrant.Filter) uint64 {
		n, err := c.Count(ctx, &qdrant.CountPoints{CollectionName: coll, Filter: f, Exact: qdrant.PtrOf(true)})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	nonEmpty := 0
	for i := range 400 {
		var f *qdrant.Filter
		if i%3 == 0 {
			f = &qdrant.Filter{Must: []*qdrant.Condition{cond(2)}}
		} else {
			f = &qdrant.Filter{Should: []*qdrant.Condition{cond(2), cond(2), cond(1)}}
		}
		checked := &qdrant.Filter{Must: f.Must, Should: f.Should, MustNot: []*qdrant.Condition{qdrant.NewHasID(qdrant.NewIDNum(100_000))}}
		want := ids(checked)
		if got := count(f); got != uint64(len(want)) {
			t.Fatalf("filter %v: count %d, the point-by-point check selects %d (%v)", f, got, len(want), want)
		}
		if got := ids(f); !slices.Equal(got, want) {
			t.Fatalf("filter %v: scroll %v, the point-by-point check %v", f, got, want)
		}
		if len(want) > 0 {
			nonEmpty++
		}
	}
	if nonEmpty < 100 {
		t.Fatalf("only %d of 400 filters selected anything: the test says little", nonEmpty)
	}

	// A delete through such a filter removes exactly what the check selects, and nothing else.
	f := &qdrant.Filter{Should: []*qdrant.Condition{qdrant.NewMatchKeywords("kw", "a", "7"), qdrant.NewMatchInts("n", 3)}}
	gone := ids(&qdrant.Filter{Should: f.Should, MustNot: []*qdrant.Condition{qdrant.NewHasID(qdrant.NewIDNum(100_000))}})
	before := ids(nil)
	if _, err := c.Delete(ctx, &qdrant.DeletePoints{CollectionName: coll, Points: qdrant.NewPointsSelectorFilter(f), Wait: qdrant.PtrOf(true)}); err != nil {
		t.Fatal(err)
	}
	left := ids(nil)
	if want := slices.DeleteFunc(before, func(id uint64) bool { return slices.Contains(gone, id) }); !slices.Equal(left, want) || len(gone) == 0 {
		t.Fatalf("delete left %d points, want %d (%d selected): %s", len(left), len(want), len(gone), fmt.Sprint(left))
	}
}
