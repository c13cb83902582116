package redisstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

func realRedis(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
	t.Cleanup(func() { c.Close() })
	return c
}

func miniRedis(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConformance(t *testing.T) {
	c := realRedis(t)
	for _, name := range []string{"redis", "langgraph"} {
		t.Run(name, func(t *testing.T) { deletiontest.Run(t, fixture(c, name, flushAll(c))) })
	}
}

func TestConformanceMiniredis(t *testing.T) {
	c := miniRedis(t)
	for _, name := range []string{"redis", "langgraph"} {
		t.Run(name, func(t *testing.T) { deletiontest.Run(t, fixture(c, name, flushAll(c))) })
	}
}

// backends runs fn against a real redis-server and against miniredis.
func backends(t *testing.T, fn func(t *testing.T, c *redis.Client)) {
	t.Run("redis-server", func(t *testing.T) { fn(t, realRedis(t)) })
	t.Run("miniredis", func(t *testing.T) { fn(t, miniRedis(t)) })
}

func TestSharedIndexKeepsOtherStore(t *testing.T) {
	backends(t, func(t *testing.T, c *redis.Client) {
		ctx := context.Background()
		rs, lg := refStore(t, "redis"), refStore(t, "langgraph")
		s := deletiontest.NewSubject("acme", "x:y")
		seed(t, c, s, 4, nil)
		wantGraph := indexMembers(t, c, s, "graph")
		if len(wantGraph) != 2 {
			t.Fatalf("seeded index lists %d graph keys, want 2", len(wantGraph))
		}

		res, err := redisstore.New(c).Erase(ctx, rs, s)
		if err != nil {
			t.Fatal(err)
		}
		if res.Deleted() != 8 {
			t.Errorf("erasing redis deleted %d keys, want 8", res.Deleted())
		}
		if got := countKeys(t, c, s, kindsOf["redis"]); got != 0 {
			t.Errorf("%d session/cache keys remain", got)
		}
		if got := countKeys(t, c, s, kindsOf["langgraph"]); got != 4 {
			t.Errorf("graph keys: %d left of 4", got)
		}
		if got := indexMembers(t, c, s, "graph"); !slices.Equal(got, wantGraph) {
			t.Errorf("index graph members after erasing redis = %q, want %q", got, wantGraph)
		}
		if got := indexMembers(t, c, s, "session", "cache"); len(got) != 0 {
			t.Errorf("index still lists %d erased keys", len(got))
		}
		if v, err := redisstore.New(c).Verify(ctx, lg, s); err != nil || v.Remaining != 4 {
			t.Errorf("Verify langgraph = %+v, %v; want 4 remaining", v, err)
		}

		if _, err := redisstore.New(c).Erase(ctx, lg, s); err != nil {
			t.Fatal(err)
		}
		if n := c.Exists(ctx, indexKey(s)).Val(); n != 0 {
			t.Error("index set survives after both stores were erased")
		}
	})
}

func TestTenantScope(t *testing.T) {
	backends(t, func(t *testing.T, c *redis.Client) {
		ctx := context.Background()
		rs := refStore(t, "redis")
		a, b := deletiontest.NewSubject("acme", "a"), deletiontest.NewSubject("acme", "b*")
		other := deletiontest.NewSubject("acme:x", "a") // a tenant id holding the delimiter
		want := seed(t, c, a, 3, kindsOf["redis"]) + seed(t, c, b, 3, kindsOf["redis"])
		keep := seed(t, c, other, 3, kindsOf["redis"])

		tenant := deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}
		res, err := redisstore.New(c).Erase(ctx, rs, tenant)
		if err != nil {
			t.Fatal(err)
		}
		if res.Deleted() != int64(want) {
			t.Errorf("deleted %d, want %d", res.Deleted(), want)
		}
		for _, l := range res.Locations {
			if l.Location != "session:acme:{subject}:*" && l.Location != "cache:acme:{subject}:*" {
				t.Errorf("unexpected location %q", l.Location)
			}
		}
		if v, err := redisstore.New(c).Verify(ctx, rs, tenant); err != nil || v.Remaining != 0 {
			t.Errorf("Verify tenant = %+v, %v", v, err)
		}
		for _, s := range []deletion.Subject{a, b} {
			if got := countKeys(t, c, s, kindsOf["langgraph"]); got != 3 {
				t.Errorf("graph keys of the tenant: %d left of 3", got)
			}
			if got := indexMembers(t, c, s, "session", "cache"); len(got) != 0 {
				t.Errorf("index still lists %d erased keys", len(got))
			}
			if got := indexMembers(t, c, s, "graph"); len(got) != 2 {
				t.Errorf("index lists %d graph keys, want 2", len(got))
			}
		}
		if got := countKeys(t, c, other, kindsOf["redis"]); got != keep {
			t.Errorf("other tenant: %d keys left of %d", got, keep)
		}
		if got := indexMembers(t, c, other, "session", "cache"); len(got) != 4 {
			t.Errorf("other tenant's index lists %d keys, want 4", len(got))
		}
	})
}

