package qdrantfake_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestScrollPagesInIDOrder(t *testing.T) {
	c := connect(t)
	createCollection(t, c, "pages")
	uuids := []string{"ffffffff-0000-4000-8000-000000000000", "00000000-0000-4000-8000-000000000001", "7fffffff-0000-4000-8000-000000000000"}
	var pts []*qdrant.PointStruct
	for _, n := range []uint64{9, 3, 12, 1, 7, 2, 11, 4, 10, 5, 8, 6} {
		pts = append(pts, pt(qdrant.NewIDNum(n), map[string]any{"parity": []string{"even", "odd"}[n%2]}))
	}
	for _, u := range uuids {
		pts = append(pts, pt(qdrant.NewID(u), map[string]any{"parity": "even"}))
	}
	upsert(t, c, "pages", pts...)
	want := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"}
	sorted := slices.Clone(uuids)
	sort.Strings(sorted)
	want = append(want, sorted...)

	page := func(f *qdrant.Filter, limit uint32) (got []string, pages int) {
		var offset *qdrant.PointId
		for {
			res, next, err := c.ScrollAndOffset(context.Background(), &qdrant.ScrollPoints{
				CollectionName: "pages", Filter: f, Limit: &limit, Offset: offset, WithPayload: qdrant.NewWithPayload(true),
			})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, p := range res {
				if p.GetPayload()["parity"] == nil {
					t.Fatalf("point %s returned without payload", idString(p.GetId()))
				}
				got = append(got, idString(p.GetId()))
			}
			if next == nil {
				return got, pages
			}
			if len(res) != int(limit) {
				t.Fatalf("short page of %d with a next offset", len(res))
			}
			if idString(next) == got[len(got)-1] {
				t.Fatal("next offset repeats the last point")
			}
			offset = next
		}
	}
	got, pages := page(nil, 4)
	if !slices.Equal(got, want) || pages != 4 {
		t.Errorf("paged scroll = %v in %d pages, want %v in 4", got, pages, want)
	}
	// Offsets are inclusive and need not be existing ids.
	res, err := c.Scroll(context.Background(), &qdrant.ScrollPoints{CollectionName: "pages", Offset: qdrant.NewIDNum(7), Limit: qdrant.PtrOf(uint32(2))})
	if err != nil || len(res) != 2 || res[0].GetId().GetNum() != 7 || res[1].GetId().GetNum() != 8 {
		t.Errorf("scroll from 7 = %v, %v", res, err)
	}
	// Filtered paging, by scan and then through the keyword index.
	even := must(qdrant.NewMatch("parity", "even"))
	wantEven := append([]string{"2", "4", "6", "8", "10", "12"}, sorted...)
	for _, indexed := range []bool{false, true} {
		if indexed {
			if _, err := c.CreateFieldIndex(context.Background(), &qdrant.CreateFieldIndexCollection{CollectionName: "pages", FieldName: "parity", FieldType: qdrant.FieldType_FieldTypeKeyword.Enum()}); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := page(even, 2); !slices.Equal(got, wantEven) {
			t.Errorf("indexed=%v: filtered paging = %v, want %v", indexed, got, wantEven)
		}
	}
	if _, err := c.Scroll(context.Background(), &qdrant.ScrollPoints{CollectionName: "pages", Limit: qdrant.PtrOf(uint32(0))}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("limit 0: %v, want InvalidArgument", err)
	}
	// The default limit is 10 and the default payload selection is all of it.
	res, err = c.Scroll(context.Background(), &qdrant.ScrollPoints{CollectionName: "pages"})
	if err != nil || len(res) != 10 || len(res[0].GetPayload()) != 1 {
		t.Errorf("default scroll = %d points, %v", len(res), err)
	}
}

func TestDeleteByFilterAndByIDs(t *testing.T) {
	c := connect(t)
	seedCities(t, c)
	ctx := context.Background()
	res, err := c.Delete(ctx, &qdrant.DeletePoints{CollectionName: "cities", Wait: qdrant.PtrOf(true),
		Points: qdrant.NewPointsSelectorFilter(must(red()))})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetStatus() != qdrant.UpdateStatus_Completed {
		t.Errorf("wait=true status %v", res.GetStatus())
	}
	if n := count(t, c, "cities", must(red())); n != 0 {
		t.Errorf("%d red points left", n)
	}
	if got := scrollAll(t, c, "cities", nil); !slices.Equal(got, []string{"1", "4", "6"}) {
		t.Errorf("left %v", got)
	}
	res, err = c.Delete(ctx, &qdrant.DeletePoints{CollectionName: "cities", Points: qdrant.NewPointsSelector(qdrant.NewIDNum(1), qdrant.NewIDNum(42))})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetStatus() != qdrant.UpdateStatus_Acknowledged {
		t.Errorf("wait unset status %v", res.GetStatus())
	}
	// The emulator applies it before answering; a real Qdrant applies it soon after.
	var left []string
	for range 50 {
		if left = scrollAll(t, c, "cities", nil); slices.Equal(left, []string{"4", "6"}) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !slices.Equal(left, []string{"4", "6"}) {
		t.Errorf("left %v", left)
	}
	got, err := c.Get(ctx, &qdrant.GetPoints{CollectionName: "cities", Ids: []*qdrant.PointId{qdrant.NewIDNum(4), qdrant.NewIDNum(1)}})
	if err != nil || len(got) != 1 || got[0].GetId().GetNum() != 4 || got[0].GetPayload() != nil {
		t.Errorf("get = %v, %v (want point 4 without payload)", got, err)
	}
	got, err = c.Get(ctx, &qdrant.GetPoints{CollectionName: "cities", Ids: []*qdrant.PointId{qdrant.NewIDNum(4)},
		WithPayload: qdrant.NewWithPayloadInclude("city"), WithVectors: qdrant.NewWithVectors(true)})
	if err != nil || len(got) != 1 || len(got[0].GetPayload()) != 1 || got[0].GetPayload()["city"].GetStringValue() != "Moscow" ||
		len(got[0].GetVectors().GetVector().GetDense().GetData()) != 4 {
		t.Errorf("get with include = %v, %v", got, err)
	}
}

func red() *qdrant.Condition { return qdrant.NewMatch("color", "red") }

func TestUpsertReplacesPointAndIndex(t *testing.T) {
	c := connect(t)
	createCollection(t, c, "u")
	ctx := context.Background()
	if _, err := c.CreateFieldIndex(ctx, &qdrant.CreateFieldIndexCollection{CollectionName: "u", FieldName: "owner", FieldType: qdrant.FieldType_FieldTypeKeyword.Enum()}); err != nil {
		t.Fatal(err)
	}
	upsert(t, c, "u", pt(qdrant.NewIDNum(1), map[string]any{"owner": "a", "extra": 1}))
	upsert(t, c, "u", pt(qdrant.NewIDNum(1), map[string]any{"owner": []any{"b", "c"}}))
	if n := count(t, c, "u", must(qdrant.NewMatch("owner", "a"))); n != 0 {
		t.Errorf("old value still matches %d", n)
	}
	if n := count(t, c, "u", must(qdrant.NewMatch("owner", "c"))); n != 1 {
		t.Errorf("new array value matches %d", n)
	}
	if n := count(t, c, "u", must(qdrant.NewIsEmpty("extra"))); n != 1 {
		t.Error("upsert did not replace the whole payload")
	}
	_, err := c.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: "u", Points: []*qdrant.PointStruct{
		{Id: qdrant.NewIDNum(2), Vectors: qdrant.NewVectors(1, 2)}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("wrong vector size: %v, want InvalidArgument", err)
	}
	_, err = c.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: "u", Points: []*qdrant.PointStruct{{Id: qdrant.NewID("not-a-uuid")}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad uuid: %v, want InvalidArgument", err)
	}
	if n := count(t, c, "u", nil); n != 1 {
		t.Errorf("failed upserts changed the collection: %d points", n)
	}
}

// TestIndexedFilterCostsTheMatches checks that a keyword match on an indexed field examines
// only the matching points, while the same match on an unindexed field scans.
func TestIndexedFilterCostsTheMatches(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	createCollection(t, c, "big")
	if _, err := c.CreateFieldIndex(ctx, &qdrant.CreateFieldIndexCollection{CollectionName: "big", FieldName: "owner", FieldType: qdrant.FieldType_FieldTypeKeyword.Enum()}); err != nil {
		t.Fatal(err)
	}
	const n = 5000
	pts := make([]*qdrant.PointStruct, 0, n)
	for i := range n {
		o := fmt.Sprintf("o%d", i%500)
		pts = append(pts, pt(qdrant.NewIDNum(uint64(i)), map[string]any{"owner": o, "plain": o}))
	}
	upsert(t, c, "big", pts...)
	cost := func(fn func()) uint64 {
		before := srv.PointsExamined()
		fn()
		return srv.PointsExamined() - before
	}
	if got := cost(func() {
		if k := count(t, c, "big", must(qdrant.NewMatch("owner", "o7"))); k != 10 {
			t.Errorf("count = %d", k)
		}
	}); got != 10 {
		t.Errorf("indexed count examined %d points, want 10", got)
	}
	if got := cost(func() {
		count(t, c, "big", should(qdrant.NewMatch("owner", "o1"), qdrant.NewMatchKeywords("owner", "o2", "o3")))
	}); got != 30 {
		t.Errorf("indexed should examined %d points, want 30", got)
	}
	if got := cost(func() {
		_, err := c.Delete(ctx, &qdrant.DeletePoints{CollectionName: "big", Wait: qdrant.PtrOf(true), Points: qdrant.NewPointsSelectorFilter(must(qdrant.NewMatch("owner", "o7")))})
		if err != nil {
			t.Fatal(err)
		}
	}); got != 10 {
		t.Errorf("indexed delete examined %d points, want 10", got)
	}
	if got := cost(func() { count(t, c, "big", must(qdrant.NewMatch("plain", "o8"))) }); got != n-10 {
		t.Errorf("unindexed count examined %d points, want a scan of %d", got, n-10)
	}
	if k := count(t, c, "big", nil); k != n-10 {
		t.Errorf("%d points left, want %d", k, n-10)
	}
}
