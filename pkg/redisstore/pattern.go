package redisstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Delimiter separates the parts of a key. KeyPart escapes it inside identifiers.
const Delimiter = ':'

// KeyPart encodes an identifier (tenant, subject id, session id) for use as one part of a
// Redis key: it percent-encodes the key delimiter ':' as "%3A" and '%' as "%25" and leaves
// every other byte alone. The encoding is injective and its output never contains ':', so
// the part of a key between two delimiters names exactly one identifier. Applications that
// write keys Lethe erases must build them with KeyPart (or Key).
func KeyPart(id string) string {
	if !strings.ContainsAny(id, ":%") {
		return id
	}
	var b strings.Builder
	b.Grow(len(id) + 8)
	for i := 0; i < len(id); i++ {
		switch id[i] {
		case ':':
			b.WriteString("%3A")
		case '%':
			b.WriteString("%25")
		default:
			b.WriteByte(id[i])
		}
	}
	return b.String()
}

// Key builds a concrete key from a key template of the inventory: every placeholder is
// replaced by the KeyPart of its value and a trailing '*' wildcard by suffix (a template
// without one names a single key and ignores suffix). An
// application uses it to write keys that the store's patterns match exactly.
func Key(tmpl string, v inventory.Vars, suffix string) string {
	if t, ok := strings.CutSuffix(tmpl, "*"); ok {
		return inventory.Expand(t, v, KeyPart) + suffix
	}
	return inventory.Expand(tmpl, v, KeyPart)
}

// globEscape quotes every Redis glob metacharacter of s so that a pattern holding it
// matches s only.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 4)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// patternOf returns the SCAN pattern of a key template for one set of values: every value
// is KeyPart-encoded and glob-escaped; the template's trailing '*' stays a wildcard.
func patternOf(tmpl string, v inventory.Vars) string {
	return inventory.Expand(tmpl, v, func(s string) string { return globEscape(KeyPart(s)) })
}

// tenantPattern returns the SCAN pattern of tmpl covering every subject of tenant.
func tenantPattern(tmpl, tenant string) string {
	v := inventory.Vars{Tenant: globEscape(KeyPart(tenant)), Subject: "*", SubjectHash: "*", Session: "*"}
	return inventory.Expand(tmpl, v, nil)
}

var placeholders = []string{inventory.Tenant, inventory.Subject, inventory.SubjectHash, inventory.Session}

// Kind is the inventory kind this package serves.
const Kind = "redis"

// Locators are the locators of an inventory store of kind "redis": key templates whose
// last character may be a '*' wildcard, and an optional per-subject index set listing the
// subject's keys. With IndexOnly the app promises to list every key in the index: erasure
// and verification then read the index alone and cost the subject's footprint; without it
// every primary is also scanned for keys the index does not list (legacy data). Records
// are key families whose keys name no subject but hold its id in a field (see Records);
// they are always scanned, index_only or not. A store has key templates, records or both.
type Locators struct {
	Keys      []string  `yaml:"keys"`
	Index     string    `yaml:"index"`
	IndexOnly bool      `yaml:"index_only"`
	Records   []Records `yaml:"records"`
}

var _ deletion.Validator = (*Store)(nil)

// Validate checks the locators of st (see the package function Validate).
func (s *Store) Validate(st inventory.Entry) error { return Validate(st) }

// Validate checks that st's locators are redis locators whose key and index templates this
// package can match exactly: known fields only, at least one key template or records
// family, only known placeholders, each template naming the tenant and the subject, its
// hash or a session, and each placeholder followed by the delimiter ':' or ending the
// template, so that a KeyPart-encoded value (which holds no ':') fills exactly one part of
// the key.
// "session:{tenant}:{subject}:*" passes; "session:{tenant}:{subject}*" fails because
// subject "a" would match subject "ab"; "session:{subject}:*" fails because keys without
// the tenant are shared by tenants, and one tenant's erasure would reach another's keys.
// A records family (Records) needs a template holding {tenant} as a whole key part and no
// subject placeholder, and at least one field. Validate is cheap and side-effect free.
func Validate(st inventory.Entry) error {
	_, err := LocatorsOf(st)
	return err
}

// LocatorsOf decodes and checks the locators of st; its errors are permanent.
func LocatorsOf(st inventory.Entry) (Locators, error) {
	return inventory.DecodeChecked(st, "redisstore: store", Locators.check)
}

