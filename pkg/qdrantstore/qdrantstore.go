// Package qdrantstore erases data subjects from Qdrant collections: the deletion.Store of
// inventory kind "qdrant".
//
// A subject's points are those whose payload matches any of: a subject field equal to the
// subject id, a hash field equal to its keyed pseudonym, or a session field equal to one of
// its session ids (legacy chunks written before the subject field existed carry only a
// session). Matches are exact keyword matches; on an array field any element matches.
// Erase counts the matches exactly, then deletes them with one filtered delete and
// wait=true, so every match goes however many there are; Verify counts them again. A
// tenant-scope erasure drops the tenant's collections. Call EnsureIndexes once per tenant
// so the filters use keyword payload indexes rather than scanning.
package qdrantstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// Verification methods reported by Verify.
const (
	MethodSubject = "qdrant exact count by filter"
	MethodTenant  = "qdrant collection dropped or exact count 0"
)

// Store is the deletion.Store for Qdrant. It is safe for concurrent use (the client is),
// idempotent, and never closes the client.
type Store struct {
	client *qdrant.Client
}

var _ deletion.Store = (*Store)(nil)

// New returns a Store over client.
func New(client *qdrant.Client) *Store { return &Store{client: client} }

// Erase deletes every point of s from every collection of st and reports, per collection
// (its name with the tenant filled in), the exact count that matched before the delete. A
// missing collection holds nothing and counts 0. For a tenant-scope s it drops the
// collections. Errors retrying cannot fix (InvalidArgument, PermissionDenied,
// Unimplemented, FailedPrecondition) are deletion.Permanent, all others transient; a
// subject with no identifier to match is a permanent error, never a filter that matches
// everything. Error messages name collections by template, never by an identifier.
func (st *Store) Erase(ctx context.Context, inv inventory.Store, s deletion.Subject) (deletion.Result, error) {
	if s.TenantScope() {
		return st.eraseTenant(ctx, inv, s)
	}
	f, err := subjectFilter(inv.Locators, s)
	if err != nil {
		return deletion.Result{}, err
	}
	var res deletion.Result
	for _, tmpl := range inv.Locators.Collections {
		loc := location(tmpl, s.Tenant)
		var deleted int64
		for _, coll := range collections(tmpl, s) {
			n, err := st.count(ctx, coll, f)
			if err != nil {
				return res, fmt.Errorf("qdrant: count %s: %w", loc, redact(err, coll, loc))
			}
			if n == 0 {
				continue
			}
			_, err = st.client.Delete(ctx, &qdrant.DeletePoints{
				CollectionName: coll,
				Wait:           qdrant.PtrOf(true),
				Points:         qdrant.NewPointsSelectorFilter(f),
			})
			if err != nil && status.Code(err) != codes.NotFound {
				return res, fmt.Errorf("qdrant: delete from %s: %w", loc, redact(classify(err), coll, loc))
			}
			deleted += n
		}
		res.Locations = append(res.Locations, event.LocationCount{Location: loc, Deleted: deleted})
	}
	return res, nil
}

// Verify counts, exactly and with the filter Erase uses, the points of s that remain in
// st's collections (for a tenant-scope s, every point of the tenant's collections).
func (st *Store) Verify(ctx context.Context, inv inventory.Store, s deletion.Subject) (event.Verification, error) {
	method, f := MethodTenant, (*qdrant.Filter)(nil)
	if !s.TenantScope() {
		var err error
		if f, err = subjectFilter(inv.Locators, s); err != nil {
			return event.Verification{}, err
		}
		method = MethodSubject
	} else if err := tenantTemplates(inv); err != nil {
		return event.Verification{}, err
	}
	v := event.Verification{Method: method}
	for _, tmpl := range inv.Locators.Collections {
		for _, coll := range collections(tmpl, s) {
			n, err := st.count(ctx, coll, f)
			if err != nil {
				loc := location(tmpl, s.Tenant)
				return event.Verification{}, fmt.Errorf("qdrant: verify %s: %w", loc, redact(err, coll, loc))
			}
			v.Remaining += n
		}
	}
	return v, nil
}

func (st *Store) eraseTenant(ctx context.Context, inv inventory.Store, s deletion.Subject) (deletion.Result, error) {
	if err := tenantTemplates(inv); err != nil {
		return deletion.Result{}, err
	}
	var res deletion.Result
	for _, tmpl := range inv.Locators.Collections {
		coll := location(tmpl, s.Tenant)
		n, err := st.count(ctx, coll, nil)
		if err != nil {
			return res, fmt.Errorf("qdrant: count %s: %w", coll, err)
		}
		if err := st.dropCollection(ctx, coll); err != nil {
			return res, fmt.Errorf("qdrant: drop %s: %w", coll, err)
		}
		res.Locations = append(res.Locations, event.LocationCount{Location: coll, Deleted: n})
	}
	return res, nil
}

