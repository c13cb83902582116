package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// Records is one field-matched key family of a redis store (locators.records): keys of
// the family Keys names belong to a subject when one of Fields equals the subject's id or
// one of its session ids, exactly. Keys is a key template whose parts are literal text,
// {tenant} (required) or {id} (any one part), optionally ending with a '*' wildcard (any
// rest): "crm:{tenant}:*", "crm:{tenant}:{id}". Fields are hash fields; for a key holding
// a string, keys of the JSON object it holds, top-level or dotted (profile.email).
type Records struct {
	Keys   string   `yaml:"keys"`
	Fields []string `yaml:"fields,flow"`
}

// UnmarshalYAML decodes a records item strictly: a field other than keys and fields is an
// error naming it.
func (r *Records) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i].Value; k != "keys" && k != "fields" {
				return fmt.Errorf("unknown field %q in a records item (known: fields, keys)", k)
			}
		}
	}
	type plain Records
	return n.Decode((*plain)(r))
}

// checkRecords checks the records of a store's locators and names the item and field at fault.
func checkRecords(rs []Records) error {
	seen := map[string]int{}
	for i, rec := range rs {
		at := fmt.Sprintf("locators.records[%d]", i)
		if err := checkRecordsTemplate(rec.Keys); err != nil {
			return fmt.Errorf("%s.keys: %w", at, err)
		}
		if j, ok := seen[rec.Keys]; ok {
			return fmt.Errorf("%s.keys: template %q repeats locators.records[%d]: merge their fields", at, rec.Keys, j)
		}
		seen[rec.Keys] = i
		if len(rec.Fields) == 0 {
			return fmt.Errorf("%s.fields is empty: name the hash fields or JSON keys that hold the subject's id", at)
		}
		for _, f := range rec.Fields {
			if slices.Contains(strings.Split(f, "."), "") {
				return fmt.Errorf("%s.fields: field %q is empty or has an empty dotted part", at, f)
			}
		}
	}
	return nil
}

