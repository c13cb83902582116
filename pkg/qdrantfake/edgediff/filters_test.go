package edgediff_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/qdrantfake/edgediff"
)

// EnvSeed sets the seed of the generated cases; unset, each run draws one and logs it.
const EnvSeed = "LETHE_TEST_EDGEDIFF_SEED"

func seed(t *testing.T) uint64 {
	t.Helper()
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv(EnvSeed); v != "" {
		var err error
		if s, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", EnvSeed, v, err)
		}
	}
	t.Logf("seed %d (rerun with %s=%d)", s, EnvSeed, s)
	return s
}

const (
	worlds         = 16  // collections, each with its own points and indexes
	casesPerWorld  = 130 // generated filters per collection
	pointsPerWorld = 48
	workers        = 4 // collections checked at once
)

// TestGeneratedFilters compares the emulator with Qdrant's engine on generated filters
// over generated payloads, without payload indexes and with random sets of them: per
// filter the exact count, every page of a filtered scroll, and the points a delete by
// the filter leaves (then restored for the next filter).
//
// Each collection has an emulator of its own, so that several run side by side: the
// suite waits on round trips more than it computes.
func TestGeneratedFilters(t *testing.T) {
	base := seed(t)
	oracle := edgediff.StartOracle(t)
	var cases, counts, scrolls atomic.Int64
	// Subtests run from goroutines of their own, as many at once as there are workers,
	// whatever -parallel says.
	work := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for w := range work {
				t.Run(fmt.Sprint("world", w), func(t *testing.T) {
					c, _, m := edgediff.ConnectWith(t, oracle)
					n := world(t, c, m, base, w)
					cases.Add(int64(n))
					counts.Add(int64(m.Compared()["/qdrant.Points/Count"]))
					scrolls.Add(int64(m.Compared()["/qdrant.Points/Scroll"]))
				})
			}
		})
	}
	for w := range worlds {
		work <- w
	}
	close(work)
	wg.Wait()
	t.Logf("%d generated filters over %d collections; reads compared: %d counts, %d scroll pages", cases.Load(), worlds, counts.Load(), scrolls.Load())
	if cases.Load() < 2000 {
		t.Errorf("only %d cases", cases.Load())
	}
}

// world runs the cases of collection w and returns how many it ran.
func world(t *testing.T, c *qdrant.Client, m *edgediff.Mirror, base uint64, w int) int {
	t.Helper()
	ctx := context.Background()
	cases := 0
	g := &gen{r: rand.New(rand.NewPCG(base, uint64(w)))}
	coll := fmt.Sprintf("world%d", w)
	create(t, c, coll, qdrant.Distance_Cosine, 4)
	var pts []*qdrant.PointStruct
	var ids []*qdrant.PointId
	seen := map[string]bool{}
	for i := range pointsPerWorld {
		id := g.id(i)
		if seen[id.String()] {
			continue
		}
		seen[id.String()] = true
		ids = append(ids, id)
		pts = append(pts, &qdrant.PointStruct{Id: id, Vectors: qdrant.NewVectors(g.r.Float32(), g.r.Float32(), g.r.Float32(), 1), Payload: qdrant.NewValueMap(g.payload())})
	}
	// A third of the worlds has no index; the others some of the index set, created
	// before the points in odd worlds and after them in even ones.
	var made []string
	if w%2 == 0 {
		upsert(t, c, coll, pts)
	}
	if w%3 != 0 {
		for _, ix := range indexes {
			if g.chance(0.45) {
				index(t, c, coll, ix.key, ix.ft)
				made = append(made, ix.key+":"+ix.ft.String())
				g.nestedIndexed = g.nestedIndexed || ix.key == "items[].k"
			}
		}
	}
	if w%2 == 1 {
		upsert(t, c, coll, pts)
	}
	for range casesPerWorld {
		f := g.filter(ids, 2, false)
		before := len(m.Divergences())
		count(t, c, coll, f)
		scrollAll(t, c, coll, f, uint32(6+g.r.IntN(30)), g.chance(0.3))
		if len(m.Divergences()) > before {
			report(t, c, m, coll, f, fmt.Sprintf("world %d (indexes %v), case %d", w, made, cases+1))
		}
		if _, err := c.Delete(ctx, &qdrant.DeletePoints{CollectionName: coll, Wait: qdrant.PtrOf(true), Points: qdrant.NewPointsSelectorFilter(f)}); err != nil {
			t.Fatal(err)
		}
		left := map[string]bool{}
		for _, id := range scrollAll(t, c, coll, nil, 1000, false) {
			left[id.String()] = true
		}
		var gone []*qdrant.PointStruct
		for _, p := range pts {
			// After a divergence the engine may have deleted others: restore all.
			if !left[p.GetId().String()] || len(m.Divergences()) > before {
				gone = append(gone, p)
			}
		}
		if len(gone) > 0 {
			upsert(t, c, coll, gone)
		}
		cases++
	}
	return cases
}

