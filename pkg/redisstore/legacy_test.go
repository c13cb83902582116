package redisstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
)

// IndexLegacy, stopped every few keys and resumed from its saved progress, lists every
// legacy key of every subject in that subject's index, after which the store runs
// index_only and erases all of a subject's keys, bystanders untouched.
func TestIndexLegacyThenIndexOnly(t *testing.T) {
	c := realRedis(t)
	ctx := context.Background()
	st := refStore(t, "redis")
	subjects := []string{"cust-1", "cust-10", "x:y", "a*", "[ab]", "50%"}
	for _, id := range subjects {
		seed(t, c, deletiontest.NewSubject("acme", id), 6, nil)
	}
	seed(t, c, deletiontest.NewSubject("globex", "cust-1"), 6, nil)
	path := filepath.Join(t.TempDir(), "progress.json")
	runs := 0
	for {
		prog, err := redisstore.LoadLegacyProgress(path)
		if err != nil {
			t.Fatal(err)
		}
		if prog.Done {
			break
		}
		if runs++; runs > 100 {
			t.Fatal("IndexLegacy does not finish")
		}
		limit := prog.Indexed + 5
		if _, _, err := redisstore.IndexLegacy(ctx, c, st, prog, redisstore.LegacyOptions{
			Count: 3, MaxKeys: limit, Save: func(p redisstore.LegacyProgress) error { return redisstore.SaveLegacyProgress(path, p) },
		}); err != nil {
			t.Fatal(err)
		}
	}
	if runs < 3 {
		t.Errorf("finished in %d runs; the limit should have stopped it earlier", runs)
	}
	only := st
	only.Locators = st.Locators.With("index_only", true)
	store := redisstore.New(c)
	victim := deletiontest.NewSubject("acme", "x:y")
	res, err := store.Erase(ctx, only, victim)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{"session", "cache"}
	if res.Deleted() != 12 {
		t.Errorf("index_only erase deleted %d keys, want all 12 session and cache keys", res.Deleted())
	}
	if got := countKeys(t, c, victim, kinds); got != 0 {
		t.Errorf("%d keys of the victim left", got)
	}
	for _, id := range subjects {
		if id == victim.ID {
			continue
		}
		if got := countKeys(t, c, deletiontest.NewSubject("acme", id), kinds); got != 12 {
			t.Errorf("bystander %q keeps %d of 12 keys", id, got)
		}
	}
	if got := countKeys(t, c, deletiontest.NewSubject("globex", "cust-1"), kinds); got != 12 {
		t.Errorf("other tenant keeps %d of 12 keys", got)
	}
}
