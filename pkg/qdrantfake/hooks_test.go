package qdrantfake_test

import (
	"context"
	"testing"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
)

// The hooks exist only in the emulator, so these tests always run against it.

func TestDeferredPointsAreDeletedButNotCounted(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	createCollection(t, c, "d")
	upsert(t, c, "d", pt(qdrant.NewIDNum(1), map[string]any{"owner": "a"}))
	srv.SetDeferredVisibility(true)
	upsert(t, c, "d", pt(qdrant.NewIDNum(2), map[string]any{"owner": "a"}), pt(qdrant.NewIDNum(3), map[string]any{"owner": "b"}))
	srv.SetDeferredVisibility(false)
	a := must(qdrant.NewMatch("owner", "a"))
	if n := count(t, c, "d", a); n != 1 {
		t.Errorf("count sees %d of a's points, want only the visible one", n)
	}
	if n := count(t, c, "d", nil); n != 1 {
		t.Errorf("unfiltered count = %d, want 1", n)
	}
	if got := scrollAll(t, c, "d", nil); len(got) != 1 {
		t.Errorf("scroll = %v, want the visible point only", got)
	}
	if got, err := c.Get(ctx, &qdrant.GetPoints{CollectionName: "d", Ids: []*qdrant.PointId{qdrant.NewIDNum(2)}}); err != nil || len(got) != 0 {
		t.Errorf("get of a deferred point = %v, %v", got, err)
	}
	if _, err := c.Delete(ctx, &qdrant.DeletePoints{CollectionName: "d", Wait: qdrant.PtrOf(true), Points: qdrant.NewPointsSelectorFilter(a)}); err != nil {
		t.Fatal(err)
	}
	srv.Reveal()
	if n := count(t, c, "d", a); n != 0 {
		t.Errorf("after reveal %d of a's points remain: the delete missed the deferred one", n)
	}
	if got := scrollAll(t, c, "d", nil); len(got) != 1 || got[0] != "3" {
		t.Errorf("after reveal = %v, want b's point 3", got)
	}
}

func TestFaultHook(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	createCollection(t, c, "f")
	upsert(t, c, "f", pt(qdrant.NewIDNum(1), map[string]any{"owner": "a"}), pt(qdrant.NewIDNum(2), map[string]any{"owner": "a"}))
	srv.InjectFault(qdrantfake.Fault{Method: "Collections/Delete", Code: codes.Internal, Times: 1}) // not a points delete
	srv.InjectFault(qdrantfake.Fault{Method: "Points/Delete", Status: qdrant.UpdateStatus_WaitTimeout, Times: 1})
	del := func() (*qdrant.UpdateResult, error) {
		return c.Delete(ctx, &qdrant.DeletePoints{CollectionName: "f", Wait: qdrant.PtrOf(true), Points: qdrant.NewPointsSelector(qdrant.NewIDNum(1))})
	}
	if res, err := del(); err != nil || res.GetStatus() != qdrant.UpdateStatus_WaitTimeout {
		t.Errorf("first delete = %v, %v; want WaitTimeout without an error", res, err)
	}
	if n := count(t, c, "f", nil); n != 1 {
		t.Errorf("after the timed-out delete %d points, want 1: the write is applied all the same", n)
	}
	if res, err := del(); err != nil || res.GetStatus() != qdrant.UpdateStatus_Completed {
		t.Errorf("second delete = %v, %v; want Completed", res, err)
	}
	if err := c.DeleteCollection(ctx, "no-such"); status.Code(err) != codes.Internal {
		t.Errorf("collections delete under its fault: %v, want Internal", err)
	}
	srv.InjectFault(qdrantfake.Fault{Method: "Count", Code: codes.FailedPrecondition, Message: "No target shard found for update", Times: 2})
	before := srv.Calls("Count")
	for i := range 2 {
		if _, err := c.Count(ctx, &qdrant.CountPoints{CollectionName: "f"}); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("count %d: %v, want FailedPrecondition", i, err)
		}
	}
	if n := count(t, c, "f", nil); n != 1 {
		t.Errorf("count after the faults = %d, want 1", n)
	}
	if got := srv.Calls("Count") - before; got != 3 {
		t.Errorf("Calls(Count) grew by %d, want 3", got)
	}
	srv.InjectFault(qdrantfake.Fault{Method: "Upsert", Code: codes.Unavailable})
	for range 2 {
		if _, err := c.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: "f", Points: []*qdrant.PointStruct{pt(qdrant.NewIDNum(9), nil)}}); status.Code(err) != codes.Unavailable {
			t.Errorf("upsert under a standing fault: %v", err)
		}
	}
	srv.ClearFaults()
	upsert(t, c, "f", pt(qdrant.NewIDNum(9), nil))
}