// TestSessionAndHashTemplates covers {session} (expanded once per session, skipped when
// there is none) and {subject_hash} templates, and a store without an index.
func TestSessionAndHashTemplates(t *testing.T) {
	backends(t, func(t *testing.T, c *redis.Client) {
		ctx := context.Background()
		st := inventory.Entry{Name: "hist", Kind: redisstore.Kind, Locators: inventory.Locators{
			"keys": []string{"hist:{tenant}:{session}:*", "fp:{tenant}:{subject_hash}"},
		}}
		s := deletiontest.NewSubject("acme", "c")
		s.Sessions = []string{"s:1", "s*", "s:1"}
		bystander := deletiontest.NewSubject("acme", "d")
		bystander.Sessions = []string{"s", "s:1x"}
		write := func(s deletion.Subject) {
			for _, ses := range s.Sessions {
				for _, suffix := range []string{"0", "1:turn"} {
					c.Set(ctx, redisstore.Key(keysOf(t, st)[0], s.Vars(ses), suffix), "q", 0)
				}
			}
			c.Set(ctx, redisstore.Key(keysOf(t, st)[1], s.Vars(""), ""), "q", 0)
		}
		write(s)
		write(bystander)
		before := c.DBSize(ctx).Val()

		res, err := redisstore.New(c).Erase(ctx, st, s)
		if err != nil {
			t.Fatal(err)
		}
		if got := []int64{res.Locations[0].Deleted, res.Locations[1].Deleted}; !slices.Equal(got, []int64{4, 1}) {
			t.Errorf("deleted per template = %v, want [4 1]", got)
		}
		if after := c.DBSize(ctx).Val(); before-after != 5 {
			t.Errorf("%d keys disappeared, want 5", before-after)
		}
		if v, err := redisstore.New(c).Verify(ctx, st, bystander); err != nil || v.Remaining != 5 {
			t.Errorf("Verify bystander = %+v, %v; want 5", v, err)
		}

		noSessions := s
		noSessions.Sessions = nil
		res, err = redisstore.New(c).Erase(ctx, st, noSessions)
		if err != nil || res.Deleted() != 0 {
			t.Errorf("Erase without sessions = %d, %v", res.Deleted(), err)
		}
	})
}

