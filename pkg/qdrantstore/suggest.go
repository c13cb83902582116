package qdrantstore

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore/qdrantkey"
)

// sessionNames are the last key names of a path that Suggest files under session_fields.
var sessionNames = []string{"session_id", "thread_id", "conversation_id"}

// sessionLike reports whether the last key of the key path p (array markers and quotes
// aside, case and '-' ignored) is one of sessionNames.
func sessionLike(p string) bool {
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		p = p[i+1:]
	}
	if i := strings.IndexByte(p, '['); i >= 0 {
		p = p[:i]
	}
	p = strings.ReplaceAll(strings.ToLower(strings.Trim(p, `"`)), "-", "_")
	return slices.Contains(sessionNames, p)
}

// suggestKey is the Suggest of an unnamed key of a covered collection: the inventory entry
// of the qdrant store named store with path added to its subject_fields (session_fields
// when session-like), as YAML. It is empty when path holds a placeholder ({id},
// {tenant}: no locator can name a key that varies per point or per tenant) or is not a
// key of Qdrant's grammar, or when inv has no such store. The entry keeps every other
// locator as inv writes it.
func suggestKey(inv *inventory.Inventory, store, path string) (string, error) {
	if strings.ContainsAny(path, "{}") || qdrantkey.Check(path) != nil {
		return "", nil
	}
	e, ok := inv.Entry(store)
	if !ok || e.Kind != Kind {
		return "", nil
	}
	l, err := LocatorsOf(e)
	if err != nil {
		return "", err
	}
	if sessionLike(path) {
		e.Locators = e.Locators.With("session_fields", append(slices.Clone(l.SessionFields), path))
	} else {
		e.Locators = e.Locators.With("subject_fields", append(slices.Clone(l.SubjectFields), path))
	}
	return entryYAML(e)
}

// suggestCollection is the Suggest of an uncovered collection coll whose identity-like
// key paths are fields: a new qdrant store, named after the collection (suggestName),
// whose one collection template is coll with a known tenant written {tenant}
// (tenantTemplate), the session-like fields as session_fields and the others as
// subject_fields, as YAML. When coll holds no known tenant the template names no
// {tenant} and Validate refuses the entry until a tenant_field is named: a leading YAML
// comment says so. It is empty without a field to name.
func suggestCollection(inv *inventory.Inventory, coll string, fields, tenants []string) (string, error) {
	var subject, session []string
	for _, f := range fields {
		switch {
		case strings.ContainsAny(f, "{}") || qdrantkey.Check(f) != nil:
		case sessionLike(f):
			session = append(session, f)
		default:
			subject = append(subject, f)
		}
	}
	if len(subject)+len(session) == 0 {
		return "", nil
	}
	tmpl, tenanted := tenantTemplate(coll, tenants)
	if inventory.CheckTemplate(tmpl, inventory.Tenant) != nil {
		return "", nil // the name itself holds something a template reads as a placeholder
	}
	locs := inventory.Locators{"collections": []string{tmpl}}
	if len(subject) > 0 {
		locs["subject_fields"] = subject
	}
	if len(session) > 0 {
		locs["session_fields"] = session
	}
	e := inventory.Entry{Name: suggestName(inv, tmpl), Kind: Kind, Locators: locs}
	if tenanted && Validate(e) != nil {
		return "", nil
	}
	y, err := entryYAML(e)
	if err != nil || tenanted {
		return y, err
	}
	return fmt.Sprintf("# collection %q holds no known tenant: name the payload field holding the tenant in locators.tenant_field (or write the tenant as {tenant} in the collection template) before adding this entry; Validate refuses it as it is\n", tmpl) + y, nil
}

// tenantTemplate is coll with every occurrence of one of tenants as a whole part of the
// name (bounded by the ends of the name or by characters other than letters and digits)
// written {tenant}, the longest tenant found winning, and whether one was found.
func tenantTemplate(coll string, tenants []string) (string, bool) {
	ts := slices.Clone(tenants)
	slices.SortStableFunc(ts, func(a, b string) int { return len(b) - len(a) })
	for _, t := range ts {
		if t == "" {
			continue
		}
		re := regexp.MustCompile(`(^|[^\pL\pN])` + regexp.QuoteMeta(t) + `($|[^\pL\pN])`)
		if !re.MatchString(coll) {
			continue
		}
		// Replace occurrence by occurrence: adjacent ones share a separator.
		var b strings.Builder
		rest := coll
		for {
			m := re.FindStringSubmatchIndex(rest)
			if m == nil {
				break
			}
			b.WriteString(rest[:m[3]])
			b.WriteString(inventory.Tenant)
			rest = rest[m[3]+len(t):]
		}
		b.WriteString(rest)
		return b.String(), true
	}
	return coll, false
}

var (
	notNameChar = regexp.MustCompile(`[^a-z0-9_-]+`)
	separators  = regexp.MustCompile(`[_-]{2,}`)
)

// suggestName is a store name for the template tmpl, unique in inv: tmpl without
// {tenant}, lower-cased, other characters than letters, digits, '_' and '-' replaced by
// '_', within the inventory's name syntax, with _2, _3, ... appended when taken.
func suggestName(inv *inventory.Inventory, tmpl string) string {
	n := strings.ToLower(strings.ReplaceAll(tmpl, inventory.Tenant, "_"))
	n = notNameChar.ReplaceAllString(n, "_")
	n = separators.ReplaceAllString(n, "_")
	n = strings.Trim(n, "_-")
	if n == "" || n[0] < 'a' || n[0] > 'z' {
		n = strings.TrimSuffix("qdrant_"+n, "_")
	}
	if len(n) > 56 {
		n = strings.TrimRight(n[:56], "_-")
	}
	name := n
	for i := 2; ; i++ {
		if _, taken := inv.Entry(name); !taken {
			return name
		}
		name = fmt.Sprintf("%s_%d", n, i)
	}
}

// entryYAML writes e as the inventory file writes an entry (two-space indentation).
func entryYAML(e inventory.Entry) (string, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(e); err != nil {
		return "", fmt.Errorf("qdrant: suggest an entry: %w", err)
	}
	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("qdrant: suggest an entry: %w", err)
	}
	return b.String(), nil
}
