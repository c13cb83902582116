// Package datasetstore is the deletion.Store of inventory kind "dataset": labelled
// evaluation datasets and exports in S3 (versioned or not) or in a local directory.
//
// Prefixes are expanded with the tenant only, so no identifier reaches an object name.
// Formats: CSV, TSV, JSONL, JSON arrays (each optionally gzipped) and Parquet. Text
// formats stream; a Parquet object is read whole, within Limits.
//
// A row belongs to the subject when a subject column equals its id or a session column
// one of its sessions, exactly. Erase rewrites each object without those rows and, in a
// versioned bucket, deletes every older version that holds them. A tenant-scope Erase
// deletes every dataset object under the prefixes. Verify reads everything back.
//
// An object that cannot be read is never rewritten: Verify reports it unexamined, so the
// store ends FAILED until it is fixed or excluded. Reports name objects by template and
// keyed reference, never by name. Details: docs/stores/dataset.md.
package datasetstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Verification methods.
const (
	MethodRows    = "dataset re-read current and all versions"
	MethodObjects = "dataset list current objects and all versions"
)

// oldVersions is appended to a location to report the older versions deleted there.
const oldVersions = " (old versions)"

// Store erases data subjects from datasets. It is safe for concurrent use.
type Store struct {
	s3     *s3.Client
	dir    objectstore.Bucket
	sum    *summaries           // nil: every object is read (WithSummaries)
	listed *listings            // nil: every operation lists what it reads (see VerifyBatch)
	hand   *objectstore.Handoff // a find's listings for the erases that follow; nil in verifications
	lim    Limits
	names  deletion.ItemNames // how reports name objects (WithKey)
}

var _ deletion.Store = (*Store)(nil)