func TestIndexHelper(t *testing.T) {
	c := miniRedis(t)
	ctx := context.Background()
	st := refStore(t, "redis")
	s := deletiontest.NewSubject("acme", "a:b")
	k := redisstore.Key(keysOf(t, st)[0], s.Vars(""), "1")
	if k != "session:acme:a%3Ab:1" {
		t.Fatalf("Key = %q", k)
	}
	c.Set(ctx, k, "v", 0)
	if err := redisstore.Index(ctx, c, st, s, k); err != nil {
		t.Fatal(err)
	}
	if got := indexMembers(t, c, s, "session"); !slices.Equal(got, []string{k}) {
		t.Errorf("index = %q", got)
	}
	foreign := redisstore.Key(keysOf(t, st)[0], deletiontest.NewSubject("acme", "a").Vars(""), "1")
	err := redisstore.Index(ctx, c, st, s, foreign)
	if !retry.IsPermanent(err) {
		t.Errorf("Index of another subject's key = %v, want a permanent error", err)
	}
	res, err := redisstore.New(c).Erase(ctx, st, s)
	if err != nil || res.Deleted() != 1 {
		t.Errorf("Erase = %d, %v; want 1", res.Deleted(), err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		keys  []string
		index string
		ok    bool
	}{
		{[]string{"session:{tenant}:{subject}:*"}, "idx:{tenant}:{subject}", true},
		{[]string{"fp:{tenant}:{subject_hash}"}, "", true},
		{[]string{"{tenant}:{session}:x:*"}, "", true},
		{[]string{"session:{tenant}:{subject}*"}, "", false},
		{[]string{"session:{tenant}{subject}:*"}, "", false},
		{[]string{"session:{tenant}:{subject}-x:*"}, "", false},
		{[]string{"session:{tenant}:*"}, "", false},
		{[]string{"session:{tenant}:{subject}:*"}, "idx:{tenant}:{subject}*", false},
		{[]string{"session:{tenant}:{subject}:*"}, "idx:{tenant}", false},
		{[]string{"s:{subject}:{tenant}:*"}, "i:{subject}:{tenant}", true},
		{[]string{"message_store:{session}"}, "", false},
		{[]string{"session:{tenant}:{subject}:*", "cache:{subject}:*"}, "", false},
		{[]string{"session:{tenant}:{subject}:*"}, "idx:{subject}", false},
		{nil, "", false},
	} {
		st := inventory.Entry{Name: "s", Kind: redisstore.Kind, Locators: inventory.Locators{"keys": tc.keys, "index": tc.index}}
		if err := redisstore.Validate(st); (err == nil) != tc.ok {
			t.Errorf("Validate(%q, %q) = %v, want ok=%v", tc.keys, tc.index, err, tc.ok)
		}
	}
	for _, name := range []string{"redis", "langgraph"} {
		if err := redisstore.Validate(refStore(t, name)); err != nil {
			t.Errorf("reference store %s: %v", name, err)
		}
	}
	for _, tc := range []struct {
		locators inventory.Locators
		want     string
	}{
		{inventory.Locators{"key": []string{"s:{tenant}:{subject}:*"}}, `unknown field "key"`},
		{inventory.Locators{}, "locators.keys is empty"},
		{inventory.Locators{"keys": []string{"s:{user}:{subject}:*"}}, "locators.keys: template \"s:{user}:{subject}:*\" uses placeholder {user}"},
		{inventory.Locators{"keys": []string{"session:{tenant}:*"}}, "names no subject, hash or session"},
		{inventory.Locators{"keys": []string{"session:*:{subject}"}}, "only a trailing '*'"},
		{inventory.Locators{"keys": []string{"session:[ab]:{subject}"}}, "only a trailing '*'"},
		{inventory.Locators{"keys": []string{"s:{tenant}:{subject}:*"}, "index_only": true}, "locators.index_only needs locators.index"},
		{inventory.Locators{"keys": []string{"s:{tenant}:{subject}:*"}, "index": "i:{tenant}:{subject}*"}, "locators.index: template"},
	} {
		st := inventory.Entry{Name: "s", Kind: redisstore.Kind, Locators: tc.locators}
		err := redisstore.New(nil).Validate(st)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `store "s"`) {
			t.Errorf("Validate(%v) = %v, want an error naming the store and %q", tc.locators, err, tc.want)
		}
	}
	bad := inventory.Entry{Name: "s", Kind: redisstore.Kind, Locators: inventory.Locators{"keys": []string{"k:{tenant}:{subject}*"}}}
	_, err := redisstore.New(miniRedis(t)).Erase(context.Background(), bad, deletiontest.NewSubject("acme", "a"))
	if !retry.IsPermanent(err) {
		t.Errorf("Erase with an ambiguous template = %v, want a permanent error", err)
	}
}

// keysOf returns the key templates of st.
func keysOf(t *testing.T, st inventory.Entry) []string {
	t.Helper()
	var l redisstore.Locators
	if err := st.Locators.Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l.Keys
}
