package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Index lists keys in the per-subject index of st (SADD), so that Erase finds them without
// a scan. Applications call it when they write keys of s, ideally in the same pipeline.
// Every key must be one that st's patterns cover for s (build keys with Key): a key they
// do not cover would never be erased through the index, so Index refuses it with a
// permanent error and writes nothing. When st has no index, Index does nothing. Adding a
// key twice is harmless.
func Index(ctx context.Context, client redis.UniversalClient, st inventory.Entry, s deletion.Subject, keys ...string) error {
	l, err := LocatorsOf(st)
	if err != nil {
		return err
	}
	if l.Index == "" || len(keys) == 0 {
		return nil
	}
	if s.TenantScope() {
		return retry.Permanent(errors.New("redisstore: index: a tenant-scope subject has no index"))
	}
	p, err := newPlan(st, s)
	if err != nil {
		return err
	}
	members := make([]any, len(keys))
	for i, k := range keys {
		if p.match(k) < 0 {
			return retry.Permanent(fmt.Errorf("redisstore: index: key %d is not covered by the key templates of store %q", i, st.Name))
		}
		members[i] = k
	}
	pipe := client.Pipeline()
	for _, idx := range p.indexes {
		pipe.SAdd(ctx, idx, members...)
	}
	if all, err := pipe.Exec(ctx); err != nil {
		return classify("add to index", cause(all, err))
	}
	return nil
}
