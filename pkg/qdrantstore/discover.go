package qdrantstore

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/pii"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore/qdrantkey"
)

var _ deletion.Discoverer = (*Store)(nil)

// DefaultDiscoverSample is how many points Discover samples per collection when
// DiscoverOptions.Sample is 0.
const DefaultDiscoverSample = 100

// DefaultIdentityFields are the identity-like field names Discover looks for when
// DiscoverOptions.Fields is empty.
var DefaultIdentityFields = []string{"customer_id", "user_id", "email", "session_id", "thread_id"}

// piiPatterns are the placeholders of pkg/pii, each a pattern Discover reports by name.
var piiPatterns = []string{pii.Email, pii.Phone, pii.IBAN, pii.NationalID, pii.Card}

// Discover lists the collections of the Qdrant st talks to and reports each one that no
// qdrant store of inv covers but whose sampled payloads (the first opts.Sample points in
// id order, default DefaultDiscoverSample, payload only) carry an identity-like field — a
// key, at any depth (metadata.customer_id), whose last name is one of opts.Fields
// (case-insensitive; default DefaultIdentityFields) — or a string value in which pkg/pii
// finds personal data. A collection is covered when it matches a collection template of a
// qdrant store: with opts.Tenants, the template with {tenant} filled in by one of them;
// without, the template with {tenant} as a wildcard; {subject}, {subject_hash} and
// {session} are always wildcards. An alias is not a collection and is not listed. Such an
// Uncovered names the collection, the field names (key paths written as below) and
// pattern names found (never a value), and Count, the number of sampled points that carry
// any of them.
//
// Of a covered collection, Discover reports the payload keys of the same sample that look
// like identity but that no locator of the stores covering it names (subject_fields,
// hash_fields, session_fields, tenant_field or text_fields, compared as keys, array
// markers aside): a key holding values, not objects, whose last name is one of
// opts.Fields, or whose string values pkg/pii finds personal data in. There is one
// Uncovered per collection template and key: its Location is "<template>/<key path>",
// the template as the inventory writes it, of the first store covering the collection
// (shopbot_{tenant}/metadata.customer_id; a collection name never holds '/'), its Reason says why (identity-like field name,
// personal data pattern names) and which stores' locators miss it, and Count is the
// number of sampled points, over every collection of the template, that carry the key.
// The key path is written in Qdrant's grammar (messages[].email); a part of it that may be
// a value (digits, '@', a pii pattern, not a plain key, over 40 bytes) is written {id},
// a known tenant {tenant}, unless it is one of opts.Fields.
//
// Fields and Suggest say how to cover a report. Of an uncovered collection, Fields are
// its identity-like key paths (none holding {id}; empty when only pii patterns were found)
// and Suggest a new qdrant store (suggestCollection): the collection, a known tenant in
// its name written {tenant}, with the session-like paths (session_id, thread_id,
// conversation_id) as session_fields and the others as subject_fields; a name holding no
// known tenant gets a leading comment that the entry needs a tenant_field before Validate
// accepts it; no Suggest without Fields. Of a key of a covered collection, Fields is the
// key path and Suggest the first store covering it with the key added to its
// subject_fields (session_fields if session-like); no Suggest when the path holds {id} or
// {tenant}, which locators cannot name. Suggest is YAML of one inventory.Entry.
//
// Reports are sorted by Location. Discover only reads. Its errors are classified as
// Erase's are; an inventory qdrant store with invalid locators is a permanent error.
func (st *Store) Discover(ctx context.Context, inv *inventory.Inventory, opts deletion.DiscoverOptions) ([]deletion.Uncovered, error) {
	covers, err := coverage(inv, opts.Tenants)
	if err != nil {
		return nil, err
	}
	var names []string
	err = st.retry(ctx, func() (err error) {
		names, err = st.client.ListCollections(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("qdrant: list collections: %w", classify(err))
	}
	sort.Strings(names)
	fields := opts.Fields
	if len(fields) == 0 {
		fields = DefaultIdentityFields
	}
	want := map[string]bool{}
	for _, f := range fields {
		want[strings.ToLower(f)] = true
	}
	sample := opts.Sample
	if sample <= 0 {
		sample = DefaultDiscoverSample
	}
	var out []deletion.Uncovered
	keys := map[string]*keyUse{} // by Location
	for _, name := range names {
		pts, err := st.discoverSample(ctx, name, sample)
		if err != nil {
			return nil, err
		}
		cs := coversOf(covers, name)
		if len(cs) == 0 {
			if u := collectionFinding(name, pts, want); u.Count > 0 {
				u.Suggest, err = suggestCollection(inv, name, u.Fields, opts.Tenants)
				if err != nil {
					return nil, err
				}
				out = append(out, u)
			}
			continue
		}
		named, stores := map[string]bool{}, map[string]bool{}
		for _, c := range cs {
			maps.Copy(named, c.named)
			stores[c.store] = true
		}
		for path, u := range keyUses(pts, named, want, opts.Tenants) {
			loc := cs[0].tmpl + "/" + path
			k := keys[loc]
			if k == nil {
				k = &keyUse{patterns: map[string]bool{}, stores: map[string]bool{}, store: cs[0].store, path: path}
				keys[loc] = k
			}
			k.count += u.count
			k.name = k.name || u.name
			maps.Copy(k.patterns, u.patterns)
			maps.Copy(k.stores, stores)
		}
	}
	for loc, k := range keys {
		if !k.name && len(k.patterns) == 0 {
			continue
		}
		var reasons []string
		if k.name {
			reasons = append(reasons, "identity-like field name")
		}
		if len(k.patterns) > 0 {
			reasons = append(reasons, "personal data patterns: "+strings.Join(sortedKeys(k.patterns), ", "))
		}
		reasons = append(reasons, "not named by the locators of store "+strings.Join(sortedKeys(k.stores), ", "))
		sug, err := suggestKey(inv, k.store, k.path)
		if err != nil {
			return nil, err
		}
		out = append(out, deletion.Uncovered{Kind: Kind, Location: loc, Reason: strings.Join(reasons, "; "), Count: k.count, Fields: []string{k.path}, Suggest: sug})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Location < out[j].Location })
	return out, nil
}

// cover is one collection template of a qdrant store of the inventory: the names it
// matches, the template as the inventory writes it, the store's name, and the payload keys
// its locators name (keyString form).
type cover struct {
	re    *regexp.Regexp
	tmpl  string
	store string
	named map[string]bool
}

// coverage returns the collection templates of the qdrant stores of inv, in inventory
// order; with tenants, one per template and tenant, {tenant} filled in.
func coverage(inv *inventory.Inventory, tenants []string) ([]cover, error) {
	var out []cover
	for _, s := range inv.OfKinds(Kind) {
		l, err := LocatorsOf(s)
		if err != nil {
			return nil, err
		}
		named := map[string]bool{}
		for _, f := range slices.Concat(l.SubjectFields, l.HashFields, l.SessionFields, l.TextFields, []string{l.TenantField}) {
			if items, err := qdrantkey.Parse(f); f != "" && err == nil {
				var ks []string
				for _, it := range items {
					if it.IsKey {
						ks = append(ks, it.Key)
					}
				}
				named[strings.Join(ks, keySep)] = true
			}
		}
		for _, tmpl := range l.Collections {
			if len(tenants) == 0 {
				out = append(out, cover{re: templateRE(tmpl), tmpl: tmpl, store: s.Name, named: named})
				continue
			}
			for _, t := range tenants {
				out = append(out, cover{re: templateRE(strings.ReplaceAll(tmpl, inventory.Tenant, t)), tmpl: tmpl, store: s.Name, named: named})
			}
		}
	}
	return out, nil
}

// coversOf returns the templates of covers that match the collection name.
func coversOf(covers []cover, name string) []cover {
	var out []cover
	for _, c := range covers {
		if c.re.MatchString(name) {
			out = append(out, c)
		}
	}
	return out
}

// placeholders matches every placeholder of a template.
var placeholders = regexp.MustCompile(`\{(tenant|subject|subject_hash|session)\}`)

// templateRE matches the names tmpl expands to, each placeholder left standing for any
// non-empty text.
func templateRE(tmpl string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	last := 0
	for _, m := range placeholders.FindAllStringIndex(tmpl, -1) {
		b.WriteString(regexp.QuoteMeta(tmpl[last:m[0]]))
		b.WriteString(".+")
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(tmpl[last:]))
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// discoverSample returns the first n points of coll in id order, with their payloads and no
// vectors.
func (st *Store) discoverSample(ctx context.Context, coll string, n int) ([]*qdrant.RetrievedPoint, error) {
	var pts []*qdrant.RetrievedPoint
	err := st.retry(ctx, func() (err error) {
		pts, err = st.client.Scroll(ctx, &qdrant.ScrollPoints{
			CollectionName: coll, Limit: qdrant.PtrOf(uint32(n)),
			WithPayload: qdrant.NewWithPayload(true), WithVectors: qdrant.NewWithVectors(false),
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("qdrant: sample %s: %w", coll, classify(err))
	}
	return pts, nil
}

// collectionFinding reports the identity-like fields and personal-data patterns the
// sampled points pts of the uncovered collection coll carry.
func collectionFinding(coll string, pts []*qdrant.RetrievedPoint, want map[string]bool) deletion.Uncovered {
	u := deletion.Uncovered{Kind: Kind, Location: coll}
	fields, patterns := map[string]bool{}, map[string]bool{}
	for _, p := range pts {
		hit := false
		walkKeys(p.GetPayload(), nil, func(at []step, v *qdrant.Value) {
			if want[strings.ToLower(at[len(at)-1].key)] {
				fields[keyPath(at, want, nil)], hit = true, true
			}
			if s, ok := v.GetKind().(*qdrant.Value_StringValue); ok {
				for _, pat := range patternsIn(s.StringValue) {
					patterns[pat], hit = true, true
				}
			}
		})
		if hit {
			u.Count++
		}
	}
	var reasons []string
	if len(fields) > 0 {
		reasons = append(reasons, "identity-like fields: "+strings.Join(sortedKeys(fields), ", "))
	}
	if len(patterns) > 0 {
		reasons = append(reasons, "personal data patterns: "+strings.Join(sortedKeys(patterns), ", "))
	}
	u.Reason = strings.Join(reasons, "; ")
	for _, f := range sortedKeys(fields) {
		if !strings.Contains(f, idPart) {
			u.Fields = append(u.Fields, f)
		}
	}
	return u
}

// keyUse is what a sample shows of one payload key: the points carrying it, whether its
// name is identity-like, the pii patterns of its values, (summed over collections) the
// stores covering them, and, for a reported location, the store whose template names it
// and the key path.
type keyUse struct {
	count    int64
	name     bool
	patterns map[string]bool
	stores   map[string]bool
	store    string
	path     string
}

// keyUses returns, by key path (keyPath), the keys of pts holding values (not objects)
// that named (keyString form) does not hold: how many points carry each, whether its last
// name is one of want, and the pii patterns of its string values.
func keyUses(pts []*qdrant.RetrievedPoint, named, want map[string]bool, tenants []string) map[string]*keyUse {
	out := map[string]*keyUse{}
	for _, p := range pts {
		seen := map[string]bool{}
		walkKeys(p.GetPayload(), nil, func(at []step, v *qdrant.Value) {
			switch v.GetKind().(type) {
			case *qdrant.Value_StructValue, *qdrant.Value_ListValue:
				return // an object, or an array whose elements are visited
			}
			if named[keyString(at)] {
				return
			}
			path := keyPath(at, want, tenants)
			u := out[path]
			if u == nil {
				u = &keyUse{patterns: map[string]bool{}}
				out[path] = u
			}
			if !seen[path] {
				seen[path] = true
				u.count++
			}
			if want[strings.ToLower(at[len(at)-1].key)] {
				u.name = true
			}
			if s, ok := v.GetKind().(*qdrant.Value_StringValue); ok {
				for _, pat := range patternsIn(s.StringValue) {
					u.patterns[pat] = true
				}
			}
		})
	}
	return out
}

// step is one key of a payload path; list marks a key whose array elements are objects
// the path goes on into.
type step struct {
	key  string
	list bool
}

// walkKeys calls fn for every value of payload m, under the path at: objects and arrays
// too, then the values inside them; an array's scalar elements have the array's path, its
// objects' keys the array's path marked list.
func walkKeys(m map[string]*qdrant.Value, at []step, fn func(at []step, v *qdrant.Value)) {
	for k, v := range m {
		walkKey(append(slices.Clip(at), step{key: k}), v, fn, true)
	}
}

func walkKey(at []step, v *qdrant.Value, fn func(at []step, v *qdrant.Value), visit bool) {
	if visit {
		fn(at, v)
	}
	switch k := v.GetKind().(type) {
	case *qdrant.Value_StructValue:
		walkKeys(k.StructValue.GetFields(), at, fn)
	case *qdrant.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			switch ek := e.GetKind().(type) {
			case *qdrant.Value_StructValue:
				in := slices.Clone(at)
				in[len(in)-1].list = true
				walkKeys(ek.StructValue.GetFields(), in, fn)
			case *qdrant.Value_ListValue:
				walkKey(at, e, fn, false)
			default:
				fn(at, e)
			}
		}
	}
}

// keySep joins the keys of a path in keyString form.
const keySep = "\x00"

// keyString is the keys of at, array markers aside: the form in which a sampled key is
// compared with the locators.
func keyString(at []step) string {
	ks := make([]string, len(at))
	for i, s := range at {
		ks[i] = s.key
	}
	return strings.Join(ks, keySep)
}

// idPart stands in a key path for a part that may be a value.
const idPart = "{id}"

// plainPart is a part of a key path shown as it is: a raw key without digits.
var plainPart = regexp.MustCompile(`^[A-Za-z_-]{1,40}$`)

// keyPath writes at as a dotted key path in Qdrant's grammar (metadata.customer_id,
// messages[].email), a part that may be a value written {id} and a known tenant
// {tenant}: only plain keys without digits, and the names of want, are kept.
func keyPath(at []step, want map[string]bool, tenants []string) string {
	var b strings.Builder
	for i, s := range at {
		if i > 0 {
			b.WriteByte('.')
		}
		switch k := s.key; {
		case want[strings.ToLower(k)] && plainKeyPart(k):
			b.WriteString(k)
		case slices.Contains(tenants, k):
			b.WriteString(inventory.Tenant)
		case plainPart.MatchString(k) && !pii.Contains(k):
			b.WriteString(k)
		default:
			b.WriteString(idPart)
		}
		if s.list {
			b.WriteString("[]")
		}
	}
	return b.String()
}

// plainKeyPart reports whether k is one raw key of Qdrant's grammar.
func plainKeyPart(k string) bool { return plainKey.MatchString(k) && !strings.Contains(k, ".") }

// patternsIn names the pkg/pii patterns found in s.
func patternsIn(s string) []string {
	if !pii.Contains(s) {
		return nil
	}
	masked := pii.Mask(s)
	var out []string
	for _, p := range piiPatterns {
		if strings.Count(masked, p) > strings.Count(s, p) {
			out = append(out, p)
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }
