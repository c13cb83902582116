package redisstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
)

// An index_only store erases and verifies through the index alone: it deletes every
// listed key of the subject, leaves unlisted (legacy) keys alone, keeps bystanders, and
// sends no SCAN to the server.
func TestIndexOnly(t *testing.T) {
	c := realRedis(t)
	ctx := context.Background()
	st := refStore(t, "redis")
	st.Locators = st.Locators.With("index_only", true)
	victim, bystander := deletiontest.NewSubject("acme", "cust-1"), deletiontest.NewSubject("acme", "cust-10")
	seed(t, c, victim, 4, nil)
	keep := seed(t, c, bystander, 4, []string{"session", "cache"})
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	store := redisstore.New(c)
	res, err := store.Erase(ctx, st, victim)
	if err != nil {
		t.Fatal(err)
	}
	// The index lists the even-numbered keys: 2 of 4 per kind, for session and cache.
	if res.Deleted() != 4 {
		t.Errorf("deleted %d keys, want the 4 indexed ones", res.Deleted())
	}
	v, err := store.Verify(ctx, st, victim)
	if err != nil || v.Remaining != 0 || v.Method != redisstore.VerifyIndexMethod {
		t.Errorf("Verify = %+v, %v", v, err)
	}
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stats, "cmdstat_scan:") {
		t.Errorf("index_only store scanned the keyspace:\n%s", stats)
	}
	if got := countKeys(t, c, bystander, []string{"session", "cache"}); got != keep {
		t.Errorf("bystander keeps %d of %d keys", got, keep)
	}
	// The unlisted legacy keys are still there: the documented price of index_only.
	if got := countKeys(t, c, victim, []string{"session", "cache"}); got != 4 {
		t.Errorf("%d unlisted keys of the victim, want 4 left", got)
	}
}
