package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// LegacyProgress is where IndexLegacy stands: the key template it scans and the SCAN
// cursor of every primary (by address) for that template. It is saved after every SCAN
// page, so a run that stops (a limit, a crash) resumes where it left off.
type LegacyProgress struct {
	Store    string            `json:"store"`
	Template int               `json:"template"`
	Cursors  map[string]uint64 `json:"cursors"`
	Finished map[string]bool   `json:"finished"`
	Indexed  int64             `json:"indexed"` // keys added to an index so far, over all runs
	Done     bool              `json:"done"`
}

// LegacyOptions bound one IndexLegacy run.
type LegacyOptions struct {
	Count   int64                         // COUNT hint of each SCAN call; 0 means 1000
	MaxKeys int64                         // stop after indexing this many keys (0: no limit)
	Save    func(LegacyProgress) error    // persists the progress after every page
	Log     func(format string, a ...any) // optional progress lines (no key names)
}

// legacyMatcher parses keys of one key template into the values of its placeholders.
type legacyMatcher struct {
	re    *regexp.Regexp
	names []string // placeholder of each group
}

func newLegacyMatcher(tmpl string) *legacyMatcher {
	body, star := strings.CutSuffix(tmpl, "*")
	var b strings.Builder
	b.WriteString("^")
	m := &legacyMatcher{}
	rest := body
	for rest != "" {
		i, p := -1, ""
		for _, ph := range placeholders {
			if j := strings.Index(rest, ph); j >= 0 && (i < 0 || j < i) {
				i, p = j, ph
			}
		}
		if i < 0 {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:i]))
		b.WriteString("([^:]*)")
		m.names = append(m.names, p)
		rest = rest[i+len(p):]
	}
	if star {
		b.WriteString(".*")
	}
	b.WriteString("$")
	m.re = regexp.MustCompile(b.String())
	return m
}

// vars returns the KeyPart-encoded placeholder values of key, or false when key does not
// follow the template (or fills one placeholder with two values).
func (m *legacyMatcher) vars(key string) (inventory.Vars, bool) {
	g := m.re.FindStringSubmatch(key)
	if g == nil {
		return inventory.Vars{}, false
	}
	var v inventory.Vars
	set := func(dst *string, val string) bool {
		if *dst != "" && *dst != val {
			return false
		}
		*dst = val
		return true
	}
	for i, name := range m.names {
		ok := true
		switch name {
		case inventory.Tenant:
			ok = set(&v.Tenant, g[i+1])
		case inventory.Subject:
			ok = set(&v.Subject, g[i+1])
		case inventory.SubjectHash:
			ok = set(&v.SubjectHash, g[i+1])
		case inventory.Session:
			ok = set(&v.Session, g[i+1])
		}
		if !ok || g[i+1] == "" {
			return inventory.Vars{}, false
		}
	}
	return v, true
}

