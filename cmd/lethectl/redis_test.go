package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// redis index-legacy, stopped by --max-keys and resumed from its progress file, lists
// every legacy key of the reference inventory's redis store in its subject's index set,
// and reports done; keys of other templates and other kinds are left out of the index.
func TestRedisIndexLegacy(t *testing.T) {
	addr := testenv.Redis(t)
	t.Setenv("LETHE_REDIS_ADDRS", addr)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	ids := []string{"cust-1", "x:y", "a*"}
	for _, id := range ids {
		for i := range 4 {
			c.Set(ctx, "session:acme:"+redisstore.KeyPart(id)+":"+strconv.Itoa(i), "v", 0)
			c.Set(ctx, "cache:globex:"+redisstore.KeyPart(id)+":"+strconv.Itoa(i), "v", 0)
		}
	}
	c.Set(ctx, "graph:acme:cust-1:0", "v", 0) // langgraph's, not this store's
	c.Set(ctx, "sessionless", "v", 0)
	ref := filepath.Join("..", "..", "deploy", "inventory.yaml")
	progress := filepath.Join(t.TempDir(), "redis.progress")
	args := []string{"redis", "index-legacy", "--inventory", ref, "--store", "redis", "--progress", progress, "--count", "2", "--max-keys"}
	stops := 0
	for limit := 5; ; limit += 5 {
		r := lethectl(t, append(args, strconv.Itoa(limit))...)
		wantCode(t, r, exitOK)
		if strings.Contains(r.stdout, "done: 24 keys indexed") {
			break
		}
		if !strings.Contains(r.stdout, "stopped: ") {
			t.Fatalf("neither stopped nor done: %s", r)
		}
		if stops++; stops > 10 {
			t.Fatalf("does not finish: %s", r)
		}
	}
	if stops == 0 {
		t.Error("--max-keys never stopped the scan")
	}
	for _, tenant := range []string{"acme", "globex"} {
		for _, id := range ids {
			n, err := c.SCard(ctx, "idx:"+tenant+":"+redisstore.KeyPart(id)).Result()
			if err != nil || n != 4 {
				t.Errorf("index of %s/%q holds %d keys (%v), want 4", tenant, id, n, err)
			}
		}
	}
	if n, _ := c.SCard(ctx, "idx:acme:cust-1").Result(); n != 4 {
		t.Errorf("langgraph's key joined the redis index: %d members", n)
	}
	wantCode(t, lethectl(t, "redis", "index-legacy", "--inventory", ref, "--store", "qdrant", "--progress", progress), exitNotFound)
	wantCode(t, lethectl(t, "redis", "index-legacy", "--store", "redis"), exitUsage)
}