// report logs, for a filter f the two answered differently, the smallest filter left
// when conditions are taken out of f one at a time while the counts still differ, and
// the points only one of them returns for it.
func report(t *testing.T, c *qdrant.Client, m *edgediff.Mirror, coll string, f *qdrant.Filter, where string) {
	t.Helper()
	diverges := func(f *qdrant.Filter) bool {
		n := len(m.Divergences())
		defer m.Truncate(n)
		count(t, c, coll, f)
		return len(m.Divergences()) > n
	}
	if !diverges(f) {
		t.Logf("%s: the counts agree; the scroll pages differ", where)
		return
	}
	small := shrink(f, diverges)
	n := len(m.Divergences())
	scrollAll(t, c, coll, small, 1000, true)
	for _, d := range m.Divergences()[n:] {
		t.Logf("%s: smallest filter still differing: %s\n  %s", where, d.Request, d.Detail)
	}
	m.Truncate(n)
}

func create(t *testing.T, c *qdrant.Client, coll string, d qdrant.Distance, size uint64) {
	t.Helper()
	err := c.CreateCollection(context.Background(), &qdrant.CreateCollection{
		CollectionName: coll,
		VectorsConfig:  qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: size, Distance: d}),
	})
	if err != nil {
		t.Fatal(err)
	}
}

func upsert(t *testing.T, c *qdrant.Client, coll string, pts []*qdrant.PointStruct) {
	t.Helper()
	if _, err := c.Upsert(context.Background(), &qdrant.UpsertPoints{CollectionName: coll, Points: pts, Wait: qdrant.PtrOf(true)}); err != nil {
		t.Fatal(err)
	}
}

func index(t *testing.T, c *qdrant.Client, coll, key string, ft qdrant.FieldType) {
	t.Helper()
	_, err := c.CreateFieldIndex(context.Background(), &qdrant.CreateFieldIndexCollection{
		CollectionName: coll, FieldName: key, FieldType: ft.Enum(), Wait: qdrant.PtrOf(true),
	})
	if err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, c *qdrant.Client, coll string, f *qdrant.Filter) uint64 {
	t.Helper()
	n, err := c.Count(context.Background(), &qdrant.CountPoints{CollectionName: coll, Filter: f, Exact: qdrant.PtrOf(true)})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// scrollAll pages through the points passing f, limit a page, and returns their ids.
func scrollAll(t *testing.T, c *qdrant.Client, coll string, f *qdrant.Filter, limit uint32, payload bool) []*qdrant.PointId {
	t.Helper()
	var out []*qdrant.PointId
	var offset *qdrant.PointId
	for {
		pts, next, err := c.ScrollAndOffset(context.Background(), &qdrant.ScrollPoints{
			CollectionName: coll, Filter: f, Limit: &limit, Offset: offset, WithPayload: qdrant.NewWithPayload(payload),
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pts {
			out = append(out, p.GetId())
		}
		if next == nil {
			return out
		}
		offset = next
	}
}
