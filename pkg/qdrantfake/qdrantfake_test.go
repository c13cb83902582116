package qdrantfake_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
)

// start runs an emulator and returns it with an official client connected over TCP.
func start(t *testing.T) (*qdrantfake.Server, *qdrant.Client) {
	t.Helper()
	srv, err := qdrantfake.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") || srv.Port() == 0 || srv.Host() != "127.0.0.1" {
		t.Fatalf("addr %q host %q port %d", srv.Addr(), srv.Host(), srv.Port())
	}
	c, err := qdrant.NewClient(&qdrant.Config{Host: srv.Host(), Port: srv.Port()}) // runs the version check
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

// connect returns a client of the Qdrant the behaviour tests run against: the one at
// LETHE_TEST_QDRANT_ADDR when set, else a fresh emulator.
func connect(t *testing.T) *qdrant.Client {
	t.Helper()
	c, _ := qdranttest.Connect(t)
	return c
}

func createCollection(t *testing.T, c *qdrant.Client, name string) {
	t.Helper()
	qdranttest.Collection(t, c, name)
}

func index(t *testing.T, c *qdrant.Client, coll, field string, ft qdrant.FieldType) {
	t.Helper()
	qdranttest.Index(t, c, coll, field, ft, nil)
}

func pt(id *qdrant.PointId, payload map[string]any) *qdrant.PointStruct {
	return &qdrant.PointStruct{Id: id, Payload: qdrant.NewValueMap(payload), Vectors: qdrant.NewVectors(0.1, 0.2, 0.3, 0.4)}
}

func upsert(t *testing.T, c *qdrant.Client, coll string, pts ...*qdrant.PointStruct) {
	t.Helper()
	if _, err := c.Upsert(context.Background(), &qdrant.UpsertPoints{CollectionName: coll, Points: pts, Wait: qdrant.PtrOf(true)}); err != nil {
		t.Fatal(err)
	}
}

func idString(id *qdrant.PointId) string {
	if u := id.GetUuid(); u != "" {
		return u
	}
	return fmt.Sprint(id.GetNum())
}

func scrollAll(t *testing.T, c *qdrant.Client, coll string, f *qdrant.Filter) []string {
	t.Helper()
	pts, err := c.Scroll(context.Background(), &qdrant.ScrollPoints{CollectionName: coll, Filter: f, Limit: qdrant.PtrOf(uint32(100))})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range pts {
		ids = append(ids, idString(p.GetId()))
	}
	return ids
}

func count(t *testing.T, c *qdrant.Client, coll string, f *qdrant.Filter) int {
	t.Helper()
	n, err := c.Count(context.Background(), &qdrant.CountPoints{CollectionName: coll, Filter: f, Exact: qdrant.PtrOf(true)})
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func TestMissingCollectionIsNotFound(t *testing.T) {
	c := connect(t)
	ctx := context.Background()
	calls := map[string]func() error{
		"count":  func() error { _, err := c.Count(ctx, &qdrant.CountPoints{CollectionName: "nope"}); return err },
		"scroll": func() error { _, err := c.Scroll(ctx, &qdrant.ScrollPoints{CollectionName: "nope"}); return err },
		"get":    func() error { _, err := c.Get(ctx, &qdrant.GetPoints{CollectionName: "nope"}); return err },
		"info":   func() error { _, err := c.GetCollectionInfo(ctx, "nope"); return err },
		"upsert": func() error {
			_, err := c.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: "nope", Points: []*qdrant.PointStruct{pt(qdrant.NewIDNum(1), nil)}})
			return err
		},
		"delete": func() error {
			_, err := c.Delete(ctx, &qdrant.DeletePoints{CollectionName: "nope", Points: qdrant.NewPointsSelectorFilter(must(red()))})
			return err
		},
		"index": func() error {
			_, err := c.CreateFieldIndex(ctx, &qdrant.CreateFieldIndexCollection{CollectionName: "nope", FieldName: "f", FieldType: qdrant.FieldType_FieldTypeKeyword.Enum()})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "Collection `nope` doesn't exist!") {
			t.Errorf("%s: %v, want NotFound", name, err)
		}
	}
}

func TestUnsupportedIsUnimplemented(t *testing.T) {
	_, c := start(t)
	seedCities(t, c)
	ctx := context.Background()
	_, err := c.Query(ctx, &qdrant.QueryPoints{CollectionName: "cities", Query: qdrant.NewQueryRecommend(&qdrant.RecommendInput{Positive: []*qdrant.VectorInput{qdrant.NewVectorInput(1, 2, 3, 4)}})})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("recommend query: %v", err)
	}
	for name, f := range map[string]*qdrant.Filter{
		"values_count":        must(qdrant.NewValuesCount("tags", &qdrant.ValuesCount{Gt: qdrant.PtrOf(uint64(1))})),
		"nested values_count": should(qdrant.NewFilterAsCondition(mustNot(qdrant.NewValuesCount("tags", &qdrant.ValuesCount{Gt: qdrant.PtrOf(uint64(1))})))),
		"geo":                 must(qdrant.NewGeoRadius("loc", 0, 0, 10)),
	} {
		if _, err := c.Count(ctx, &qdrant.CountPoints{CollectionName: "cities", Filter: f}); status.Code(err) != codes.Unimplemented {
			t.Errorf("%s: %v", name, err)
		}
		_, err := c.Delete(ctx, &qdrant.DeletePoints{CollectionName: "cities", Points: qdrant.NewPointsSelectorFilter(f)})
		if status.Code(err) != codes.Unimplemented {
			t.Errorf("delete %s: %v", name, err)
		}
	}
	if n := count(t, c, "cities", nil); n != 6 {
		t.Errorf("refused deletes removed points: %d left", n)
	}
}