func (l Locators) check() error {
	if len(l.Keys) == 0 && len(l.Records) == 0 {
		return errors.New("locators.keys is empty and there are no locators.records: name key templates, records families or both")
	}
	if l.IndexOnly && l.Index == "" {
		return errors.New("locators.index_only needs locators.index")
	}
	if l.Index != "" && len(l.Keys) == 0 {
		return errors.New("locators.index needs locators.keys: an index lists keys of the key templates (records families are scanned)")
	}
	tmpls := append([]string{}, l.Keys...)
	if l.Index != "" {
		tmpls = append(tmpls, l.Index)
	}
	for i, t := range tmpls {
		field := "locators.keys"
		if i == len(l.Keys) {
			field = "locators.index"
		}
		if err := inventory.CheckTemplate(t, placeholders...); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		if !inventory.Uses(t, inventory.Subject) && !inventory.Uses(t, inventory.SubjectHash) && !inventory.Uses(t, inventory.Session) {
			return fmt.Errorf("%s: template %q names no subject, hash or session: it would match other subjects", field, t)
		}
		if j := strings.IndexAny(t, `*?[\`); j >= 0 && (j != len(t)-1 || i == len(l.Keys)) {
			return fmt.Errorf("%s: template %q: only a trailing '*' of a key template may be a wildcard", field, t)
		}
		for _, p := range placeholders {
			for off := 0; ; {
				j := strings.Index(t[off:], p)
				if j < 0 {
					break
				}
				end := off + j + len(p)
				if end < len(t) && t[end] != Delimiter {
					return fmt.Errorf("%s: template %q: %s must be followed by %q or end the template", field, t, p, Delimiter)
				}
				off = end
			}
		}
		if !inventory.Uses(t, inventory.Tenant) {
			return fmt.Errorf("%s: template %q names no {tenant}: tenants sharing this Redis would erase each other's keys; put {tenant} in every key and index template", field, t)
		}
	}
	return checkRecords(l.Records)
}

// pattern is one SCAN pattern and the key template (location) it was expanded from.
type pattern struct {
	glob string
	loc  int
	// tmpl and tenant are set for a tenant-scope pattern: there every placeholder but
	// {tenant} became '*', which also matches ':', so a key must also pass inTenant.
	tmpl, tenant string
}

// matches reports whether key is one of pt's keys.
func (pt pattern) matches(key string) bool {
	return globMatch(pt.glob, key) && (pt.tmpl == "" || inTenant(pt.tmpl, pt.tenant, key))
}

// inTenant reports whether key follows tmpl part by part with tenant (KeyPart-encoded) in
// every {tenant} part: as many parts as tmpl (at least as many when tmpl ends with '*'),
// each the template's literal text followed by one value (no ':') where the template has
// a placeholder. "s:{session}:{tenant}:*" thus keeps the key "s:x:globex:acme:1" out of
// tenant acme, which the glob "s:*:acme:*" alone would let in.
func inTenant(tmpl, tenant, key string) bool {
	body, star := strings.CutSuffix(tmpl, "*")
	tparts := strings.Split(body, string(Delimiter))
	kparts := strings.SplitN(key, string(Delimiter), len(tparts))
	if len(kparts) < len(tparts) || !star && strings.Contains(kparts[len(kparts)-1], string(Delimiter)) {
		return false
	}
	for i, tp := range tparts {
		lit, ph := tp, ""
		for _, p := range placeholders {
			if l, ok := strings.CutSuffix(tp, p); ok {
				lit, ph = l, p
			}
		}
		rest, ok := strings.CutPrefix(kparts[i], lit)
		switch {
		case !ok:
			return false
		case star && i == len(tparts)-1:
			return ph == "" // the trailing '*' takes the rest
		case ph == "" && rest != "", ph == inventory.Tenant && rest != tenant:
			return false
		}
	}
	return true
}

// plan is what an erasure or a verification of one subject in one store touches.
type plan struct {
	locations  []string  // templates with the tenant filled in: Locators.Keys, then Locators.Records
	patterns   []pattern // SCAN patterns, exact for the subject (or the tenant)
	records    []recordsPattern
	owners     map[string]int // the subject's identifiers (owner 0), for records
	whole      bool           // a tenant erasure: every key of a records family goes
	indexes    []string       // exact index set names (subject scope)
	indexGlob  string         // pattern of the tenant's index sets (tenant scope), or ""
	indexName  string         // the index template with the tenant filled in (for reports)
	indexParts int            // delimiters in an index key of the template (tenant scope)
}

// notSetItem names, for Verification.UnexaminedItems, n index keys of p that are not sets.
func (p plan) notSetItem(n int, indexOnly bool) string {
	what := "the key is not a set (WRONGTYPE), its members are unknown"
	if indexOnly {
		what = "the key is not a set (WRONGTYPE); the store is index_only, so the subject's keys are unknown"
	}
	if n > 1 {
		what = fmt.Sprintf("%d keys are not sets (WRONGTYPE), their members are unknown", n)
	}
	return p.indexName + ": " + what
}

// errEmpty marks a request whose identifiers cannot fill a template.
var errEmpty = errors.New("identifier needed by a template is empty")

// newPlan expands st's templates for s. Errors are permanent: retrying cannot fix them.
func newPlan(st inventory.Entry, s deletion.Subject) (plan, error) {
	l, err := LocatorsOf(st)
	if err != nil {
		return plan{}, err
	}
	if s.Tenant == "" {
		return plan{}, retry.Permanent(fmt.Errorf("redisstore: store %q: tenant: %w", st.Name, errEmpty))
	}
	var p plan
	for i, tmpl := range l.Keys {
		p.locations = append(p.locations, strings.ReplaceAll(tmpl, inventory.Tenant, s.Tenant))
		if s.TenantScope() {
			p.patterns = append(p.patterns, pattern{glob: tenantPattern(tmpl, s.Tenant), loc: i, tmpl: tmpl, tenant: KeyPart(s.Tenant)})
			continue
		}
		vs, err := expansions(tmpl, s)
		if err != nil {
			return plan{}, retry.Permanent(fmt.Errorf("redisstore: store %q: key template %q: %w", st.Name, p.locations[i], err))
		}
		for _, v := range vs {
			p.patterns = append(p.patterns, pattern{glob: patternOf(tmpl, v), loc: i})
		}
	}
	for _, rec := range l.Records {
		sh := newShape(rec.Keys, s.Tenant)
		p.records = append(p.records, recordsPattern{loc: len(p.locations), shape: sh, glob: sh.glob(), fields: rec.Fields})
		p.locations = append(p.locations, strings.ReplaceAll(rec.Keys, inventory.Tenant, s.Tenant))
	}
	p.whole, p.owners = s.TenantScope(), ownersOf(s)
	if idx := l.Index; idx != "" {
		p.indexName = strings.ReplaceAll(idx, inventory.Tenant, s.Tenant)
		if s.TenantScope() {
			p.indexParts = strings.Count(idx, string(Delimiter))
			p.indexGlob = tenantPattern(idx, s.Tenant)
			return p, nil
		}
		vs, err := expansions(idx, s)
		if err != nil {
			return plan{}, retry.Permanent(fmt.Errorf("redisstore: store %q: index template: %w", st.Name, err))
		}
		for _, v := range vs {
			p.indexes = append(p.indexes, inventory.Expand(idx, v, KeyPart))
		}
	}
	return p, nil
}

// expansions returns the values tmpl is expanded with for s: once, or once per non-empty
// session when tmpl uses {session} (none when s has no session).
func expansions(tmpl string, s deletion.Subject) ([]inventory.Vars, error) {
	if inventory.Uses(tmpl, inventory.Subject) && s.ID == "" {
		return nil, fmt.Errorf("subject id: %w", errEmpty)
	}
	if inventory.Uses(tmpl, inventory.SubjectHash) && s.Hash == "" {
		return nil, fmt.Errorf("subject hash: %w", errEmpty)
	}
	if !inventory.Uses(tmpl, inventory.Session) {
		return []inventory.Vars{s.Vars("")}, nil
	}
	var out []inventory.Vars
	seen := map[string]bool{}
	for _, ses := range s.Sessions {
		if ses == "" || seen[ses] {
			continue
		}
		seen[ses] = true
		out = append(out, s.Vars(ses))
	}
	return out, nil
}

// scanRecords reports whether p's records families are to be scanned: for a tenant, or
// for a subject with an identifier a field could hold.
func (p plan) scanRecords() bool { return p.whole || len(p.owners) > 0 }

// match returns the location of the first pattern of p that key matches, or -1.
func (p plan) match(key string) int {
	for _, pt := range p.patterns {
		if pt.matches(key) {
			return pt.loc
		}
	}
	return -1
}

// globMatch reports whether s matches the Redis glob pattern (the semantics of Redis's
// stringmatchlen: '*', '?', '[...]' with '^' and ranges, '\' quoting the next byte).
func globMatch(pattern, s string) bool {
	return globMatchDepth(pattern, s, 0)
}

func globMatchDepth(p, s string, depth int) bool {
	if depth > 1000 {
		return false
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for ; len(s) > 0; s = s[1:] {
				if globMatchDepth(p[1:], s, depth+1) {
					return true
				}
			}
			return false
		case '?':
			s = s[1:]
		case '[':
			p = p[1:]
			not := len(p) > 0 && p[0] == '^'
			if not {
				p = p[1:]
			}
			matched := false
			for {
				if len(p) == 0 {
					p = " " // Redis backs up onto the last byte; the loop's p[1:] then ends it
					break
				}
				if p[0] == '\\' && len(p) >= 2 {
					p = p[1:]
					if p[0] == s[0] {
						matched = true
					}
				} else if p[0] == ']' {
					break
				} else if len(p) >= 3 && p[1] == '-' {
					lo, hi := p[0], p[2]
					if lo > hi {
						lo, hi = hi, lo
					}
					if s[0] >= lo && s[0] <= hi {
						matched = true
					}
					p = p[2:]
				} else if p[0] == s[0] {
					matched = true
				}
				p = p[1:]
			}
			if not {
				matched = !matched
			}
			if !matched {
				return false
			}
			s = s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			break
		}
	}
	return len(p) == 0 && len(s) == 0
}
