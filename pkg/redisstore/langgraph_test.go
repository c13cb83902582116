package redisstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
)

// TestLangGraphCheckpointerExample erases one thread's checkpoint, latest-pointer and
// write keys, as LangGraph's Redis checkpointer (langgraph-checkpoint-redis 0.5.2) writes
// them with the tenant first in its key prefixes, with the shipped example inventory; a
// thread whose id extends the erased one keeps every key, and so does the same thread of
// another tenant. The thread's write_keys_zset set, whose prefix names no tenant, is left:
// no template may name it (the example says so).
func TestLangGraphCheckpointerExample(t *testing.T) {
	inv, err := inventory.Load("../../deploy/examples/inventory-langgraph-redis.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, ok := inv.Entry("langgraph_checkpoints")
	if !ok {
		t.Fatal("no langgraph_checkpoints store")
	}
	c := realRedis(t)
	ctx := context.Background()
	keys := func(tenant, thread string) []string {
		return []string{
			tenant + ":checkpoint:" + thread + ":__empty__:1ef4f797-8335-6428-8001-8a1503f9b875",
			tenant + ":checkpoint:" + thread + ":inner:1ef4f797-8335-6428-8001-8a1503f9b876",
			tenant + ":checkpoint_latest:" + thread + ":__empty__",
			tenant + ":checkpoint_write:" + thread + ":__empty__:1ef4f797-8335-6428-8001-8a1503f9b875:task-1:0",
		}
	}
	zset := "write_keys_zset:thread-7:__empty__:1ef4f797-8335-6428-8001-8a1503f9b875"
	if err := c.ZAdd(ctx, zset, redis.Z{Score: 1, Member: "acme:checkpoint_write:thread-7:__empty__:1ef4f797-8335-6428-8001-8a1503f9b875:task-1:0"}).Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][2]string{{"acme", "thread-7"}, {"acme", "thread-70"}, {"globex", "thread-7"}} {
		for _, k := range keys(k[0], k[1]) {
			if err := c.Set(ctx, k, "state", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := append(append(keys("acme", "thread-70"), keys("globex", "thread-7")...), zset)
	s := deletion.Subject{Tenant: "acme", ID: "cust-7", Sessions: []string{"thread-7"}}
	store := redisstore.New(c)
	res, err := store.Erase(ctx, st, s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted() != 4 {
		t.Errorf("deleted %d keys, want the thread's 4", res.Deleted())
	}
	if v, err := store.Verify(ctx, st, s); err != nil || !v.Clean() {
		t.Errorf("Verify = %+v, %v; want clean", v, err)
	}
	left, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(left)
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("keys left %q, want the other thread's and the other tenant's %q", left, want)
	}
}
