package bench

import (
	"context"
	"fmt"

	"github.com/qdrant/go-client/qdrant"
	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
)

// IndexOnlyRedis erases c's keys the way redisstore would if the application's index were
// trusted as complete: read the subject's index set, UNLINK its members and the set in one
// MULTI, then verify with EXISTS on those names. It costs in proportion to the footprint;
// the benchmark reports it as the projection of that change beside the adapter's figure.
func IndexOnlyRedis(ctx context.Context, rc redis.UniversalClient, inv *inventory.Inventory, c Customer) (int, error) {
	idx := redisstore.Key(inv.OfKinds(inventory.KindRedis)[0].Locators.Index, inventory.Vars{Tenant: c.Tenant, Subject: c.ID}, "")
	keys, err := rc.SMembers(ctx, idx).Result()
	if err != nil {
		return 0, fmt.Errorf("index only: read index: %w", err)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	pipe := rc.TxPipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Unlink(ctx, k)
	}
	pipe.Unlink(ctx, idx)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("index only: unlink: %w", err)
	}
	deleted := 0
	for _, c := range cmds {
		deleted += int(c.Val())
	}
	left, err := rc.Exists(ctx, append(keys, idx)...).Result()
	if err != nil {
		return deleted, fmt.Errorf("index only: verify: %w", err)
	}
	if left != 0 {
		return deleted, fmt.Errorf("index only: %d keys remain", left)
	}
	return deleted, nil
}

// dropPayloadIndexes removes the keyword indexes of coll, leaving it as the seeds' pipeline
// had it: no payload index, so every filter scans.
func dropPayloadIndexes(ctx context.Context, q *qdrant.Client, inv *inventory.Inventory, coll string) error {
	l := inv.OfKinds(inventory.KindQdrant)[0].Locators
	for _, f := range append(append(append([]string{}, l.SubjectFields...), l.HashFields...), l.SessionFields...) {
		if _, err := q.DeleteFieldIndex(ctx, &qdrant.DeleteFieldIndexCollection{CollectionName: coll, FieldName: f, Wait: qdrant.PtrOf(true)}); err != nil {
			return fmt.Errorf("drop payload index: %w", err)
		}
	}
	return nil
}
