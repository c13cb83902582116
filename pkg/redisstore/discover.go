package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

var _ deletion.Discoverer = (*Store)(nil)

// Placeholders of a key family's shape.
const (
	shapeTenant = "{tenant}"
	shapeID     = "{id}"
)

// keysPerSample is how many keys discovery scans per primary for each value it may sample.
const keysPerSample = 50

// Discover scans a bounded sample of every primary's keyspace (opts.Sample × 50 keys each),
// groups the keys into families by their shape — the key split at ':', the first part kept
// when it is a plain word, a known tenant replaced by {tenant} and every other part by
// {id} — and reports each family that no key or index template of a redis store of inv
// matches and that looks like personal data: its first part or a literal part names an
// identity-like field (customer, user_id, email, ...), or a sampled value (a string, a
// JSON document, a hash) holds an identity-like field or a value of a pii pattern. At most
// opts.Sample values are read per family. Reports hold shapes, reasons and key counts,
// never a key or a value.
func (r *Store) Discover(ctx context.Context, inv *inventory.Inventory, opts deletion.DiscoverOptions) ([]deletion.Uncovered, error) {
	opts = opts.Defaults()
	var globs []string
	for _, st := range inv.OfKinds(Kind) {
		l, err := LocatorsOf(st)
		if err != nil {
			return nil, err
		}
		for _, t := range append(slices.Clone(l.Keys), l.Index) {
			if t != "" {
				globs = append(globs, coverGlob(t))
			}
		}
	}
	type family struct {
		keys    int64
		sampled int
		reasons map[string]bool
	}
	var mu sync.Mutex
	fams := map[string]*family{}
	_, err := r.forEachPrimary(ctx, func(ctx context.Context, node redis.Cmdable) error {
		var cursor uint64
		seen := 0
		for {
			keys, next, err := node.Scan(ctx, cursor, "*", scanCount).Result()
			if err != nil {
				return fmt.Errorf("redisstore: discover: scan: %w", err)
			}
			for _, k := range keys {
				if covered(globs, k) {
					continue
				}
				shape, named := shapeOf(k, opts)
				mu.Lock()
				f := fams[shape]
				if f == nil {
					f = &family{reasons: map[string]bool{}}
					fams[shape] = f
				}
				f.keys++
				if named != "" {
					f.reasons["key names "+named] = true
				}
				sample := f.sampled < opts.Sample
				f.sampled++
				mu.Unlock()
				if !sample {
					continue
				}
				reasons, err := valueReasons(ctx, node, k, opts)
				if err != nil {
					return err
				}
				mu.Lock()
				for _, why := range reasons {
					f.reasons[why] = true
				}
				mu.Unlock()
			}
			seen += len(keys)
			if cursor = next; cursor == 0 || seen >= opts.Sample*keysPerSample {
				return nil
			}
		}
	})
	if err != nil {
		return nil, err
	}
	var out []deletion.Uncovered
	for shape, f := range fams {
		if len(f.reasons) == 0 {
			continue
		}
		reasons := make([]string, 0, len(f.reasons))
		for why := range f.reasons {
			reasons = append(reasons, why)
		}
		sort.Strings(reasons)
		out = append(out, deletion.Uncovered{Kind: Kind, Location: shape, Reason: strings.Join(reasons, "; "), Count: f.keys})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Location < out[j].Location })
	return out, nil
}

// coverGlob is the glob of every key a template can name: each placeholder any value, and
// a trailing '*' any rest.
func coverGlob(tmpl string) string {
	const wild = "\x00"
	if strings.HasSuffix(tmpl, "*") {
		tmpl = strings.TrimSuffix(tmpl, "*") + wild
	}
	for _, p := range placeholders {
		tmpl = strings.ReplaceAll(tmpl, p, wild)
	}
	return strings.ReplaceAll(globEscape(tmpl), wild, "*")
}

func covered(globs []string, key string) bool {
	for _, g := range globs {
		if globMatch(g, key) {
			return true
		}
	}
	return false
}

// shapeOf returns the family of key and the identity-like field one of its kept parts
// names ("" when none).
func shapeOf(key string, opts deletion.DiscoverOptions) (shape, named string) {
	parts := strings.Split(key, string(Delimiter))
	for i, p := range parts {
		switch {
		case slices.Contains(opts.Tenants, p) || slices.Contains(opts.Tenants, decodePart(p)):
			parts[i] = shapeTenant
		case plainWord(p) && (i == 0 || opts.IdentityField(p)):
			if named == "" && (opts.IdentityField(p) || opts.IdentityField(p+"_id")) {
				named = p
			}
		default:
			parts[i] = shapeID
		}
	}
	return strings.Join(parts, string(Delimiter)), named
}

var decodePart = strings.NewReplacer("%3A", ":", "%25", "%").Replace

// plainWord reports whether s is a lower-case word of letters and '_' or '-', at most 32
// bytes: a namespace, never an identifier with digits.
func plainWord(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// maxValue bounds the bytes of one sampled string value.
const maxValue = 64 << 10

// valueReasons samples the value of key and says why it looks like personal data.
func valueReasons(ctx context.Context, node redis.Cmdable, key string, opts deletion.DiscoverOptions) ([]string, error) {
	typ, err := node.Type(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: discover: type: %w", err)
	}
	var fields, values []string
	switch typ {
	case "string":
		v, err := node.GetRange(ctx, key, 0, maxValue).Result()
		if err != nil && err != redis.Nil {
			return nil, fmt.Errorf("redisstore: discover: get: %w", err)
		}
		var doc any
		if json.Unmarshal([]byte(v), &doc) == nil {
			fields, values = deletion.Walk(doc)
		} else {
			values = append(values, v)
		}
	case "hash":
		h, err := node.HGetAll(ctx, key).Result()
		if err != nil {
			return nil, fmt.Errorf("redisstore: discover: hgetall: %w", err)
		}
		for k, v := range h {
			fields, values = append(fields, k), append(values, v)
		}
	default:
		return nil, nil
	}
	var out []string
	for _, f := range fields {
		if opts.IdentityField(f) {
			out = append(out, "values hold identity-like fields")
			break
		}
	}
	for _, v := range values {
		if deletion.PersonalValue(v) {
			out = append(out, "values match personal-data patterns")
			break
		}
	}
	return out, nil
}