// dropCollection deletes coll; a collection that is already gone is not an error.
func (st *Store) dropCollection(ctx context.Context, coll string) error {
	err := st.client.DeleteCollection(ctx, coll)
	if err == nil || status.Code(err) == codes.NotFound {
		return nil
	}
	// Qdrant answers "false" rather than NotFound when there was nothing to drop.
	if ok, xerr := st.client.CollectionExists(ctx, coll); xerr == nil && !ok {
		return nil
	}
	return classify(err)
}

// tenantTemplates refuses tenant erasure over collection templates that name a subject:
// the tenant's collections cannot be enumerated from them.
func tenantTemplates(inv inventory.Store) error {
	for _, tmpl := range inv.Locators.Collections {
		if inventory.Uses(tmpl, inventory.Subject) || inventory.Uses(tmpl, inventory.SubjectHash) || inventory.Uses(tmpl, inventory.Session) {
			return deletion.Permanent(fmt.Errorf("qdrant: collection template %q names a subject: tenant erasure cannot enumerate its collections", tmpl))
		}
	}
	return nil
}

// count is the exact count of points passing f in coll (all points for a nil f); a
// missing collection counts 0.
func (st *Store) count(ctx context.Context, coll string, f *qdrant.Filter) (int64, error) {
	n, err := st.client.Count(ctx, &qdrant.CountPoints{CollectionName: coll, Filter: f, Exact: qdrant.PtrOf(true)})
	if status.Code(err) == codes.NotFound {
		return 0, nil
	}
	if err != nil {
		return 0, classify(err)
	}
	return int64(n), nil
}

// subjectFilter is the one filter that finds s: should = subject fields match the id,
// hash fields match the pseudonym, session fields match any of the sessions. Empty
// identifiers are left out; with none left there is no safe filter (an empty one matches
// every point), which is a permanent error.
func subjectFilter(l inventory.Locators, s deletion.Subject) (*qdrant.Filter, error) {
	var should []*qdrant.Condition
	if s.ID != "" {
		for _, f := range l.SubjectFields {
			should = append(should, qdrant.NewMatchKeyword(f, s.ID))
		}
	}
	if s.Hash != "" {
		for _, f := range l.HashFields {
			should = append(should, qdrant.NewMatchKeyword(f, s.Hash))
		}
	}
	var sessions []string
	for _, ses := range s.Sessions {
		if ses != "" {
			sessions = append(sessions, ses)
		}
	}
	if len(sessions) > 0 {
		for _, f := range l.SessionFields {
			should = append(should, qdrant.NewMatchKeywords(f, sessions...))
		}
	}
	if len(should) == 0 {
		return nil, deletion.Permanent(errors.New("qdrant: the subject has no identifier that the inventory's payload fields can match"))
	}
	return &qdrant.Filter{Should: should}, nil
}

// collections are the collection names tmpl expands to for s: one per session when the
// template names a session, else one.
func collections(tmpl string, s deletion.Subject) []string {
	if !inventory.Uses(tmpl, inventory.Session) {
		return []string{inventory.Expand(tmpl, s.Vars(""), nil)}
	}
	var out []string
	for _, ses := range s.Sessions {
		if ses != "" {
			out = append(out, inventory.Expand(tmpl, s.Vars(ses), nil))
		}
	}
	return out
}

// location is tmpl with only the tenant filled in: it names where without naming whom.
func location(tmpl, tenant string) string {
	return strings.ReplaceAll(tmpl, inventory.Tenant, tenant)
}

// classify marks the errors retrying cannot fix as permanent: a refused request
// (InvalidArgument, FailedPrecondition, e.g. strict mode refusing an unindexed filter),
// PermissionDenied, and Unimplemented. Everything else — Unavailable, DeadlineExceeded,
// ResourceExhausted, Aborted, Internal, a cancelled context — stays transient.
func classify(err error) error {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unimplemented, codes.FailedPrecondition:
		return deletion.Permanent(err)
	}
	return err
}

// redacted hides a collection name that holds an identifier (a template naming the
// subject or a session) behind its template, keeping the error chain for errors.Is/As.
type redacted struct {
	err       error
	name, loc string
}

func (r redacted) Error() string { return strings.ReplaceAll(r.err.Error(), r.name, r.loc) }
func (r redacted) Unwrap() error { return r.err }

func redact(err error, name, loc string) error {
	if err == nil || name == loc || name == "" {
		return err
	}
	return redacted{err: err, name: name, loc: loc}
}
