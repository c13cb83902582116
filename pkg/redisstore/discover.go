package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

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
// opts.Sample values are read per family. Fields are the sampled hash fields and JSON keys
// (dotted) whose names are identity-like or whose values matched a pii pattern, names
// that look like identifiers themselves left out; Suggest is the inventory entry that
// would cover the family (see suggest). Reports hold shapes, reasons, field names, key
// counts and templates, never a key or a value.
func (r *Store) Discover(ctx context.Context, inv *inventory.Inventory, opts deletion.DiscoverOptions) ([]deletion.Uncovered, error) {
	opts = opts.Defaults()
	covers, err := coverGlobs(inv)
	if err != nil {
		return nil, err
	}
	type family struct {
		keys    int64
		sampled int
		reasons map[string]bool
		fields  map[string]bool
		named   string
	}
	var mu sync.Mutex
	fams := map[string]*family{}
	_, err = r.forEachPrimary(ctx, func(ctx context.Context, node redis.Cmdable) error {
		var cursor uint64
		seen := 0
		for {
			keys, next, err := node.Scan(ctx, cursor, "*", scanCount).Result()
			if err != nil {
				return fmt.Errorf("redisstore: discover: scan: %w", err)
			}
			for _, k := range keys {
				if covered(covers, k) {
					continue
				}
				shape, named := shapeOf(k, opts)
				mu.Lock()
				f := fams[shape]
				if f == nil {
					f = &family{reasons: map[string]bool{}, fields: map[string]bool{}}
					fams[shape] = f
				}
				f.keys++
				if named != "" {
					f.reasons["key names "+named] = true
					if f.named == "" {
						f.named = named
					}
				}
				sample := f.sampled < opts.Sample
				f.sampled++
				mu.Unlock()
				if !sample {
					continue
				}
				reasons, fields, err := valueReasons(ctx, node, k, opts)
				if err != nil {
					return err
				}
				mu.Lock()
				for _, why := range reasons {
					f.reasons[why] = true
				}
				for _, name := range fields {
					if len(f.fields) < maxFields {
						f.fields[name] = true
					}
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
	taken := map[string]bool{} // store names suggested so far
	for _, shape := range slices.Sorted(maps.Keys(fams)) {
		f := fams[shape]
		if len(f.reasons) == 0 {
			continue
		}
		reasons := make([]string, 0, len(f.reasons))
		for why := range f.reasons {
			reasons = append(reasons, why)
		}
		sort.Strings(reasons)
		fields := slices.Sorted(maps.Keys(f.fields))
		out = append(out, deletion.Uncovered{
			Kind: Kind, Location: shape, Reason: strings.Join(reasons, "; "), Count: f.keys,
			Fields: fields, Suggest: suggest(inv, shape, fields, f.named, taken),
		})
	}
	return out, nil
}

// cover is what one template of the inventory covers: the keys glob matches, and, for a
// records template, only those of its shape (an {id} is one key part, where the glob's '*'
// would also take a ':').
type cover struct {
	glob  string
	shape *keyShape
}

// coverGlobs returns what the key, index and records templates of the redis stores of inv
// cover (nothing for a nil inv).
func coverGlobs(inv *inventory.Inventory) ([]cover, error) {
	if inv == nil {
		return nil, nil
	}
	var out []cover
	for _, st := range inv.OfKinds(Kind) {
		l, err := LocatorsOf(st)
		if err != nil {
			return nil, err
		}
		for _, t := range append(slices.Clone(l.Keys), l.Index) {
			if t != "" {
				out = append(out, cover{glob: coverGlob(t)})
			}
		}
		for _, rec := range l.Records {
			sh := newShape(rec.Keys, "")
			sh.anyTenant = true
			out = append(out, cover{glob: coverGlob(rec.Keys), shape: &sh})
		}
	}
	return out, nil
}

// coverGlob is the glob of every key a template can name: each placeholder ({id} too) any
// value, and a trailing '*' any rest.
func coverGlob(tmpl string) string {
	const wild = "\x00"
	if strings.HasSuffix(tmpl, "*") {
		tmpl = strings.TrimSuffix(tmpl, "*") + wild
	}
	for _, p := range append(slices.Clone(placeholders), shapeID) {
		tmpl = strings.ReplaceAll(tmpl, p, wild)
	}
	return strings.ReplaceAll(globEscape(tmpl), wild, "*")
}

func covered(covers []cover, key string) bool {
	for _, c := range covers {
		if globMatch(c.glob, key) && (c.shape == nil || c.shape.matches(key)) {
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

// maxFields bounds the field names discovery keeps per family.
const maxFields = 32

// valueReasons samples the value of key and says why it looks like personal data, and
// which hash fields or JSON keys (dotted) hold identity-like names or personal values:
// names only, and only names that are no identifier themselves (fieldName).
func valueReasons(ctx context.Context, node redis.Cmdable, key string, opts deletion.DiscoverOptions) (reasons, fields []string, err error) {
	typ, err := node.Type(ctx, key).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("redisstore: discover: type: %w", err)
	}
	var names, values []string // every field name and every string value, for the reasons
	var pairs []fieldValue     // a field name with one of its string values ("" for none)
	switch typ {
	case "string":
		v, err := node.GetRange(ctx, key, 0, maxValue).Result()
		if err != nil && err != redis.Nil {
			return nil, nil, fmt.Errorf("redisstore: discover: get: %w", err)
		}
		var doc any
		if json.Unmarshal([]byte(v), &doc) == nil {
			names, values = deletion.Walk(doc)
			pairs = jsonPairs(doc, "", nil)
		} else {
			values = append(values, v)
		}
	case "hash":
		h, err := node.HGetAll(ctx, key).Result()
		if err != nil {
			return nil, nil, fmt.Errorf("redisstore: discover: hgetall: %w", err)
		}
		for k, v := range h {
			names, values = append(names, k), append(values, v)
			pairs = append(pairs, fieldValue{k, v})
		}
	default:
		return nil, nil, nil
	}
	if slices.ContainsFunc(names, opts.IdentityField) {
		reasons = append(reasons, "values hold identity-like fields")
	}
	if slices.ContainsFunc(values, deletion.PersonalValue) {
		reasons = append(reasons, "values match personal-data patterns")
	}
	seen := map[string]bool{}
	for _, p := range pairs {
		if !seen[p.name] && (opts.IdentityField(p.name) || p.value != "" && deletion.PersonalValue(p.value)) && fieldName(p.name) {
			seen[p.name] = true
			fields = append(fields, p.name)
		}
	}
	return reasons, fields, nil
}

// fieldValue is a field name (a dotted JSON path) and one value at it.
type fieldValue struct{ name, value string }

// jsonPairs appends the paths of v (dotted, arrays transparent) with their string values;
// an object or a non-string scalar appears with the value "".
func jsonPairs(v any, at string, out []fieldValue) []fieldValue {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			p := k
			if at != "" {
				p = at + "." + k
			}
			if s, ok := e.(string); ok {
				out = append(out, fieldValue{p, s})
				continue
			}
			out = append(out, fieldValue{p, ""})
			out = jsonPairs(e, p, out)
		}
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok && at != "" {
				out = append(out, fieldValue{at, s})
				continue
			}
			out = jsonPairs(e, at, out)
		}
	}
	return out
}

// fieldName reports whether a hash field or JSON path looks like a name, not a value that
// a report must not hold: every dotted element a letter, then letters, '_' or '-', then at
// most one digit (email, profile.email, line2), and no personal-data pattern.
func fieldName(s string) bool {
	for _, e := range strings.Split(s, ".") {
		if e == "" || len(e) > 64 || !isLetter(e[0]) {
			return false
		}
		for i := 1; i < len(e); i++ {
			c := e[i]
			if !(isLetter(c) || c == '_' || c == '-' || i == len(e)-1 && c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return !deletion.PersonalValue(s)
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// suggest returns the inventory entry (YAML, a mapping to add as an item of stores) that
// would cover the family shape: a records family matching fields when there are any, else,
// for a family whose key names an identity-like field (named), a key template with the
// first {id} after that part as {subject} ({session} for session, thread or conversation
// names) and '*' from the next {id} on. Empty when the shape names no tenant or no entry
// this package accepts can express it.
func suggest(inv *inventory.Inventory, shape string, fields []string, named string, taken map[string]bool) string {
	var e suggestion
	switch {
	case len(fields) > 0:
		e.Locators.Records = []Records{{Keys: shape, Fields: fields}}
	case named != "":
		t, ok := keysTemplate(shape, named)
		if !ok {
			return ""
		}
		e.Locators.Keys = []string{t}
	default:
		return ""
	}
	e.Name, e.Kind = suggestName(inv, shape, taken), Kind
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if enc.Encode(e) != nil || enc.Close() != nil {
		return ""
	}
	var back inventory.Entry
	if yaml.Unmarshal([]byte(b.String()), &back) != nil || Validate(back) != nil {
		return ""
	}
	taken[e.Name] = true
	return b.String()
}

// suggestion is a suggested inventory entry, its fields in the inventory's order.
type suggestion struct {
	Name     string `yaml:"name"`
	Kind     string `yaml:"kind"`
	Locators struct {
		Keys    []string  `yaml:"keys,flow,omitempty"`
		Records []Records `yaml:"records,omitempty"`
	} `yaml:"locators"`
}

// keysTemplate turns a family shape whose part named names an identity into a key
// template, or reports false.
func keysTemplate(shape, named string) (string, bool) {
	parts := strings.Split(shape, string(Delimiter))
	at := slices.Index(parts, named)
	if at < 0 {
		return "", false
	}
	j := slices.Index(parts[at+1:], shapeID)
	if j < 0 {
		return "", false
	}
	j += at + 1
	if slices.Contains(parts[:j], shapeID) {
		return "", false // an {id} before the subject would be a wildcard inside the template
	}
	ph := inventory.Subject
	if n := named; strings.Contains(n, "session") || strings.Contains(n, "thread") || strings.Contains(n, "conversation") {
		ph = inventory.Session
	}
	out := append(slices.Clone(parts[:j]), ph)
	for _, p := range parts[j+1:] {
		if p == shapeID {
			out = append(out, "*")
			break
		}
		out = append(out, p)
	}
	return strings.Join(out, string(Delimiter)), true
}

// suggestName derives a store name from the family's first part ("crm"), or "redis-records"
// when it is no name, made unique among inv's stores and the names taken ("crm-2").
func suggestName(inv *inventory.Inventory, shape string, taken map[string]bool) string {
	base, _, _ := strings.Cut(shape, string(Delimiter))
	if !storeName.MatchString(base) || len(base) > 56 {
		base = "redis-records"
	}
	name := base
	for i := 2; ; i++ {
		inInv := false
		if inv != nil {
			_, inInv = inv.Entry(name)
		}
		if !inInv && !taken[name] {
			return name
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}

// storeName is the inventory's rule for store names.
var storeName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