// IndexLegacy adds the keys that st's key templates cover, for every tenant and subject,
// to the per-subject index sets of st's index template, so that st can run index_only
// afterwards. It makes one SCAN per key template over every primary (never KEYS), adding
// each page's keys with pipelined SADDs before it saves the progress and reads the next
// page: resuming from a saved LegacyProgress repeats at most one page (SADD is
// idempotent). Keys whose template lacks a value the index template needs (a session-only
// key when the index names the subject) cannot be indexed and are counted in skipped. It
// stops after opts.MaxKeys keys (the progress says where) or when every template was
// scanned (Done). Errors are classified as the store's are.
func IndexLegacy(ctx context.Context, client redis.UniversalClient, st inventory.Entry, prog LegacyProgress, opts LegacyOptions) (LegacyProgress, int64, error) {
	l, err := LocatorsOf(st)
	if err != nil {
		return prog, 0, err
	}
	if l.Index == "" {
		return prog, 0, retry.Permanent(fmt.Errorf("redisstore: store %q has no index template", st.Name))
	}
	if prog.Store != "" && prog.Store != st.Name {
		return prog, 0, retry.Permanent(fmt.Errorf("redisstore: progress is of store %q, not %q", prog.Store, st.Name))
	}
	prog.Store = st.Name
	count := opts.Count
	if count <= 0 {
		count = scanCount
	}
	needs := func(v inventory.Vars) bool {
		return (!inventory.Uses(l.Index, inventory.Subject) || v.Subject != "") &&
			(!inventory.Uses(l.Index, inventory.SubjectHash) || v.SubjectHash != "") &&
			(!inventory.Uses(l.Index, inventory.Session) || v.Session != "")
	}
	var skipped int64
	for ; prog.Template < len(l.Keys); prog.Template, prog.Cursors, prog.Finished = prog.Template+1, nil, nil {
		tmpl := l.Keys[prog.Template]
		m := newLegacyMatcher(tmpl)
		glob := inventory.Expand(tmpl, inventory.Vars{Tenant: "*", Subject: "*", SubjectHash: "*", Session: "*"}, nil)
		nodes, err := primaries(ctx, client)
		if err != nil {
			return prog, skipped, classify("list primaries", err)
		}
		if prog.Cursors == nil {
			prog.Cursors, prog.Finished = map[string]uint64{}, map[string]bool{}
		}
		for _, node := range nodes {
			addr := node.Options().Addr
			for !prog.Finished[addr] {
				if opts.MaxKeys > 0 && prog.Indexed >= opts.MaxKeys {
					return prog, skipped, nil
				}
				keys, next, err := node.Scan(ctx, prog.Cursors[addr], glob, count).Result()
				if err != nil {
					return prog, skipped, classify("scan "+strings.ReplaceAll(tmpl, "*", ""), err)
				}
				pipe := client.Pipeline()
				added := int64(0)
				for _, k := range keys {
					v, ok := m.vars(k)
					if !ok {
						continue
					}
					if !needs(v) {
						skipped++
						continue
					}
					pipe.SAdd(ctx, inventory.Expand(l.Index, v, nil), k)
					added++
				}
				if added > 0 {
					if all, err := pipe.Exec(ctx); err != nil {
						return prog, skipped, classify("add to index", cause(all, err))
					}
				}
				prog.Indexed += added
				prog.Cursors[addr] = next
				prog.Finished[addr] = next == 0
				if opts.Save != nil {
					if err := opts.Save(prog); err != nil {
						return prog, skipped, fmt.Errorf("redisstore: save progress: %w", err)
					}
				}
			}
		}
		if opts.Log != nil {
			opts.Log("template %d of %d scanned, %d keys indexed so far", prog.Template+1, len(l.Keys), prog.Indexed)
		}
	}
	prog.Done = true
	if opts.Save != nil {
		if err := opts.Save(prog); err != nil {
			return prog, skipped, fmt.Errorf("redisstore: save progress: %w", err)
		}
	}
	return prog, skipped, nil
}

// primaries returns a client of every primary: the masters of a cluster, the shards of a
// ring, or the single server.
func primaries(ctx context.Context, client redis.UniversalClient) ([]*redis.Client, error) {
	switch c := client.(type) {
	case *redis.Client:
		return []*redis.Client{c}, nil
	case *redis.ClusterClient:
		var mu = make(chan struct{}, 1)
		var out []*redis.Client
		err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			mu <- struct{}{}
			out = append(out, n)
			<-mu
			return nil
		})
		return out, err
	case *redis.Ring:
		return c.GetShardClients(), nil
	}
	return nil, errors.New("unsupported redis client type")
}

// LoadLegacyProgress reads the progress saved at path; a missing file is a fresh start.
func LoadLegacyProgress(path string) (LegacyProgress, error) {
	var p LegacyProgress
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("redisstore: progress file %s: %w", path, err)
	}
	return p, nil
}

// SaveLegacyProgress writes p to path atomically (a temporary file renamed over it).
func SaveLegacyProgress(path string, p LegacyProgress) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
