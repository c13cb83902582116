package redisstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// TestValidateRequiresTenant: a key or index template without {tenant} names keys that
// tenants share, so it is refused with a permanent error naming the store, the field and
// the template.
func TestValidateRequiresTenant(t *testing.T) {
	for _, tc := range []struct {
		name     string
		locators inventory.Locators
		want     string
	}{
		{"langchain default", inventory.Locators{"keys": []string{"message_store:{session}"}},
			`store "chat": locators.keys: template "message_store:{session}" names no {tenant}`},
		{"langgraph default", inventory.Locators{"keys": []string{"checkpoint:{session}:*"}},
			`locators.keys: template "checkpoint:{session}:*" names no {tenant}`},
		{"one of several", inventory.Locators{"keys": []string{"s:{tenant}:{subject}:*", "cache:{subject_hash}"}},
			`locators.keys: template "cache:{subject_hash}" names no {tenant}`},
		{"index", inventory.Locators{"keys": []string{"s:{tenant}:{subject}:*"}, "index": "idx:{subject}"},
			`locators.index: template "idx:{subject}" names no {tenant}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := redisstore.New(nil).Validate(inventory.Entry{Name: "chat", Kind: redisstore.Kind, Locators: tc.locators})
			if err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want a permanent error with %q", err, tc.want)
			}
			st := inventory.Entry{Name: "chat", Kind: redisstore.Kind, Locators: tc.locators}
			if _, err := redisstore.New(miniRedis(t)).Erase(context.Background(), st, deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}); !retry.IsPermanent(err) {
				t.Errorf("tenant Erase over the template = %v, want a permanent error", err)
			}
		})
	}
}

// TestCrossTenant runs the cross-tenant checks over one redis-server that every tenant
// shares, for both reference stores (whose keys hold the tenant).
func TestCrossTenant(t *testing.T) {
	c := realRedis(t)
	for _, name := range []string{"redis", "langgraph"} {
		t.Run(name, func(t *testing.T) { deletiontest.CrossTenant(t, fixture(c, name, flushAll(c))(t)) })
	}
}

// TestTenantScopeMatchesTheTenantPart erases a tenant over templates whose {tenant} comes
// after other placeholders: those became wildcards that also match ':', so the glob alone
// ("hist:*:acme:*") reaches keys of other tenants whose later parts spell "acme". Only
// the keys holding acme in the template's tenant part go.
func TestTenantScopeMatchesTheTenantPart(t *testing.T) {
	backends(t, func(t *testing.T, c *redis.Client) {
		ctx := context.Background()
		st := inventory.Entry{Name: "hist", Kind: redisstore.Kind, Locators: inventory.Locators{
			"keys":  []string{"hist:{session}:{tenant}:*", "fp:{subject_hash}:{tenant}"},
			"index": "idx:{subject}:{tenant}",
		}}
		acme := []string{"hist:s1:acme:1", "hist:s1:acme:x:y", "hist:globex:acme:1", "fp:h1:acme"}
		other := []string{
			"hist:s1:globex:1",
			"hist:s1:globex:acme:1", // session s1 of globex, suffix "acme:1"
			"hist:acme:globex:1",    // session "acme" of globex
			"hist:s1:acme-eu:1",
			"fp:h1:globex",
			"fp:x:globex:acme", // no template has this layout
			"idx:acme:globex",
		}
		for _, k := range slices.Concat(acme, other) {
			if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.SAdd(ctx, "idx:u1:acme", "hist:s1:globex:acme:1", "hist:s1:acme:1").Err(); err != nil {
			t.Fatal(err)
		}
		store := redisstore.New(c)
		tenant := deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}
		if n, err := store.Count(ctx, st, tenant); err != nil || deletion.Total(n) != int64(len(acme)) {
			t.Errorf("Count = %v, %v; want the tenant's %d keys", n, err, len(acme))
		}
		res, err := store.Erase(ctx, st, tenant)
		if err != nil {
			t.Fatal(err)
		}
		if res.Deleted() != int64(len(acme)) {
			t.Errorf("Erase deleted %d keys, want the tenant's %d", res.Deleted(), len(acme))
		}
		if v, err := store.Verify(ctx, st, tenant); err != nil || !v.Clean() {
			t.Errorf("Verify = %+v, %v; want clean", v, err)
		}
		left, err := c.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		want := append(slices.Clone(other), "idx:u1:acme")
		slices.Sort(left)
		slices.Sort(want)
		if !slices.Equal(left, want) {
			t.Errorf("keys left %q, want %q", left, want)
		}
		if ms, _ := c.SMembers(ctx, "idx:u1:acme").Result(); !slices.Equal(ms, []string{"hist:s1:globex:acme:1"}) {
			t.Errorf("index members left %q, want only the other tenant's key", ms)
		}
	})
}
