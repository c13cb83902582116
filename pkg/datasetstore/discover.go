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

	"github.com/lethe-erasure/lethe/pkg/datasetstore/shapes"
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
			for _, q := range shapes.Buckets(p, opts.Tenants) {
				r, _, err := s.rootOf(q.Prefix)
				if err != nil {
					continue
				}
				if old, ok := roots[r]; !ok || old == r && q.Shape != "" { // a template's shape wins
					roots[r] = cmp.Or(q.Shape, r)
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
			reasons, fields, err := shapes.Sample(ctx, b, key, opts, s.lim)
			if err != nil {
				return nil, err
			}
			if len(reasons) == 0 {
				continue
			}
			shape := roots[root] + shapes.KeyShape(key, opts)
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
	shapes.Suggest(inv, out)
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
			covers = append(covers, shapes.Cover(p))
		}
	}
	return covers, nil
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
