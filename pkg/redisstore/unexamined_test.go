package redisstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	"github.com/lethe-erasure/lethe/pkg/worker/workertest"
)

// unreadableIndex replaces the subject's index set by a string: a key under the store's
// index template that the store cannot read.
func unreadableIndex(c redis.UniversalClient) func(t testing.TB, s deletion.Subject) {
	return func(t testing.TB, s deletion.Subject) {
		t.Helper()
		if err := c.Set(context.Background(), indexKey(s), "not a set", 0).Err(); err != nil {
			t.Fatalf("set index key: %v", err)
		}
	}
}

// noIdentifierIn fails when an unexamined item names the raw subject id.
func noIdentifierIn(t *testing.T, v event.Verification, s deletion.Subject) {
	t.Helper()
	for _, it := range v.UnexaminedItems {
		if strings.Contains(it, s.ID) {
			t.Errorf("unexamined item %q holds the raw identifier", it)
		}
	}
}

// An index key that is not a set is unexamined, not zero: Erase still scans and deletes
// every key of the subject, leaves the index key alone, and Verify names it, so the store
// reports FAILED.
func TestIndexOfWrongTypeIsUnexamined(t *testing.T) {
	backends(t, func(t *testing.T, c *redis.Client) {
		ctx := context.Background()
		st := refStore(t, "redis")
		s, bystander := deletiontest.NewSubject("acme", secretID), deletiontest.NewSubject("acme", secretID+"0")
		want := seed(t, c, s, 2, kindsOf["redis"])
		keep := seed(t, c, bystander, 2, kindsOf["redis"])
		unreadableIndex(c)(t, s)
		store := redisstore.New(c)
		res, err := store.Erase(ctx, st, s)
		if err != nil {
			t.Fatalf("Erase with a string index = %v, want the scan to erase", err)
		}
		if res.Deleted() != int64(want) {
			t.Errorf("deleted %d, want %d", res.Deleted(), want)
		}
		if got := countKeys(t, c, s, kindsOf["redis"]); got != 0 {
			t.Errorf("%d keys of the subject left", got)
		}
		if typ := c.Type(ctx, indexKey(s)).Val(); typ != "string" {
			t.Errorf("index key now has type %q, want the string left alone", typ)
		}
		v, err := store.Verify(ctx, st, s)
		if err != nil {
			t.Fatal(err)
		}
		wantItems := []string{"idx:acme:{subject}: the key is not a set (WRONGTYPE), its members are unknown"}
		if v.Remaining != 0 || v.Unexamined != 1 || !slices.Equal(v.UnexaminedItems, wantItems) {
			t.Errorf("Verify = %+v, want 0 remaining, 1 unexamined %q", v, wantItems)
		}
		if got := deletion.StatusOf(res, v); got != event.StatusFailed {
			t.Errorf("status %s, want FAILED", got)
		}
		noIdentifierIn(t, v, s)
		if got := countKeys(t, c, bystander, kindsOf["redis"]); got != keep {
			t.Errorf("bystander: %d keys left of %d", got, keep)
		}
		if v, err := store.Verify(ctx, st, bystander); err != nil || v.Remaining != int64(keep) || v.Unexamined != 0 {
			t.Errorf("Verify of the bystander = %+v, %v; want %d remaining, nothing unexamined", v, err, keep)
		}
	})
}

// In an index_only store the index is the only record of the subject's keys: when it is
// not a set, the keys are unknown, and Verify says so.
func TestIndexOnlyWrongTypeIsUnexamined(t *testing.T) {
	c := realRedis(t)
	ctx := context.Background()
	st := refStore(t, "redis")
	st.Locators = st.Locators.With("index_only", true)
	s := deletiontest.NewSubject("acme", secretID)
	seed(t, c, s, 2, nil)
	unreadableIndex(c)(t, s)
	store := redisstore.New(c)
	res, err := store.Erase(ctx, st, s)
	if err != nil || res.Deleted() != 0 {
		t.Fatalf("Erase = %+v, %v; want nothing deleted and no error", res, err)
	}
	v, err := store.Verify(ctx, st, s)
	if err != nil {
		t.Fatal(err)
	}
	want := "idx:acme:{subject}: the key is not a set (WRONGTYPE); the store is index_only, so the subject's keys are unknown"
	if v.Unexamined != 1 || !slices.Equal(v.UnexaminedItems, []string{want}) || v.Method != redisstore.VerifyIndexMethod {
		t.Errorf("Verify = %+v, want 1 unexamined %q", v, want)
	}
	noIdentifierIn(t, v, s)
}

