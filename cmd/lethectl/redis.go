package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
)

var redisIndexLegacyCmd = &command{
	name:    "redis index-legacy",
	args:    "--inventory FILE --store NAME --progress FILE",
	summary: "list legacy Redis keys in the per-subject index sets, so the store can run index_only",
	help: `Scans the Redis that LETHE_REDIS_ADDRS names (LETHE_REDIS_USERNAME, LETHE_REDIS_PASSWORD,
LETHE_REDIS_TLS as for the deleter; the user also needs SADD) once per key template of the
inventory store, for every tenant and subject, and adds every key a template covers to the
index set the store's index template names for that key's subject. It uses SCAN (never
KEYS) with --count keys per call, adds each page with pipelined SADDs, and saves its cursor
to --progress after every page: run it again with the same file to resume, and it stops by
itself after --max-keys keys. When it prints "done", every key written before the scan
began is indexed, and the store can set index_only: true, provided the application indexes
every key it writes from then on (redisstore.Index).`,
	example: `lethectl redis index-legacy --inventory deploy/inventory.yaml --store redis --progress redis.progress
lethectl redis index-legacy --inventory deploy/inventory.yaml --store langgraph --progress lg.progress --max-keys 100000`,
	exits: "0 scanned (done or stopped at --max-keys); 1 Redis error; 2 usage; 3 no such file or store.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		invFile := fs.String("inventory", "", "inventory file")
		store := fs.String("store", "", "inventory store of kind redis")
		progress := fs.String("progress", "", "file holding the scan's progress (created when missing)")
		count := fs.Int64("count", 1000, "COUNT hint of each SCAN call")
		maxKeys := fs.Int64("max-keys", 0, "stop after indexing this many keys in all runs (0: no limit)")
		return func(ctx context.Context, args []string) error {
			if len(args) != 0 || *invFile == "" || *store == "" || *progress == "" {
				return usageErrorf("--inventory, --store and --progress are required, and no arguments")
			}
			return c.redisIndexLegacy(ctx, *invFile, *store, *progress, *count, *maxKeys)
		}
	},
}

func init() {
	commands = append(commands, redisIndexLegacyCmd)
	groups["redis"] = "Redis store maintenance"
}

func (c *cli) redisIndexLegacy(ctx context.Context, file, name, progress string, count, maxKeys int64) error {
	inv, err := inventory.Load(file)
	if errors.Is(err, fs.ErrNotExist) {
		return withCode(exitNotFound, err)
	}
	if err != nil {
		return err
	}
	st, ok := inv.Entry(name)
	if !ok || st.Kind != redisstore.Kind {
		return withCode(exitNotFound, fmt.Errorf("inventory %s has no store %q of kind %s", inv.Version, name, redisstore.Kind))
	}
	prog, err := redisstore.LoadLegacyProgress(progress)
	if err != nil {
		return err
	}
	if prog.Done {
		fmt.Fprintf(c.stdout, "done: %d keys indexed (progress file %s says the scan finished)\n", prog.Indexed, progress)
		return nil
	}
	client, err := redisstore.ClientFromEnv(nil)
	if err != nil {
		return err
	}
	defer client.Close()
	prog, skipped, err := redisstore.IndexLegacy(ctx, client, st, prog, redisstore.LegacyOptions{
		Count: count, MaxKeys: maxKeys,
		Save: func(p redisstore.LegacyProgress) error { return redisstore.SaveLegacyProgress(progress, p) },
		Log:  func(format string, a ...any) { fmt.Fprintf(c.stderr, format+"\n", a...) },
	})
	if err != nil {
		return err
	}
	if skipped > 0 {
		fmt.Fprintf(c.stdout, "%d keys lack a value the index template needs and stay unindexed: keep index_only off unless they expire\n", skipped)
	}
	if !prog.Done {
		fmt.Fprintf(c.stdout, "stopped: %d keys indexed; run again with --progress %s to resume\n", prog.Indexed, progress)
		return nil
	}
	fmt.Fprintf(c.stdout, "done: %d keys indexed\n", prog.Indexed)
	return nil
}