// checkRecordsTemplate checks the key template of a records family: only {tenant} and
// {id} placeholders, each filling a whole key part, {tenant} present, and no wildcard but
// a trailing '*' that follows literal text or a delimiter.
func checkRecordsTemplate(t string) error {
	if t == "" {
		return errors.New("template is empty")
	}
	for _, p := range []string{inventory.Subject, inventory.SubjectHash, inventory.Session} {
		if inventory.Uses(t, p) {
			return fmt.Errorf("template %q uses %s: a records family matches the subject by its fields, so its template holds only {tenant} and {id}; a template naming the subject belongs in locators.keys", t, p)
		}
	}
	if err := inventory.CheckTemplate(t, inventory.Tenant, shapeID); err != nil {
		return err
	}
	body, star := strings.CutSuffix(t, "*")
	if strings.ContainsAny(body, `*?[]\`) {
		return fmt.Errorf("template %q: only a trailing '*' may be a wildcard; {id} stands for any one key part", t)
	}
	parts := strings.Split(body, string(Delimiter))
	for i, p := range parts {
		if strings.ContainsAny(p, "{}") && p != inventory.Tenant && p != shapeID {
			return fmt.Errorf("template %q: a placeholder must fill a whole key part (between %q delimiters)", t, Delimiter)
		}
		if star && i == len(parts)-1 && (p == inventory.Tenant || p == shapeID) {
			return fmt.Errorf("template %q: a placeholder cannot be followed by '*'; end the template with \":*\"", t)
		}
	}
	if !inventory.Uses(t, inventory.Tenant) {
		return fmt.Errorf("template %q names no {tenant}: tenants sharing this Redis would erase each other's records; put {tenant} in the template", t)
	}
	return nil
}

// keyShape matches keys part by part: literal parts exactly, {tenant} parts the tenant
// (KeyPart-encoded) and every other placeholder any one part (no ':'). With star the last
// part is a literal prefix of the rest of the key, delimiters included.
type keyShape struct {
	parts     []string
	star      bool
	tenant    string
	anyTenant bool // {tenant} is any one part (what the inventory covers)
}

// isPlaceholder reports whether a key part is a placeholder such as {tenant} or {id}.
func isPlaceholder(part string) bool {
	return len(part) >= 2 && part[0] == '{' && part[len(part)-1] == '}' && !strings.ContainsAny(part[1:len(part)-1], "{}")
}

// newShape returns the shape of tmpl (a checked records template or a parsed location)
// for tenant, which is KeyPart-encoded here.
func newShape(tmpl, tenant string) keyShape {
	body, star := strings.CutSuffix(tmpl, "*")
	return keyShape{parts: strings.Split(body, string(Delimiter)), star: star, tenant: KeyPart(tenant)}
}

// glob returns the SCAN pattern of the shape: the tenant glob-escaped, every other
// placeholder '*'. A '*' also matches ':', so keys must also pass matches.
func (k keyShape) glob() string {
	out := make([]string, len(k.parts))
	for i, p := range k.parts {
		switch {
		case p == inventory.Tenant:
			out[i] = globEscape(k.tenant)
		case isPlaceholder(p):
			out[i] = "*"
		default:
			out[i] = globEscape(p)
		}
	}
	g := strings.Join(out, string(Delimiter))
	if k.star {
		g += "*"
	}
	return g
}

// matches reports whether key has the shape: as many parts (at least as many with star),
// each as the shape's part says.
func (k keyShape) matches(key string) bool {
	n := len(k.parts)
	kp := strings.SplitN(key, string(Delimiter), n)
	if len(kp) < n {
		return false
	}
	for i, p := range k.parts {
		v := kp[i]
		if i == n-1 {
			if k.star {
				return strings.HasPrefix(v, p)
			}
			if strings.ContainsRune(v, Delimiter) {
				return false
			}
		}
		switch {
		case p == inventory.Tenant:
			if v != k.tenant && !k.anyTenant {
				return false
			}
		case isPlaceholder(p):
		case v != p:
			return false
		}
	}
	return true
}

// idParts returns the decoded values of key's parts that the shape's placeholders other
// than {tenant} fill; key must match the shape.
func (k keyShape) idParts(key string) []string {
	kp := strings.SplitN(key, string(Delimiter), len(k.parts))
	var out []string
	for i, p := range k.parts {
		if i < len(kp) && p != inventory.Tenant && isPlaceholder(p) {
			out = append(out, decodePart(kp[i]))
		}
	}
	return out
}

// recordsPattern is one records family of a plan: where it reports (loc), its shape for
// the plan's tenant, and the fields that name the subject.
type recordsPattern struct {
	loc    int
	shape  keyShape
	glob   string
	fields []string
}

// ownersOf maps each non-empty identifier of s (its id and sessions) to 0, the owner index
// of a single subject.
func ownersOf(s deletion.Subject) map[string]int {
	owners := map[string]int{}
	addOwner(owners, s, 0)
	return owners
}

// addOwner maps each non-empty identifier of s not yet owned to owner.
func addOwner(owners map[string]int, s deletion.Subject, owner int) {
	for _, id := range append([]string{s.ID}, s.Sessions...) {
		if _, ok := owners[id]; id != "" && !ok {
			owners[id] = owner
		}
	}
}

// readOutcome is what reading one key of a records family found.
type readOutcome int8

const (
	readGone       readOutcome = iota // the key no longer exists
	readOK                            // read; its owner says whose it is
	readUnreadable                    // another type, or a string that is no JSON object where fields are named
)

// readRecords reads the keys in pipelines of unlinkBatch keys (HMGET of fields, or HGETALL
// when fields is empty, beside GET) and returns per key what it found and its owner: the
// least owners value among the identifiers that one of the key's fields holds exactly, -1
// when none. With fields empty every field name and value of a hash, every key and scalar
// of a JSON document, or else the whole string, is compared (Probe). Errors are Redis's,
// unclassified.
func (r *Store) readRecords(ctx context.Context, keys, fields []string, owners map[string]int) ([]int, []readOutcome, error) {
	own := make([]int, len(keys))
	outs := make([]readOutcome, len(keys))
	for off := 0; off < len(keys); off += unlinkBatch {
		chunk := keys[off:min(len(keys), off+unlinkBatch)]
		pipe := r.client.Pipeline()
		hs := make([]redis.Cmder, len(chunk))
		gs := make([]*redis.StringCmd, len(chunk))
		for i, k := range chunk {
			if len(fields) > 0 {
				hs[i] = pipe.HMGet(ctx, k, fields...)
			} else {
				hs[i] = pipe.HGetAll(ctx, k)
			}
			gs[i] = pipe.Get(ctx, k)
		}
		_, _ = pipe.Exec(ctx) // every command's outcome is read below
		for i := range chunk {
			own[off+i], outs[off+i] = -1, readGone
			hErr, gErr := hs[i].Err(), gs[i].Err()
			var values []string
			switch {
			case gErr == nil:
				var ok bool
				if values, ok = stringValues(gs[i].Val(), fields); !ok {
					outs[off+i] = readUnreadable
					continue
				}
			case hErr == nil && isWrongType(gErr):
				values = hashValues(hs[i])
			case errors.Is(gErr, redis.Nil) && (hErr == nil || isWrongType(hErr)):
				continue // gone, or changed type between the two reads
			case isWrongType(hErr) && isWrongType(gErr):
				outs[off+i] = readUnreadable
				continue
			case hErr != nil && !isWrongType(hErr):
				return nil, nil, hErr
			default:
				return nil, nil, gErr
			}
			outs[off+i], own[off+i] = readOK, ownerOf(values, owners)
		}
	}
	return own, outs, nil
}

// ownerOf returns the least owner of the values, -1 when no value is an identifier.
func ownerOf(values []string, owners map[string]int) int {
	best := -1
	for _, v := range values {
		if o, ok := owners[v]; ok && (best < 0 || o < best) {
			best = o
		}
	}
	return best
}

// hashValues returns what an HMGET (the values present) or HGETALL (every name and value)
// read.
func hashValues(c redis.Cmder) []string {
	var out []string
	switch c := c.(type) {
	case *redis.SliceCmd:
		for _, v := range c.Val() {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
	case *redis.MapStringStringCmd:
		for k, v := range c.Val() {
			out = append(out, k, v)
		}
	}
	return out
}

// stringValues returns the values of a string record: at fields of the JSON object it
// holds (false when it holds none), or, with fields empty, every key and scalar of its JSON
// document, or the whole string when it is no JSON.
func stringValues(v string, fields []string) ([]string, bool) {
	doc, isJSON := decodeJSON(v)
	if len(fields) == 0 {
		if !isJSON {
			return []string{v}, true
		}
		return jsonAll(doc, nil), true
	}
	if _, ok := doc.(map[string]any); !isJSON || !ok {
		return nil, false
	}
	var out []string
	for _, f := range fields {
		out = jsonAt(doc, f, out)
	}
	return out, true
}

// decodeJSON decodes v as one JSON document, numbers kept as their text.
func decodeJSON(v string) (any, bool) {
	dec := json.NewDecoder(strings.NewReader(v))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return doc, true
}

// jsonAt appends the scalars at path in v: a key of an object holding dots is tried as
// written and as nested keys (profile.email: {"profile.email": ..} or {"profile": {"email": ..}}),
// arrays are transparent.
func jsonAt(v any, path string, out []string) []string {
	switch t := v.(type) {
	case map[string]any:
		if path == "" {
			return out
		}
		for i := 0; i <= len(path); i++ {
			if i < len(path) && path[i] != '.' {
				continue
			}
			e, ok := t[path[:i]]
			if !ok {
				continue
			}
			if i == len(path) {
				out = jsonScalars(e, out)
			} else {
				out = jsonAt(e, path[i+1:], out)
			}
		}
	case []any:
		for _, e := range t {
			out = jsonAt(e, path, out)
		}
	}
	return out
}

// jsonScalars appends the string and number values of v, through arrays.
func jsonScalars(v any, out []string) []string {
	switch t := v.(type) {
	case string:
		out = append(out, t)
	case json.Number:
		out = append(out, t.String())
	case []any:
		for _, e := range t {
			out = jsonScalars(e, out)
		}
	}
	return out
}

// jsonAll appends every object key and every scalar of v.
func jsonAll(v any, out []string) []string {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			out = jsonAll(e, append(out, k))
		}
	case []any:
		for _, e := range t {
			out = jsonAll(e, out)
		}
	default:
		out = jsonScalars(v, out)
	}
	return out
}

// visitRecords scans rp's family on every primary and calls fn, concurrently for different
// primaries, with each page's keys of the family (a key SCAN repeats within a page once)
// and, when read is set, what readRecords found for them. It returns the Ring shards down.
func (r *Store) visitRecords(ctx context.Context, rp recordsPattern, owners map[string]int, read bool, fn func(keys []string, own []int, outs []readOutcome) error) ([]string, error) {
	return r.forEachPrimary(ctx, func(ctx context.Context, node redis.Cmdable) error {
		return scan(ctx, node, rp.glob, "", func(page []string) error {
			keys := make([]string, 0, len(page))
			seen := make(map[string]bool, len(page))
			for _, k := range page {
				if !seen[k] && rp.shape.matches(k) {
					seen[k] = true
					keys = append(keys, k)
				}
			}
			if len(keys) == 0 {
				return nil
			}
			if !read {
				return fn(keys, nil, nil)
			}
			own, outs, err := r.readRecords(ctx, keys, rp.fields, owners)
			if err != nil {
				return err
			}
			return fn(keys, own, outs)
		})
	})
}

// eraseRecords unlinks the keys of rp's family that belong to owners (every key of the
// family when whole: a tenant erasure) and calls add with each key's owner (0 when whole)
// and its UNLINK reply. Keys it cannot read are left alone (Verify reports them).
func (r *Store) eraseRecords(ctx context.Context, rp recordsPattern, owners map[string]int, whole bool, add func(owner int, n int64)) error {
	_, err := r.visitRecords(ctx, rp, owners, !whole, func(keys []string, own []int, outs []readOutcome) error {
		var del []string
		var by []int
		for i, k := range keys {
			switch {
			case whole:
				del, by = append(del, k), append(by, 0)
			case outs[i] == readOK && own[i] >= 0:
				del, by = append(del, k), append(by, own[i])
			}
		}
		for off := 0; off < len(del); off += unlinkBatch {
			end := min(len(del), off+unlinkBatch)
			pipe := r.client.Pipeline()
			cmds := make([]*redis.IntCmd, 0, end-off)
			for _, k := range del[off:end] {
				cmds = append(cmds, pipe.Unlink(ctx, k))
			}
			if all, err := pipe.Exec(ctx); err != nil {
				return cause(all, err)
			}
			for j, c := range cmds {
				add(by[off+j], c.Val())
			}
		}
		return nil
	})
	return err
}

// recordsRemain returns, for rp, the keys of the family that belong to owner 0 of owners
// (every key when whole) and those it cannot read, and the Ring shards down.
func (r *Store) recordsRemain(ctx context.Context, rp recordsPattern, owners map[string]int, whole bool) (found, unread map[string]bool, down []string, err error) {
	found, unread = map[string]bool{}, map[string]bool{}
	var mu sync.Mutex
	down, err = r.visitRecords(ctx, rp, owners, !whole, func(keys []string, own []int, outs []readOutcome) error {
		mu.Lock()
		defer mu.Unlock()
		for i, k := range keys {
			switch {
			case whole || outs[i] == readOK && own[i] >= 0:
				found[k] = true
			case outs[i] == readUnreadable:
				unread[k] = true
			}
		}
		return nil
	})
	return found, unread, down, err
}

// unreadItem names, for Verification.UnexaminedItems, n keys of a records family that
// could not be read.
func unreadItem(location string, n int) string {
	what := "1 key is neither a hash nor a string holding a JSON object, its fields are unknown"
	if n > 1 {
		what = fmt.Sprintf("%d keys are neither hashes nor strings holding a JSON object, their fields are unknown", n)
	}
	return location + ": " + what
}

// hasRecords reports whether st names records families.
func hasRecords(st inventory.Entry) bool {
	l, err := LocatorsOf(st)
	return err == nil && len(l.Records) > 0
}
