package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// kindsOf are the key prefixes each reference store holds; the fixture writes all of them
// for every subject, so each test also proves the other store's keys survive.
var kindsOf = map[string][]string{
	"redis":     {"session", "cache"},
	"langgraph": {"graph"},
}

var allKinds = []string{"session", "cache", "graph"}

func refStore(t testing.TB, name string) inventory.Entry {
	t.Helper()
	st, ok := inventory.Reference().Entry(name)
	if !ok {
		t.Fatalf("reference inventory has no store %q", name)
	}
	return st
}

// seedKey is the fixture's own rendering of the reference key layout
// "<kind>:{tenant}:{subject}:<i>", identifiers encoded per the package contract.
func seedKey(kind string, s deletion.Subject, i int) string {
	return fmt.Sprintf("%s:%s:%s:%d", kind, redisstore.KeyPart(s.Tenant), redisstore.KeyPart(s.ID), i)
}

func indexKey(s deletion.Subject) string {
	return "idx:" + redisstore.KeyPart(s.Tenant) + ":" + redisstore.KeyPart(s.ID)
}

// decodePart reverses KeyPart independently of the package.
var decodePart = strings.NewReplacer("%3A", ":", "%25", "%").Replace

// seed writes n keys of every kind for s and lists the even-numbered ones in the subject's
// index (the odd ones are legacy keys no index knows). It returns how many keys of the
// kinds in count it wrote.
func seed(t testing.TB, c redis.UniversalClient, s deletion.Subject, n int, count []string) int {
	t.Helper()
	ctx := context.Background()
	pipe := c.Pipeline()
	want := 0
	for _, kind := range allKinds {
		for i := range n {
			k := seedKey(kind, s, i)
			pipe.Set(ctx, k, "personal data", 0)
			if i%2 == 0 {
				pipe.SAdd(ctx, indexKey(s), k)
			}
			if slices.Contains(count, kind) {
				want++
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("seed: %v", err)
	}
	return want
}

// countKeys scans the whole keyspace and parses every key exactly, counting the keys of s
// whose kind is in kinds.
func countKeys(t testing.TB, c redis.UniversalClient, s deletion.Subject, kinds []string) int {
	t.Helper()
	seen := map[string]bool{}
	for _, k := range allKeys(t, c) {
		parts := strings.Split(k, ":")
		if len(parts) == 4 && slices.Contains(kinds, parts[0]) &&
			decodePart(parts[1]) == s.Tenant && decodePart(parts[2]) == s.ID {
			seen[k] = true
		}
	}
	return len(seen)
}

// allKeys returns every key of every primary (with SCAN's possible duplicates).
func allKeys(t testing.TB, c redis.UniversalClient) []string {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var out []string
	scanNode := func(ctx context.Context, n *redis.Client) error {
		iter := n.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			out = append(out, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	switch c := c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scanNode)
	case *redis.Client:
		err = scanNode(ctx, c)
	default:
		t.Fatalf("allKeys: unsupported client %T", c)
	}
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	return out
}

// indexMembers returns the members of the subject's index of the given kinds, sorted.
func indexMembers(t testing.TB, c redis.UniversalClient, s deletion.Subject, kinds ...string) []string {
	t.Helper()
	ms, err := c.SMembers(context.Background(), indexKey(s)).Result()
	if err != nil {
		t.Fatalf("smembers: %v", err)
	}
	var out []string
	for _, m := range ms {
		if slices.Contains(kinds, strings.SplitN(m, ":", 2)[0]) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// fixture binds the conformance suite to store name over c; reset empties the backend.
func fixture(c redis.UniversalClient, name string, reset func(t *testing.T)) func(t *testing.T) deletiontest.Fixture {
	return func(t *testing.T) deletiontest.Fixture {
		reset(t)
		return deletiontest.Fixture{
			Impl:  redisstore.New(c),
			Store: refStore(t, name),
			Seed: func(t *testing.T, s deletion.Subject, n int) int {
				return seed(t, c, s, n, kindsOf[name])
			},
			Count: func(t *testing.T, s deletion.Subject) int {
				return countKeys(t, c, s, kindsOf[name])
			},
			Unreadable: unreadableIndex(c),
			Down: func(t *testing.T) deletion.Store {
				down := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), MaxRetries: -1})
				t.Cleanup(func() { down.Close() })
				return redisstore.New(down)
			},
		}
	}
}

func flushAll(c redis.UniversalClient) func(t *testing.T) {
	return func(t *testing.T) {
		if err := c.FlushAll(context.Background()).Err(); err != nil {
			t.Fatalf("flushall: %v", err)
		}
	}
}
