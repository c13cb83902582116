package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// TestDiscover seeds the reference layout (covered) beside key families no template
// matches: discovery lists every uncovered family that looks personal, no covered one and
// no harmless one, and names no key or value.
func TestDiscover(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
	t.Cleanup(func() { c.Close() })
	raw := []string{"cust-77", "jane.doe@example.com", "u4242", "+44 20 7946 0958"}
	for i := range 30 {
		s := deletion.Subject{Tenant: "acme", ID: fmt.Sprintf("cust-%d", i)}
		for _, k := range []string{"session", "cache", "graph"} {
			c.Set(ctx, fmt.Sprintf("%s:acme:%s:1", k, redisstore.KeyPart(s.ID)), "email jane.doe@example.com", 0)
		}
		c.SAdd(ctx, "idx:acme:"+s.ID, "session:acme:"+s.ID+":1")
	}
	c.Set(ctx, "customer:acme:cust-77", "plain", 0)                              // uncovered, named
	c.HSet(ctx, "profile:acme:u4242", "email", "x", "plan", "pro")               // uncovered, field
	c.Set(ctx, "support:globex:t-17:msg", "call me on +44 20 7946 0958", 0)      // uncovered, value
	c.Set(ctx, "chat:acme:u4242", `{"meta":{"user_id":"u4242"},"text":"hi"}`, 0) // uncovered, json field
	c.Set(ctx, "counter:requests", "17", 0)                                      // harmless
	c.HSet(ctx, "flags:acme", "dark_mode", "on")                                 // harmless
	store := redisstore.New(c)
	got, err := store.Discover(ctx, inventory.Reference(), deletion.DiscoverOptions{Tenants: []string{"acme", "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"chat:{tenant}:{id}":         "values hold identity-like fields",
		"customer:{tenant}:{id}":     "key names customer",
		"profile:{tenant}:{id}":      "values hold identity-like fields",
		"support:{tenant}:{id}:{id}": "values match personal-data patterns",
	}
	if len(got) != len(want) {
		t.Errorf("discovered %+v, want %d families", got, len(want))
	}
	for _, u := range got {
		if w, ok := want[u.Location]; !ok || !strings.Contains(u.Reason, w) || u.Kind != redisstore.Kind || u.Count != 1 {
			t.Errorf("discovered %+v, want one of %v", u, want)
		}
		for _, v := range raw {
			if strings.Contains(fmt.Sprint(u), v) {
				t.Errorf("report %+v holds a raw value", u)
			}
		}
	}
}
