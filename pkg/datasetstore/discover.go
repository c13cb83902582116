package datasetstore

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/aws/smithy-go"

	"github.com/lethe-erasure/lethe/pkg/datasetstore/rows"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
)

var _ deletion.Discoverer = (*Store)(nil)

// maxDiscoverObjects bounds the objects one discovery lists per bucket.
const maxDiscoverObjects = 10000

// errEnough stops a listing.
var errEnough = errors.New("enough objects listed")

// Discover lists the buckets the inventory's s3:// prefixes name (a bucket per tenant for
// each known tenant, a missing one skipped) and the dataset directory (at most 10,000
// objects each), and reports the datasets outside every prefix of every
// dataset store of inv ({tenant} and {subject_hash} match any one path part) whose sampled
// rows (opts.Sample of them) have identity-like columns or fields, or values of a pii
// pattern. A dataset is an object of a known extension or whose content is one (CSV, TSV,
// JSONL, JSON arrays, Parquet, gzip-compressed or not); objects that are no datasets are
// skipped. Objects are reported grouped by shape: the bucket (a bucket per tenant as its
// template, {tenant} in it), then the key with its file name replaced by {id} (a known
// extension kept), known tenants by {tenant} and every directory holding digits or a pii
// pattern by {id}, so no file name reaches a report.
//
// Fields are the identity-like columns and field paths found in a shape (dotted for nested
// JSON fields and Parquet groups; a path with a part that may be a value, such as a map key
// holding digits, is left out). Suggest is a new dataset store covering the shape (see
// suggest).
func (s *Store) Discover(ctx context.Context, inv *inventory.Inventory, opts deletion.DiscoverOptions) ([]deletion.Uncovered, error) {
	opts = opts.Defaults()
	covers, err := coverREs(inv)
	if err != nil {
		return nil, err
	}
	roots := map[string]string{} // root -> its shape in reports
	for _, st := range inv.OfKinds(Kind) {
		l, _ := LocatorsOf(st) // checked by coverREs
		for _, p := range l.Prefixes {
			for _, q := range bucketsOf(p, opts.Tenants) {
				r, _, err := s.rootOf(q.prefix)
				if err != nil {
					continue
				}
				if old, ok := roots[r]; !ok || old == r && q.shape != "" { // a template's shape wins
					roots[r] = cmp.Or(q.shape, r)
				}
			}
		}
	}
	if s.dir != nil {
		roots["file://"] = "file://"
	}
	type group struct {
		count   int64
		reasons map[string]bool
		fields  map[string]bool
	}
	groups := map[string]*group{}
	for _, root := range slices.Sorted(maps.Keys(roots)) {
		_, b, err := s.rootOf(root)
		if err != nil {
			continue
		}
		var keys []string
		err = b.List(ctx, "", func(key string) error {
			if len(keys) >= maxDiscoverObjects {
				return errEnough
			}
			keys = append(keys, key)
			return nil
		})
		var api smithy.APIError
		switch {
		case errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket":
			continue // a tenant's bucket not created yet
		case errors.Is(err, fs.ErrNotExist):
			continue // no dataset directory yet: nothing outside the inventory there
		case err != nil && !errors.Is(err, errEnough):
			return nil, err
		}
		sort.Strings(keys)
		for _, key := range keys {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			name := root + key
			if slices.ContainsFunc(covers, func(re *regexp.Regexp) bool { return re.MatchString(name) }) {
				continue
			}
			reasons, fields, err := sampleDataset(ctx, b, key, opts, s.lim)
			if err != nil {
				return nil, err
			}
			if len(reasons) == 0 {
				continue
			}
			shape := roots[root] + keyShape(key, opts)
			g := groups[shape]
			if g == nil {
				g = &group{reasons: map[string]bool{}, fields: map[string]bool{}}
				groups[shape] = g
			}
			g.count++
			for _, r := range reasons {
				g.reasons[r] = true
			}
			for _, f := range fields {
				g.fields[f] = true
			}
		}
	}
	var out []deletion.Uncovered
	for shape, g := range groups {
		out = append(out, deletion.Uncovered{Kind: Kind, Location: shape, Reason: strings.Join(slices.Sorted(maps.Keys(g.reasons)), "; "),
			Count: g.count, Fields: slices.Sorted(maps.Keys(g.fields))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Location < out[j].Location })
	suggest(inv, out)
	return out, nil
}

// coverREs are the patterns of the object names the dataset stores of inv cover (coverRE).
func coverREs(inv *inventory.Inventory) ([]*regexp.Regexp, error) {
	var covers []*regexp.Regexp
	for _, st := range inv.OfKinds(Kind) {
		l, err := LocatorsOf(st)
		if err != nil {
			return nil, err
		}
		for _, p := range l.Prefixes {
			covers = append(covers, coverRE(p))
		}
	}
	return covers, nil
}

// rootPrefix is a prefix whose bucket is filled in and the shape of its root in reports:
// "s3://data-{tenant}/" for a bucket per tenant, "" when the bucket is named as it is.
type rootPrefix struct{ prefix, shape string }

// bucketsOf returns the prefix p with its bucket name filled in for each known tenant
// when the bucket name is a template (a bucket per tenant), else p itself. A bucket named
// by a subject hash cannot be enumerated and gives none.
func bucketsOf(p string, tenants []string) []rootPrefix {
	rest, ok := strings.CutPrefix(p, "s3://")
	if !ok {
		return []rootPrefix{{prefix: p}}
	}
	bucket, _, _ := strings.Cut(rest, "/")
	if !strings.Contains(bucket, "{") {
		return []rootPrefix{{prefix: p}}
	}
	var out []rootPrefix
	for _, t := range tenants {
		if b := inventory.Expand(bucket, inventory.Vars{Tenant: t}, nil); !strings.Contains(b, "{") {
			out = append(out, rootPrefix{prefix: "s3://" + b + "/", shape: "s3://" + bucket + "/"})
		}
	}
	return out
}

// rootOf returns the root a prefix lives in ("s3://bucket/" or "file://") and its bucket.
func (s *Store) rootOf(prefix string) (string, objectstore.Bucket, error) {
	if rest, ok := strings.CutPrefix(prefix, "s3://"); ok {
		b, _, _ := strings.Cut(rest, "/")
		l, err := s.resolve("s3://" + b + "/")
		return "s3://" + b + "/", l.bucket, err
	}
	l, err := s.resolve("file://")
	return "file://", l.bucket, err
}

// coverRE matches every object name under the prefix template p, a placeholder matching
// any one path part; a prefix without a scheme is a directory one (file://).
func coverRE(p string) *regexp.Regexp {
	if !strings.Contains(p, "://") {
		p = "file://" + p
	}
	var b strings.Builder
	b.WriteString("^")
	for rest := p; rest != ""; {
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
	return regexp.MustCompile(b.String())
}

// keyShape replaces the parts of key that may identify someone by placeholders: the file
// name always ({id} with its known extension, deletion.KnownExtension), a directory named
// after a known tenant by {tenant}, one holding digits, '@', '+' or a pii pattern (or
// longer than 40 bytes) by {id}.
func keyShape(key string, opts deletion.DiscoverOptions) string {
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

// sampleDataset reads up to opts.Sample rows of the object key, within its first
// sampleBytes (a Parquet object: within lim), and says why they look like personal data
// and which of its fields are identity-like (their paths, see valueLike); an object that
// is no dataset gives no reason.
func sampleDataset(ctx context.Context, b objectstore.Bucket, key string, opts deletion.DiscoverOptions, lim Limits) (reasons, paths []string, err error) {
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
