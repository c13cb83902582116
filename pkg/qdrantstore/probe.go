package qdrantstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/status"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore/qdrantkey"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

var _ deletion.Prober = (*Store)(nil)

// Probe counts exactly, reading only, the points of each location of locs that hold s's
// id or a session id, matched as Erase matches (on an array, any element). A
// "<template>/<key path>" location is matched by that key in every collection the template
// names for s's tenant, and by the tenant field too where the store of inv with that
// template has one. A whole uncovered collection is matched by any of its Fields, across
// tenants (an over-report, never an under-report).
//
// A location is unexamined when it cannot be parsed, its key path holds {id}, it has no
// field, it names a template no store has, s has no identifier or tenant, Qdrant refuses
// the count, or lim.Time runs out. A missing collection is Found 0; lim.Items does not
// apply (one exact count per collection). A tenant-scope s gives nil. Errors of the whole
// call are classified as Verify's.
func (st *Store) Probe(ctx context.Context, inv *inventory.Inventory, locs []deletion.Uncovered, s deletion.Subject, lim deletion.ProbeLimits) ([]deletion.Probed, error) {
	if s.TenantScope() {
		return nil, nil
	}
	lim = lim.Defaults()
	ids := s.Identifiers()
	var names []string
	listed := false
	out := make([]deletion.Probed, 0, len(locs))
	for _, u := range locs {
		p := deletion.Probed{Location: u.Location}
		pl, why, err := probePlanOf(inv, u, s, ids)
		if err != nil {
			return nil, err
		}
		if why != "" {
			p.Unexamined = why
			out = append(out, p)
			continue
		}
		if pl.re != nil && !listed {
			err := st.retry(ctx, func() (err error) {
				names, err = st.client.ListCollections(ctx)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("qdrant: probe: list collections: %w", classify(err))
			}
			sort.Strings(names)
			listed = true
		}
		colls := pl.colls
		if pl.re != nil {
			for _, n := range names {
				if pl.re.MatchString(n) {
					colls = append(colls, n)
				}
			}
		}
		n, why, err := st.probeCount(ctx, colls, pl.filter, u.Location, lim)
		if err != nil {
			return nil, err
		}
		p.Found, p.Unexamined = n, why
		out = append(out, p)
	}
	return out, nil
}

// probePlan is where and how a probe counts one location: the named collections colls,
// plus those that re matches among the listed ones, with filter.
type probePlan struct {
	colls  []string
	re     *regexp.Regexp
	filter *qdrant.Filter
}

// probePlanOf plans the probe of u for s, or says why u cannot be examined; its error is
// a qdrant store of inv with invalid locators (permanent, as Discover's).
func probePlanOf(inv *inventory.Inventory, u deletion.Uncovered, s deletion.Subject, ids []string) (probePlan, string, error) {
	if u.Kind != Kind {
		return probePlan{}, fmt.Sprintf("a location of kind %q, not %s", u.Kind, Kind), nil
	}
	if len(ids) == 0 {
		return probePlan{}, "the subject has no id or session id to match", nil
	}
	tmpl, key, keyed := strings.Cut(u.Location, "/")
	if !keyed {
		pl, why := collectionPlan(u, ids)
		return pl, why, nil
	}
	if tmpl == "" || key == "" {
		return probePlan{}, "cannot parse the location as <collection template>/<key path>", nil
	}
	if strings.Contains(key, idPart) {
		return probePlan{}, "the key path has a value-like part ({id}): the key differs per point and no filter can name it", nil
	}
	if inventory.Uses(key, inventory.Tenant) {
		if s.Tenant == "" {
			return probePlan{}, "the key path names {tenant} and the subject has no tenant", nil
		}
		key = strings.ReplaceAll(key, inventory.Tenant, keyPart(s.Tenant))
	}
	if qdrantkey.Check(key) != nil {
		return probePlan{}, "the key path is not a payload key of Qdrant's grammar", nil
	}
	if inventory.CheckTemplate(tmpl, inventory.Tenant, inventory.Subject, inventory.SubjectHash, inventory.Session) != nil {
		return probePlan{}, "the collection template uses an unknown placeholder", nil
	}
	l, found, err := storeOfTemplate(inv, tmpl)
	switch {
	case err != nil:
		return probePlan{}, "", err
	case !found:
		return probePlan{}, "no qdrant store of the inventory has this collection template", nil
	case s.Tenant == "" && (l.TenantField != "" || inventory.Uses(tmpl, inventory.Tenant)):
		return probePlan{}, "the subject has no tenant to scope the probe to", nil
	}
	must, err := tenantMust(l, s.Tenant)
	if err != nil {
		return probePlan{}, "the subject has no tenant to scope the probe to", nil
	}
	f := &qdrant.Filter{Must: must, Should: matchAny(key, ids)}
	if checkFilter(f) != nil {
		return probePlan{}, "no safe filter matches the subject here", nil
	}
	return probePlan{re: templateRE(location(tmpl, s.Tenant)), filter: f}, "", nil
}

// rawKey is a key Qdrant's grammar takes unquoted.
var rawKey = regexp.MustCompile(`^[\pL\pN_-]+$`)

// keyPart writes k as one key of a payload key path: raw when the grammar allows,
// double-quoted otherwise (a key holding '"' or '\' then fails the grammar's check).
func keyPart(k string) string {
	if rawKey.MatchString(k) {
		return k
	}
	return `"` + k + `"`
}

// collectionPlan plans the probe of a whole uncovered collection: any of u.Fields matches
// an identifier, in the collection u.Location, with no tenant filter.
func collectionPlan(u deletion.Uncovered, ids []string) (probePlan, string) {
	if u.Location == "" {
		return probePlan{}, "cannot parse an empty location"
	}
	if len(u.Fields) == 0 {
		return probePlan{}, "no key path to match the subject by (personal data found by pattern only, or under value-like keys)"
	}
	var should []*qdrant.Condition
	for _, f := range u.Fields {
		if strings.ContainsAny(f, "{}") {
			return probePlan{}, "a field has a placeholder part ({id}, {tenant}): the key differs per point or tenant and no filter can name it"
		}
		if qdrantkey.Check(f) != nil {
			return probePlan{}, "a field is not a payload key of Qdrant's grammar"
		}
		should = append(should, matchAny(f, ids)...)
	}
	f := &qdrant.Filter{Should: should}
	if checkFilter(f) != nil {
		return probePlan{}, "no safe filter matches the subject here"
	}
	return probePlan{colls: []string{u.Location}, filter: f}, ""
}

// storeOfTemplate returns the locators of the first qdrant store of inv that has the
// collection template tmpl, as Discover names a location after it; a qdrant store of inv
// with invalid locators is a permanent error.
func storeOfTemplate(inv *inventory.Inventory, tmpl string) (Locators, bool, error) {
	if inv == nil {
		return Locators{}, false, nil
	}
	for _, e := range inv.OfKinds(Kind) {
		l, err := LocatorsOf(e)
		if err != nil {
			return Locators{}, false, err
		}
		if slices.Contains(l.Collections, tmpl) {
			return l, true, nil
		}
	}
	return Locators{}, false, nil
}

// probeCount sums the exact counts of f over colls within lim.Time. It returns why the
// location is unexamined when the bound runs out or Qdrant refuses a count, and an error
// (loc in place of the collection name) when ctx ends or a count fails transiently.
func (st *Store) probeCount(ctx context.Context, colls []string, f *qdrant.Filter, loc string, lim deletion.ProbeLimits) (int64, string, error) {
	lctx, cancel := context.WithTimeout(ctx, lim.Time)
	defer cancel()
	var total int64
	for _, coll := range colls {
		n, err := st.count(lctx, coll, f)
		switch {
		case err == nil:
			total += n
			continue
		case ctx.Err() != nil:
			return 0, "", fmt.Errorf("qdrant: probe %s: %w", loc, ctx.Err())
		case errors.Is(lctx.Err(), context.DeadlineExceeded):
			return 0, fmt.Sprintf("the time bound of %s ran out", lim.Time), nil
		case retry.IsPermanent(err):
			return 0, fmt.Sprintf("Qdrant refused the count (%s)", status.Code(err)), nil
		default:
			return 0, "", fmt.Errorf("qdrant: probe %s: %w", loc, redact(err, coll, loc))
		}
	}
	return total, "", nil
}
