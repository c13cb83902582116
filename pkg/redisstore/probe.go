package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

var _ deletion.Prober = (*Store)(nil)

// Probe counts, reading only, the keys of each key family of locs (a shape as Discover
// writes it) that belong to s: a key part a placeholder stands for, or one of the
// location's Fields (hash fields; keys of a JSON object a string holds), equals s's id or
// a session id exactly. With no Fields every field and value is compared. {tenant} is s's
// tenant; a shape without it is probed across tenants. Keys a template of inv covers are
// left out.
//
// A location is unexamined when its shape does not parse, Redis refuses to read it, a key
// cannot be read, a Ring shard is down, or lim.Items keys or lim.Time are reached with keys
// left. A tenant-scope s gives nil. Other errors fail the call, classified as Verify's.
func (r *Store) Probe(ctx context.Context, inv *inventory.Inventory, locs []deletion.Uncovered, s deletion.Subject, lim deletion.ProbeLimits) ([]deletion.Probed, error) {
	if s.TenantScope() {
		return nil, nil
	}
	if s.Tenant == "" {
		return nil, retry.Permanent(fmt.Errorf("redisstore: probe: tenant: %w", errEmpty))
	}
	lim = lim.Defaults()
	covers, err := coverGlobs(inv)
	if err != nil {
		return nil, err
	}
	owners := ownersOf(s)
	return deletion.EachProbed(locs, Kind, func(loc deletion.Uncovered) (p deletion.Probed, err error) {
		sh, err := parseLocation(loc.Location, s.Tenant)
		if err != nil {
			p.Unexamined = "cannot parse the location: " + err.Error()
			return p, nil
		}
		if p.Found, p.Unexamined, err = r.probe(ctx, sh, loc.Fields, covers, owners, lim); err != nil {
			return p, classify("probe "+loc.Location, err)
		}
		return p, nil
	})
}

// parseLocation returns the shape of a location Discover wrote for tenant: key parts of
// literal text or one placeholder each, no wildcard but a trailing '*'.
func parseLocation(loc, tenant string) (keyShape, error) {
	if loc == "" {
		return keyShape{}, errors.New("the location is empty")
	}
	body, star := strings.CutSuffix(loc, "*")
	if strings.ContainsAny(body, `*?[]\`) {
		return keyShape{}, errors.New("it holds a glob wildcard other than a trailing '*'")
	}
	parts := strings.Split(body, string(Delimiter))
	for i, p := range parts {
		if strings.ContainsAny(p, "{}") && !isPlaceholder(p) {
			return keyShape{}, errors.New("a placeholder does not fill a whole key part")
		}
		if star && i == len(parts)-1 && isPlaceholder(p) {
			return keyShape{}, errors.New("a placeholder is followed by '*'")
		}
	}
	return newShape(loc, tenant), nil
}

// probe counts the keys of shape sh that owners' identifiers fill or fields name, within
// lim, and says why the family was not examined whole ("" when it was).
func (r *Store) probe(ctx context.Context, sh keyShape, fields []string, covers []cover, owners map[string]int, lim deletion.ProbeLimits) (int64, string, error) {
	start := time.Now()
	bctx, cancel := context.WithDeadline(ctx, start.Add(lim.Time))
	defer cancel()
	var (
		mu                  sync.Mutex
		seen                = map[string]bool{}
		found, read, unread int64
		full                bool   // lim.Items keys read and another key of the family seen
		refused             string // the Redis error a read was refused with
	)
	glob := sh.glob()
	skipped, err := r.forEachPrimary(bctx, func(ctx context.Context, node redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := node.Scan(ctx, cursor, glob, scanCount).Result()
			if err != nil {
				return err
			}
			var page []string
			mu.Lock()
			for _, k := range keys {
				if seen[k] || !sh.matches(k) || covered(covers, k) {
					continue
				}
				if read >= int64(lim.Items) {
					full = true
					break
				}
				seen[k] = true
				read++
				page = append(page, k)
			}
			stop := full
			mu.Unlock()
			if len(page) > 0 {
				own, outs, err := r.readRecords(ctx, page, fields, owners)
				if err != nil {
					return err
				}
				mu.Lock()
				for j, k := range page {
					switch {
					case ownerOf(sh.idParts(k), owners) >= 0 || outs[j] == readOK && own[j] >= 0:
						found++
					case outs[j] == readUnreadable:
						unread++
					}
				}
				mu.Unlock()
			}
			if cursor = next; stop || cursor == 0 {
				return nil
			}
		}
	})
	timedOut := err != nil && ctx.Err() == nil && bctx.Err() != nil
	if err != nil && !timedOut {
		if !isPermanent(err) {
			return 0, "", err
		}
		refused = strings.Fields(strings.TrimPrefix(err.Error(), "ERR ") + " error")[0]
	}
	var why []string
	switch {
	case refused != "":
		why = append(why, "Redis refused to read it ("+refused+")")
	case timedOut:
		why = append(why, fmt.Sprintf("time bound %s reached after %d keys", lim.Time, read))
	case full:
		why = append(why, fmt.Sprintf("bound reached after %d keys", read))
	}
	if unread > 0 {
		what := "neither a hash nor a string"
		if len(fields) > 0 {
			what = "neither a hash nor a string holding a JSON object"
		}
		if unread == 1 {
			why = append(why, fmt.Sprintf("1 key is %s, its fields were not read", what))
		} else {
			what = strings.NewReplacer("a hash", "hashes", "a string", "strings").Replace(what)
			why = append(why, fmt.Sprintf("%d keys are %s, their fields were not read", unread, what))
		}
	}
	for _, name := range skipped {
		why = append(why, fmt.Sprintf("shard %s: down, its keys were not scanned", name))
	}
	return found, strings.Join(why, "; "), nil
}