// A tenant erasure reads every index key of the tenant whatever its type: the ones that
// are not sets are counted unexamined, a longer key under the same prefix is data, not an
// index.
func TestTenantScopeWrongTypeIndex(t *testing.T) {
	backends(t, func(t *testing.T, c *redis.Client) {
		ctx := context.Background()
		st := refStore(t, "redis")
		a, b, x := deletiontest.NewSubject("acme", "a"), deletiontest.NewSubject("acme", "b"), deletiontest.NewSubject("acme", "x")
		seed(t, c, a, 2, nil)
		unreadableIndex(c)(t, b)
		unreadableIndex(c)(t, x)
		c.Set(ctx, "idx:acme:a:extra", "not an index", 0)
		tenant := deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}
		store := redisstore.New(c)
		if _, err := store.Erase(ctx, st, tenant); err != nil {
			t.Fatal(err)
		}
		v, err := store.Verify(ctx, st, tenant)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"idx:acme:{subject}: 2 keys are not sets (WRONGTYPE), their members are unknown"}
		if v.Remaining != 0 || v.Unexamined != 2 || !slices.Equal(v.UnexaminedItems, want) {
			t.Errorf("Verify tenant = %+v, want 0 remaining, 2 unexamined %q", v, want)
		}
	})
}

// A Ring shard that go-redis marked down is neither erased nor scanned: Verify reports it
// unexamined by name.
func TestRingShardDownIsUnexamined(t *testing.T) {
	ctx := context.Background()
	addrs := map[string]string{"shard-a": testenv.Redis(t), "shard-b": testenv.Redis(t)}
	ring := redis.NewRing(&redis.RingOptions{
		Addrs: addrs, HeartbeatFrequency: 20 * time.Millisecond, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
	})
	t.Cleanup(func() { ring.Close() })
	st := refStore(t, "redis")
	s := deletiontest.NewSubject("acme", secretID)
	store := redisstore.New(ring)
	if v, err := store.Verify(ctx, st, s); err != nil || !v.Clean() {
		t.Fatalf("Verify with every shard up = %+v, %v", v, err)
	}
	b := redis.NewClient(&redis.Options{Addr: addrs["shard-b"]})
	defer b.Close()
	b.Set(ctx, seedKey("session", s, 0), "personal data", 0)
	b.Do(ctx, "SHUTDOWN", "NOSAVE") // the reply is the closed connection
	waitFor(t, "shard-b marked down", func() bool { return len(ring.GetShardClients()) == 1 })
	if _, err := store.Erase(ctx, st, s); err != nil {
		t.Fatal(err)
	}
	v, err := store.Verify(ctx, st, s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"shard shard-b: down, its keys were not scanned"}
	if v.Unexamined != 1 || !slices.Equal(v.UnexaminedItems, want) {
		t.Errorf("Verify with a shard down = %+v, want 1 unexamined %q", v, want)
	}
	st.Locators = st.Locators.With("index_only", true) // reads only the index, which the ring now routes elsewhere
	if v, err := store.Verify(ctx, st, s); err != nil || v.Unexamined != 1 || !slices.Equal(v.UnexaminedItems, want) {
		t.Errorf("index_only Verify with a shard down = %+v, %v; want 1 unexamined %q", v, err, want)
	}
}

// Through the deleter runtime: a store holding an unreadable index key reports FAILED on
// erasure.store.done, with the item named in the error and the verification, and no
// identifier in either.
func TestWorkerReportsUnexaminedIndex(t *testing.T) {
	c := realRedis(t)
	s := deletiontest.NewSubject("acme", secretID)
	seed(t, c, s, 2, nil)
	unreadableIndex(c)(t, s)
	got := workertest.Reports(t, inventory.Reference(), redisstore.Kind, redisstore.New(c), s)
	for _, name := range []string{"redis", "langgraph"} {
		d := got[name]
		if d.Status != event.StatusFailed || d.Verification.Unexamined != 1 ||
			!strings.Contains(d.Error, "1 unexamined (idx:acme:{subject}: the key is not a set") {
			t.Errorf("%s reported %s, %+v, error %q; want FAILED naming the index key", name, d.Status, d.Verification, d.Error)
		}
		if d.Deleted() == 0 {
			t.Errorf("%s deleted nothing; the scan should still erase the subject's keys", name)
		}
	}
}
