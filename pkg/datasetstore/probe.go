package datasetstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/smithy-go"

	"github.com/lethe-erasure/lethe/pkg/datasetstore/rows"
	"github.com/lethe-erasure/lethe/pkg/datasetstore/shapes"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

var _ deletion.Prober = (*Store)(nil)

// Probe counts, per location of locs, the rows of its current objects that hold an
// identifier of subj. It reads only. The objects are those the location's shape names,
// with {tenant} filled in and any other placeholder one path part, less the objects a
// dataset store of inv covers. A row counts when one of the location's Fields (dotted
// paths for nested fields) equals subj's id or a session, exactly, as Erase matches.
// Older versions are not read. A shape without {tenant} is shared by tenants: every
// tenant's rows count (an over-report, never an under-report).
//
// A location is unexamined when it names no Fields, its root cannot be reached, an object
// cannot be read or decoded (named by shape and keyed reference), more than lim.Items
// objects are to be read, or lim.Time runs out; Found then counts what was read. A missing
// bucket or directory is Found 0. A tenant-scope subj gives nil. An invalid tenant, a
// subject without identifiers or an invalid inventory entry is a permanent error.
func (s *Store) Probe(ctx context.Context, inv *inventory.Inventory, locs []deletion.Uncovered, subj deletion.Subject, lim deletion.ProbeLimits) ([]deletion.Probed, error) {
	if subj.TenantScope() {
		return nil, nil
	}
	if err := subject.ValidateTenant(subj.Tenant); err != nil {
		return nil, retry.Permanent(fmt.Errorf("dataset probe: %w", err))
	}
	if len(subj.Identifiers()) == 0 {
		return nil, retry.Permanent(errors.New("dataset probe: subject has neither an id nor a session"))
	}
	lim = lim.Defaults()
	covers, err := coverREs(inv)
	if err != nil {
		return nil, err
	}
	return deletion.EachProbed(locs, Kind, func(loc deletion.Uncovered) (deletion.Probed, error) {
		p, err := s.probe(ctx, covers, loc, subj, lim)
		if err != nil {
			return p, fmt.Errorf("dataset probe: %w", err)
		}
		return p, nil
	})
}

// probe is Probe of one location.
func (s *Store) probe(ctx context.Context, covers []*regexp.Regexp, loc deletion.Uncovered, subj deletion.Subject, lim deletion.ProbeLimits) (deletion.Probed, error) {
	p := deletion.Probed{Location: loc.Location}
	if len(loc.Fields) == 0 {
		p.Unexamined = "no identity-like field found there to match: name its columns in an inventory entry"
		return p, nil
	}
	root, key := shapes.SplitLocation(strings.ReplaceAll(loc.Location, inventory.Tenant, subj.Tenant))
	if strings.Contains(root, "{") {
		p.Unexamined = "its bucket is no bucket name nor one per tenant: cannot list it"
		return p, nil
	}
	_, b, err := s.rootOf(root)
	if err != nil {
		p.Unexamined = "cannot reach it: " + err.Error()
		return p, nil
	}
	shape, listPrefix := shapes.Match(key)
	ext, fileShaped := shapes.FileExtension(key)
	lctx, cancel := context.WithTimeout(ctx, lim.Time)
	defer cancel()
	timedOut := func() bool { return lctx.Err() != nil && ctx.Err() == nil }
	var why []string
	bound := func() {
		why = append(why, fmt.Sprintf("the probe's time bound of %s was reached", lim.Time))
	}
	var keys []string
	err = b.List(lctx, listPrefix, func(k string) error {
		if strings.HasPrefix(k, summaryRoot) || !shape.MatchString(k) || fileShaped && deletion.KnownExtension(path.Base(k)) != ext ||
			slices.ContainsFunc(covers, func(re *regexp.Regexp) bool { return re.MatchString(root + k) }) {
			return nil
		}
		if len(keys) > lim.Items {
			return errEnough
		}
		keys = append(keys, k)
		return nil
	})
	var api smithy.APIError
	switch {
	case timedOut():
		bound()
		keys = nil
	case errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket", errors.Is(err, fs.ErrNotExist):
		return p, nil // nothing there (any more)
	case err != nil && !errors.Is(err, errEnough):
		return p, err
	}
	slices.Sort(keys)
	if len(keys) > lim.Items {
		keys = keys[:lim.Items]
		why = append(why, fmt.Sprintf("more objects than the probe's bound of %d", lim.Items))
	}
	m := newMatcher(loc.Fields, loc.Fields, subj.ID, subj.Sessions)
	var unread []string
	for _, k := range keys {
		n, err := s.probeObject(lctx, b, k, m)
		if timedOut() {
			bound()
			break
		}
		switch {
		case ctx.Err() != nil:
			return p, ctx.Err()
		case errors.Is(err, objectstore.ErrNotFound):
			continue // gone since the listing
		case errors.Is(err, rows.ErrMalformed):
			unread = append(unread, s.names.Name(loc.Location, "", root+k)+": "+reason(err))
			continue
		case err != nil:
			return p, err
		}
		p.Found += int64(n)
	}
	if len(unread) > 0 {
		msg := "cannot read " + unread[0]
		if len(unread) > 1 {
			msg += fmt.Sprintf(" (and %d more objects)", len(unread)-1)
		}
		why = append([]string{msg}, why...)
	}
	p.Unexamined = strings.Join(why, "; ")
	return p, nil
}

// probeObject counts the rows m matches in the current object of key, reading it within
// ctx.
func (s *Store) probeObject(ctx context.Context, b objectstore.Bucket, key string, m *matcher) (int, error) {
	obj, err := b.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	defer obj.Body.Close()
	return rows.Rewrite(key, objectstore.ContextReader(ctx, obj.Body), nil, m.rows(), s.lim)
}
