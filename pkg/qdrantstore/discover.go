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
// id order, default DefaultDiscoverSample) carry an identity-like field — a key, at any
// depth (metadata.customer_id), whose last name is one of opts.Fields (case-insensitive;
// default DefaultIdentityFields) — or a string value in which pkg/pii finds personal
// data. A collection is covered when it matches a collection template of a qdrant store:
// with opts.Tenants, the template with {tenant} filled in by one of them; without, the
// template with {tenant} as a wildcard; {subject}, {subject_hash} and {session} are
// always wildcards. An alias is not a collection and is not listed.
//
// Each Uncovered names the collection, the field names and pattern names found (never a
// value), and Count, the number of sampled points that carry any of them. Discover only
// reads. Its errors are classified as Erase's are; an inventory qdrant store with invalid
// locators is a permanent error.
func (st *Store) Discover(ctx context.Context, inv *inventory.Inventory, opts deletion.DiscoverOptions) ([]deletion.Uncovered, error) {
	covered, err := coverage(inv, opts.Tenants)
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
	for _, name := range names {
		if covered(name) {
			continue
		}
		u, err := st.sampleCollection(ctx, name, want, sample)
		if err != nil {
			return nil, err
		}
		if u.Count > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

// coverage returns whether a collection name is covered by a qdrant store of inv.
func coverage(inv *inventory.Inventory, tenants []string) (func(string) bool, error) {
	var res []*regexp.Regexp
	for _, s := range inv.OfKinds(Kind) {
		l, err := LocatorsOf(s)
		if err != nil {
			return nil, err
		}
		for _, tmpl := range l.Collections {
			if len(tenants) == 0 {
				res = append(res, templateRE(tmpl))
				continue
			}
			for _, t := range tenants {
				res = append(res, templateRE(strings.ReplaceAll(tmpl, inventory.Tenant, t)))
			}
		}
	}
	return func(name string) bool {
		for _, re := range res {
			if re.MatchString(name) {
				return true
			}
		}
		return false
	}, nil
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

// sampleCollection reads up to n points of coll and reports the identity-like fields and
// personal-data patterns they carry.
func (st *Store) sampleCollection(ctx context.Context, coll string, want map[string]bool, n int) (deletion.Uncovered, error) {
	u := deletion.Uncovered{Kind: Kind, Location: coll}
	var pts []*qdrant.RetrievedPoint
	err := st.retry(ctx, func() (err error) {
		pts, err = st.client.Scroll(ctx, &qdrant.ScrollPoints{
			CollectionName: coll, Limit: qdrant.PtrOf(uint32(n)), WithPayload: qdrant.NewWithPayload(true),
		})
		return err
	})
	if err != nil {
		return u, fmt.Errorf("qdrant: sample %s: %w", coll, classify(err))
	}
	fields, patterns := map[string]bool{}, map[string]bool{}
	for _, p := range pts {
		hit := false
		walkPayload(p.GetPayload(), "", func(path, last string, v *qdrant.Value) {
			if want[strings.ToLower(last)] {
				fields[path], hit = true, true
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
	return u, nil
}

// walkPayload calls fn for every value of payload with its dotted path ("[]" for array
// elements) and its last key.
func walkPayload(m map[string]*qdrant.Value, prefix string, fn func(path, last string, v *qdrant.Value)) {
	for k, v := range m {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		walkValue(v, path, k, fn)
	}
}

func walkValue(v *qdrant.Value, path, last string, fn func(path, last string, v *qdrant.Value)) {
	fn(path, last, v)
	switch k := v.GetKind().(type) {
	case *qdrant.Value_StructValue:
		walkPayload(k.StructValue.GetFields(), path, fn)
	case *qdrant.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			if _, ok := e.GetKind().(*qdrant.Value_StructValue); ok {
				walkPayload(e.GetStructValue().GetFields(), path+"[]", fn)
			} else if _, ok := e.GetKind().(*qdrant.Value_StringValue); ok {
				walkValue(e, path+"[]", "", fn)
			}
		}
	}
}

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
