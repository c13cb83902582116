package redisstore_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
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

// An index_only store's batch reads every subject's index in shared pipelines, and still
// reports for each subject what Find and Verify report for it alone: its own listed keys
// before the erase, nothing after it, and an index key that is not a set as unexamined
// (never as zero). It sends no SCAN.
func TestIndexOnlyBatchReadsAsEachAlone(t *testing.T) {
	c := realRedis(t)
	ctx := context.Background()
	st := refStore(t, "redis")
	st.Locators = st.Locators.With("index_only", true)
	var batch []deletion.Subject
	for i := range 5 {
		s := deletiontest.NewSubject("acme", fmt.Sprintf("batch-%d", i))
		seed(t, c, s, 2+i, nil)
		batch = append(batch, s)
	}
	broken := deletiontest.NewSubject("acme", "broken-index")
	unreadableIndex(c)(t, broken)
	batch = append(batch, broken, deletiontest.NewSubject("acme", "never-seen"))
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	store := redisstore.New(c)
	same := func(stage string) {
		t.Helper()
		found, ferrs := store.CountBatch(ctx, st, batch)
		vs, verrs := store.VerifyBatch(ctx, st, batch)
		for i, s := range batch {
			one, err := store.Count(ctx, st, s)
			if ferrs[i] != nil || err != nil || !reflect.DeepEqual(found[i], one) {
				t.Errorf("%s, subject %d: CountBatch %v (%v), Count %v (%v)", stage, i, found[i], ferrs[i], one, err)
			}
			v, err := store.Verify(ctx, st, s)
			if verrs[i] != nil || err != nil || !reflect.DeepEqual(vs[i], v) {
				t.Errorf("%s, subject %d: VerifyBatch %+v (%v), Verify %+v (%v)", stage, i, vs[i], verrs[i], v, err)
			}
		}
	}
	same("before the erase")
	found, _ := store.CountBatch(ctx, st, batch)
	vs, _ := store.VerifyBatch(ctx, st, batch)
	// The index lists the even-numbered keys of each kind; the store holds two (session, cache).
	for i := range 5 {
		if want, got := int64(2*((2+i+1)/2)), (deletion.Result{Locations: found[i]}).Deleted(); got != want || vs[i].Remaining != want {
			t.Errorf("subject %d: found %d, %d remaining, want %d listed keys", i, got, vs[i].Remaining, want)
		}
	}
	if v := vs[5]; v.Unexamined != 1 || v.Clean() {
		t.Errorf("a subject whose index is not a set verified %+v, want one unexamined item", v)
	}
	if _, errs := store.EraseBatch(ctx, st, batch); errs[0] != nil {
		t.Fatal(errs[0])
	}
	same("after the erase")
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stats, "cmdstat_scan:") {
		t.Errorf("index_only batch scanned the keyspace:\n%s", stats)
	}
}