func TestCollectionLifecycle(t *testing.T) {
	c := connect(t)
	ctx := context.Background()
	createCollection(t, c, "a")
	err := c.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: "a"})
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("duplicate create: %v", err)
	}
	if err := c.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: "a/b"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad name: %v", err)
	}
	upsert(t, c, "a", pt(qdrant.NewIDNum(1), map[string]any{"k": "v"}), pt(qdrant.NewIDNum(2), map[string]any{"k": []any{"v", "w"}}))
	if _, err := c.CreateFieldIndex(ctx, &qdrant.CreateFieldIndexCollection{CollectionName: "a", FieldName: "k", FieldType: qdrant.FieldType_FieldTypeKeyword.Enum()}); err != nil {
		t.Fatal(err)
	}
	info, err := c.GetCollectionInfo(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if info.GetPointsCount() != 2 || info.GetPayloadSchema()["k"].GetDataType() != qdrant.PayloadSchemaType_Keyword ||
		info.GetConfig().GetParams().GetVectorsConfig().GetParams().GetSize() != 4 {
		t.Errorf("info = %v", info)
	}
	names, err := c.ListCollections(ctx)
	if err != nil || !slices.Contains(names, "a") {
		t.Errorf("list = %v, %v", names, err)
	}
	if ok, err := c.CollectionExists(ctx, "a"); !ok || err != nil {
		t.Errorf("exists = %v, %v", ok, err)
	}
	if err := c.DeleteCollection(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.CollectionExists(ctx, "a"); ok || err != nil {
		t.Errorf("exists after delete = %v, %v", ok, err)
	}
	if err := c.DeleteCollection(ctx, "a"); err == nil {
		t.Error("deleting a missing collection reported success")
	}
	createCollection(t, c, "a")
	if n := count(t, c, "a", nil); n != 0 {
		t.Errorf("re-created collection has %d points", n)
	}
}

func TestConcurrentWritesAndReads(t *testing.T) {
	c := connect(t)
	ctx := context.Background()
	createCollection(t, c, "cc")
	index(t, c, "cc", "w", qdrant.FieldType_FieldTypeKeyword)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				id := uint64(w*1000 + i)
				if _, err := c.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: "cc", Wait: qdrant.PtrOf(true), Points: []*qdrant.PointStruct{pt(qdrant.NewIDNum(id), map[string]any{"w": fmt.Sprint(w)})}}); err != nil {
					t.Error(err)
					return
				}
				if _, err := c.Count(ctx, &qdrant.CountPoints{CollectionName: "cc", Filter: must(qdrant.NewMatch("w", fmt.Sprint(w)))}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for w := range 8 {
		if n := count(t, c, "cc", must(qdrant.NewMatch("w", fmt.Sprint(w)))); n != 50 {
			t.Errorf("writer %d: %d points", w, n)
		}
	}
}

// A collection created without configuration reports Qdrant's default HNSW, optimizer and
// WAL settings (config/config.yaml): the Python client's gRPC conversion of collection
// info, which langchain-qdrant calls before it writes, requires m, ef_construct and
// full_scan_threshold.
func TestCollectionInfoReportsDefaultConfig(t *testing.T) {
	c := connect(t)
	createCollection(t, c, "defaults")
	info, err := c.GetCollectionInfo(context.Background(), "defaults")
	if err != nil {
		t.Fatal(err)
	}
	h, o, w := info.GetConfig().GetHnswConfig(), info.GetConfig().GetOptimizerConfig(), info.GetConfig().GetWalConfig()
	if h.M == nil || h.GetM() != 16 || h.EfConstruct == nil || h.GetEfConstruct() != 100 || h.FullScanThreshold == nil || h.GetFullScanThreshold() != 10000 {
		t.Errorf("hnsw config %v, want m 16, ef_construct 100, full_scan_threshold 10000", h)
	}
	if o.DeletedThreshold == nil || o.GetDeletedThreshold() != 0.2 || o.FlushIntervalSec == nil || o.GetFlushIntervalSec() != 5 {
		t.Errorf("optimizer config %v, want deleted_threshold 0.2, flush_interval_sec 5", o)
	}
	if w.WalCapacityMb == nil || w.GetWalCapacityMb() != 32 {
		t.Errorf("wal config %v, want wal_capacity_mb 32", w)
	}
}