// New returns a Store that serves "s3://" prefixes through s3c and "file://" or relative
// prefixes below the directory dirRoot. Either may be zero (nil, "") when the inventory has
// no such prefix; a prefix without its backend fails permanently.
func New(s3c *s3.Client, dirRoot string, opts ...Option) *Store {
	s := &Store{s3: s3c, hand: objectstore.NewHandoff(), lim: Limits{}.WithDefaults()}
	if dirRoot != "" {
		s.dir = objectstore.NewDir(dirRoot)
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// location is one expanded prefix.
type location struct {
	name     string // the prefix with the tenant filled in, as reported
	template string // the prefix as the inventory writes it
	bucket   objectstore.Bucket
	prefix   string   // key prefix inside bucket
	exclude  []string // patterns of the objects not to examine
	tenant   string
	sum      *summaries           // nil: no summaries
	listed   *listings            // nil: inventoryOf lists anew
	hand     *objectstore.Handoff // nil: no listing passes from a find to an erase
	lim      Limits
	names    deletion.ItemNames
}

// display names key in a report: its prefix template, the shape of the rest of its key
// and its keyed reference (deletion.ItemNames), so that a report names no tenant and no
// object.
func (l location) display(key string) string {
	return l.names.Name(l.template, strings.TrimPrefix(key, l.prefix), l.fullName(key))
}

// fullName is the name of key that its keyed reference is computed from: "s3://bucket/key"
// or "file://key" (key relative to the dataset root).
func (l location) fullName(key string) string {
	if b, ok := l.bucket.(*objectstore.S3); ok {
		return "s3://" + b.Name() + "/" + key
	}
	return "file://" + key
}

// excludes reports whether an exclude pattern matches key: a pattern without a slash
// matches the object's base name, one with a slash its key below the prefix; both ignore
// case.
func (l location) excludes(key string) bool {
	rel := strings.ToLower(strings.TrimPrefix(key, l.prefix))
	for _, p := range l.exclude {
		p = strings.ToLower(p)
		name := rel
		if !strings.Contains(p, "/") {
			name = path.Base(rel)
		}
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// locations expands and resolves the prefixes of st for s.
func (s *Store) locations(st inventory.Entry, subj deletion.Subject) ([]location, error) {
	ls, err := LocatorsOf(st)
	if err != nil {
		return nil, err
	}
	if err := subject.ValidateTenant(subj.Tenant); err != nil {
		return nil, retry.Permanent(fmt.Errorf("dataset store %q: %w", st.Name, err))
	}
	var out []location
	for _, tmpl := range ls.Prefixes {
		if subj.TenantScope() && inventory.Uses(tmpl, inventory.SubjectHash) {
			return nil, retry.Permanent(fmt.Errorf("dataset store %q: prefix %q names %s, which a tenant erasure cannot fill", st.Name, tmpl, inventory.SubjectHash))
		}
		name := inventory.Expand(tmpl, inventory.Vars{Tenant: subj.Tenant, SubjectHash: subj.Hash}, nil)
		l, err := s.resolve(name)
		if err != nil {
			return nil, retry.Permanent(fmt.Errorf("dataset store %q: prefix %q: %w", st.Name, tmpl, err))
		}
		l.template, l.exclude, l.tenant = tmpl, ls.Exclude, subj.Tenant
		if _, ok := l.bucket.(*objectstore.S3); ok {
			l.sum = s.sum
		}
		l.listed, l.hand, l.lim, l.names = s.listed, s.hand, s.lim, s.names
		out = append(out, l)
	}
	return out, nil
}

// resolve maps an expanded prefix to its bucket and key prefix.
func (s *Store) resolve(name string) (location, error) {
	scheme, rest, ok := strings.Cut(name, "://")
	if !ok {
		scheme, rest = "file", name
	}
	switch scheme {
	case "s3":
		bucket, key, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return location{}, errors.New("no bucket")
		}
		if s.s3 == nil {
			return location{}, errors.New("no s3 client configured")
		}
		return location{name: name, bucket: objectstore.NewS3(s.s3, bucket), prefix: key}, nil
	case "file":
		if s.dir == nil {
			return location{}, errors.New("no dataset directory configured")
		}
		if rest != "" && !fs.ValidPath(strings.TrimSuffix(rest, "/")) {
			return location{}, errors.New("path must be relative, clean and inside the dataset root")
		}
		return location{name: name, bucket: s.dir, prefix: rest}, nil
	}
	return location{}, fmt.Errorf("unsupported scheme %q", scheme)
}

// matcherFor builds the row matcher of a subject-scope request.
func matcherFor(st inventory.Entry, subj deletion.Subject) (*matcher, error) {
	l, err := LocatorsOf(st)
	if err != nil {
		return nil, err
	}
	m := newMatcher(l.SubjectColumns, l.SessionColumns, subj.ID, subj.Sessions)
	if m.id == "" && len(m.sessions) == 0 {
		return nil, retry.Permanent(fmt.Errorf("dataset store %q: subject has neither an id nor a session", st.Name))
	}
	return m, nil
}

// Erase removes s from the datasets of st; see the package documentation for what it
// deletes and reports. On error the result holds the locations completed so far.
func (s *Store) Erase(ctx context.Context, st inventory.Entry, subj deletion.Subject) (deletion.Result, error) {
	var res deletion.Result
	locs, err := s.locations(st, subj)
	if err != nil {
		return res, err
	}
	var m *matcher
	if !subj.TenantScope() {
		if m, err = matcherFor(st, subj); err != nil {
			return res, err
		}
	}
	mp, err := mentionsOf(st, subj)
	if err != nil {
		return res, err
	}
	for _, l := range locs {
		var c counts
		if subj.TenantScope() {
			c, err = tenantData(ctx, l, true)
		} else {
			c, err = eraseRows(ctx, l, m)
		}
		res.Locations = append(res.Locations, c.of(l.name, c.current, c.old)...)
		if err != nil {
			return res, fmt.Errorf("dataset store %q: %w", st.Name, err)
		}
		mc, err := mp.erase(ctx, l, m)
		res.Locations = append(res.Locations, mc...)
		if err != nil {
			return res, fmt.Errorf("dataset store %q: mentions: %w", st.Name, err)
		}
	}
	return res, nil
}

// Verify counts what of s remains in the datasets of st: matching rows in every current
// object and remaining version, or, for a tenant, the dataset objects and versions left.
// Every object or version it cannot read or decode is counted in Unexamined and named in
// UnexaminedItems with the reason; the objects the inventory excludes are named in
// Excluded. Rows that still mention the subject's identifiers outside the named columns
// (see MentionsFail) are counted in Mentions, apart from Remaining, and each object holding
// them is named in UnexaminedItems with its columns (not counted as unexamined).
func (s *Store) Verify(ctx context.Context, st inventory.Entry, subj deletion.Subject) (event.Verification, error) {
	v := event.Verification{Method: MethodRows}
	if subj.TenantScope() {
		v.Method = MethodObjects
	}
	locs, m, err := s.targets(st, subj)
	if err != nil {
		return v, err
	}
	mp, err := mentionsOf(st, subj)
	if err != nil {
		return v, err
	}
	for _, l := range locs {
		if err := mp.verify(ctx, l, m, &v); err != nil {
			return v, fmt.Errorf("dataset store %q: verify mentions: %w", st.Name, err)
		}
		c, err := remaining(ctx, l, m)
		if err != nil {
			return v, fmt.Errorf("dataset store %q: verify: %w", st.Name, err)
		}
		v.Remaining += c.current
		v.Unexamined += int64(len(c.unexamined))
		v.UnexaminedItems = append(v.UnexaminedItems, c.unexamined...)
		v.Excluded = append(v.Excluded, c.excluded...)
	}
	return v, nil
}
