// Package shapes names dataset locations outside the inventory: the shapes discovery
// reports for object keys (placeholders for what may identify someone), the patterns
// matching the keys of a shape or the objects under a prefix template, a sample of an
// object's fields, and the inventory entry suggested to cover a location.
package shapes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/lethe-erasure/lethe/pkg/datasetstore/rows"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
)

// kind is the inventory kind of the entries suggested.
const kind = "dataset"

// Root is a prefix whose bucket is filled in and the shape of its root in reports:
// "s3://data-{tenant}/" for a bucket per tenant, "" when the bucket is named as it is.
type Root struct{ Prefix, Shape string }

// Buckets returns the prefix p with its bucket name filled in for each known tenant
// when the bucket name is a template (a bucket per tenant), else p itself. A bucket named
// by a subject hash cannot be enumerated and gives none.
func Buckets(p string, tenants []string) []Root {
	rest, ok := strings.CutPrefix(p, "s3://")
	if !ok {
		return []Root{{Prefix: p}}
	}
	bucket, _, _ := strings.Cut(rest, "/")
	if !strings.Contains(bucket, "{") {
		return []Root{{Prefix: p}}
	}
	var out []Root
	for _, t := range tenants {
		if b := inventory.Expand(bucket, inventory.Vars{Tenant: t}, nil); !strings.Contains(b, "{") {
			out = append(out, Root{Prefix: "s3://" + b + "/", Shape: "s3://" + bucket + "/"})
		}
	}
	return out
}

// Cover matches every object name under the prefix template p, a placeholder matching
// any one path part; a prefix without a scheme is a directory one (file://).
func Cover(p string) *regexp.Regexp {
	if !strings.Contains(p, "://") {
		p = "file://" + p
	}
	return regexp.MustCompile("^" + pattern(p))
}

// pattern is the regular expression of the template t: its text quoted, each placeholder
// matching one path part.
func pattern(t string) string {
	var b strings.Builder
	for rest := t; rest != ""; {
		i := strings.IndexByte(rest, '{')
		j := strings.IndexByte(rest, '}')
		if i < 0 || j < i {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:i]))
		b.WriteString(`[^/]+`)
		rest = rest[j+1:]
	}
	return b.String()
}

// KeyShape replaces the parts of key that may identify someone by placeholders: the file
// name always ({id} with its known extension, deletion.KnownExtension), a directory named
// after a known tenant by {tenant}, one holding digits, '@', '+' or a pii pattern (or
// longer than 40 bytes) by {id}.
func KeyShape(key string, opts deletion.DiscoverOptions) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		switch {
		case i == len(parts)-1:
			parts[i] = "{id}" + deletion.KnownExtension(p)
		case slices.Contains(opts.Tenants, p):
			parts[i] = "{tenant}"
		case strings.ContainsAny(p, "0123456789@+") || deletion.PersonalValue(p) || len(p) > 40:
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

// Sample reads up to opts.Sample rows of the object key, within its first
// sampleBytes (a Parquet object: within lim), and says why they look like personal data
// and which of its fields are identity-like (their paths, see valueLike); an object that
// is no dataset gives no reason.
func Sample(ctx context.Context, b objectstore.Bucket, key string, opts deletion.DiscoverOptions, lim rows.Limits) (reasons, paths []string, err error) {
	obj, err := b.Get(ctx, key)
	if errors.Is(err, objectstore.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer obj.Body.Close()
	fields, values, err := rows.Sample(key, obj.Body, opts.Sample, lim)
	if err != nil {
		return nil, nil, err
	}
	var named []string // the last part of each field path only: a map key above may be a value
	for _, f := range fields {
		c := f[strings.LastIndexByte(f, '.')+1:]
		if !opts.IdentityField(c) || deletion.PersonalValue(c) {
			continue
		}
		if !slices.Contains(named, c) {
			named = append(named, c)
		}
		if parts := strings.Split(f, "."); !slices.ContainsFunc(parts[:len(parts)-1], valueLike) && !slices.Contains(paths, f) {
			paths = append(paths, f)
		}
	}
	if len(named) > 0 {
		reasons = append(reasons, "identity-like columns "+strings.Join(named, ", "))
	}
	if slices.ContainsFunc(values, deletion.PersonalValue) {
		reasons = append(reasons, "values match personal-data patterns")
	}
	return reasons, paths, nil
}

// valueLike reports whether a part of a field path above its last may be a value rather
// than a name (a map keyed by customer ids or email addresses): empty, longer than 40
// bytes, holding a digit, '@' or '+', or matching a pii pattern. Such a path is never
// reported.
func valueLike(part string) bool {
	return part == "" || len(part) > 40 || strings.ContainsAny(part, "0123456789@+") || deletion.PersonalValue(part)
}

// FileExtension returns the extension the file name of the key shape key keeps after its
// placeholder ("{id}.csv.gz": ".csv.gz", "{id}": ""), and false when the file name is no
// placeholder.
func FileExtension(key string) (string, bool) {
	name := path.Base(key)
	if !strings.HasPrefix(name, "{") {
		return "", false
	}
	_, ext, ok := strings.Cut(name, "}")
	return ext, ok
}

// Match matches the keys of the key shape key: each placeholder stands for one path part
// (or what precedes the extension of a file name). prefix is the part of key before its
// first placeholder, to list.
func Match(key string) (re *regexp.Regexp, prefix string) {
	prefix, _, _ = strings.Cut(key, "{")
	return regexp.MustCompile("^" + pattern(key) + "$"), prefix
}

// Suggest fills in the Suggest of every location of out: a new dataset store, as the
// inventory file writes it (one entry of its stores, a YAML mapping), whose prefix
// (suggestPrefix) covers the location and whose subject_columns and session_columns are
// the location's Fields, a session-like name (sessionField) going to session_columns.
// Locations sharing a prefix share one entry naming the Fields of all of them. The entry's
// name is "dataset-" and the prefix's last named part, unused in inv and among the entries
// suggested. The entry passes Validate unless the location lies outside any {tenant} path
// part (a prefix shared by tenants, which the kind refuses) or no Fields were found; a YAML
// comment then says what to do.
func Suggest(inv *inventory.Inventory, out []deletion.Uncovered) {
	var prefixes []string
	of := map[string][]int{}
	for i, u := range out {
		p := suggestPrefix(u.Location)
		if of[p] == nil {
			prefixes = append(prefixes, p)
		}
		of[p] = append(of[p], i)
	}
	taken := map[string]bool{}
	for _, n := range inv.Names() {
		taken[n] = true
	}
	for _, p := range prefixes {
		fields := map[string]bool{}
		for _, i := range of[p] {
			for _, f := range out[i].Fields {
				fields[f] = true
			}
		}
		name := inventory.UniqueName(kind+"-"+prefixName(p), taken)
		y := suggestion(name, p, slices.Sorted(maps.Keys(fields)))
		for _, i := range of[p] {
			out[i].Suggest = y
		}
	}
}

// suggestPrefix is the prefix of a store covering the location shape loc (as Discover
// writes it): its root and the directories before the first that is a placeholder other
// than {tenant}.
func suggestPrefix(loc string) string {
	root, key := SplitLocation(loc)
	parts := strings.Split(key, "/")
	parts = parts[:len(parts)-1] // the file name
	for i, p := range parts {
		if strings.Contains(p, "{") && p != inventory.Tenant {
			parts = parts[:i]
			break
		}
	}
	if len(parts) == 0 {
		return root
	}
	return root + strings.Join(parts, "/") + "/"
}

// SplitLocation splits a location shape into its root ("s3://bucket/" or "file://") and
// the key shape below it.
func SplitLocation(loc string) (root, key string) {
	if rest, ok := strings.CutPrefix(loc, "s3://"); ok {
		bucket, key, _ := strings.Cut(rest, "/")
		return "s3://" + bucket + "/", key
	}
	return "file://", strings.TrimPrefix(loc, "file://")
}

var nonName = regexp.MustCompile(`[^a-z0-9_-]+`)

// prefixName is the last part of prefix p that is no placeholder, made an inventory name.
func prefixName(p string) string {
	_, rest, _ := strings.Cut(p, "://")
	parts := strings.FieldsFunc(rest, func(r rune) bool { return r == '/' })
	for i := len(parts) - 1; i >= 0; i-- {
		n := strings.Trim(nonName.ReplaceAllString(strings.ToLower(strings.ReplaceAll(parts[i], inventory.Tenant, "")), "-"), "-_")
		if n != "" {
			return n
		}
	}
	return "datasets"
}

// suggestion writes the dataset store name with the prefix p and the columns fields.
func suggestion(name, p string, fields []string) string {
	var subj, sess []string
	for _, f := range fields {
		if inventory.SessionLike(f) {
			sess = append(sess, f)
		} else {
			subj = append(subj, f)
		}
	}
	loc := &yaml.Node{Kind: yaml.MappingNode}
	prefixes := inventory.YAMLString("prefixes")
	if !inventory.Uses(p, inventory.Tenant) {
		prefixes.HeadComment = fmt.Sprintf("Tenants share this prefix (it holds no {tenant}), which the kind refuses: keep\n"+
			"each tenant's datasets under a prefix of its own, such as\n%s{tenant}/, and list that.", p)
	}
	ps := inventory.YAMLList([]string{p})
	ps.Content[0].Style = yaml.DoubleQuotedStyle
	loc.Content = append(loc.Content, prefixes, ps)
	if len(subj) > 0 || len(sess) == 0 {
		k := inventory.YAMLString("subject_columns")
		if len(subj) == 0 {
			k.HeadComment = "No column looked identity-like by its name: name the columns holding the subject id\n" +
				"(or session_columns, a session id)."
		}
		loc.Content = append(loc.Content, k, inventory.YAMLList(subj))
	}
	if len(sess) > 0 {
		loc.Content = append(loc.Content, inventory.YAMLString("session_columns"), inventory.YAMLList(sess))
	}
	return inventory.EntryYAML(name, kind, loc)
}
