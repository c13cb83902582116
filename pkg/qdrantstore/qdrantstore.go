// Package qdrantstore erases data subjects from Qdrant collections: the deletion.Store of
// inventory kind "qdrant".
//
// A subject's points are those whose payload matches any of: a subject field equal to the
// subject id, a hash field equal to its keyed pseudonym, or a session field equal to one of
// its session ids (legacy chunks written before the subject field existed carry only a
// session). An identifier matches a string value equal to it and, when it is a decimal
// integer, an integer value equal to it; a UUID identifier matches its lower- and
// upper-case spellings too. On an array field any element matches. Every filter is checked
// before it is sent so that it can never be one Qdrant reads as matching every point.
//
// A collection is the tenant's own ({tenant} in its name) or shared by tenants; a store
// over shared collections names the payload field holding the tenant (Locators
// TenantField), and every filter it sends — erasure, count, verification, mentions,
// semantic search — also requires that field to equal the request's tenant.
//
// Erase counts the matches exactly, then always deletes by filter with wait=true — a count
// can miss points a delete still removes (points written with wait=false and not yet
// applied, or deferred until optimized), so a count of 0 never skips the delete — and
// reports the count as what matched before the delete. A write Qdrant answers with any
// status but Completed is a transient failure. Verify counts again. A tenant-scope erasure
// deletes the points of the tenant field's tenant when the store has one, and otherwise
// drops the tenant's collections, resolving a name that is an alias to the collection it
// names. Call EnsureIndexes once per tenant so the filters read payload indexes rather
// than scanning.
package qdrantstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/qdrant/go-client/qdrant"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Verification methods reported by Verify.
const (
	MethodSubject      = "qdrant exact count by filter"
	MethodTenant       = "qdrant collection dropped or exact count 0"
	MethodTenantFilter = "qdrant exact count by tenant field"
)

// Defaults for the FailedPrecondition retries of a Store.
const (
	DefaultPreconditionTries   = 4
	DefaultPreconditionBackoff = 250 * time.Millisecond
)

// Store is the deletion.Store for Qdrant. It is safe for concurrent use (the client is),
// idempotent, and never closes the client. Set its fields before first use.
type Store struct {
	client *qdrant.Client

	// Log receives warnings that name no identifier, such as a subject field EnsureIndexes
	// found indexed with another type and kept. Nil logs nothing.
	Log *zap.Logger
	// PreconditionTries is how many times one request is sent while Qdrant answers
	// FailedPrecondition, which it does in passing cluster states ("No target shard
	// found" during a shard transfer); 0 means DefaultPreconditionTries. Waits double from
	// PreconditionBackoff (0: DefaultPreconditionBackoff). When the tries run out the error
	// is transient, and the worker's own attempts bound the rest.
	PreconditionTries   int
	PreconditionBackoff time.Duration

	pending pending // vectors read by Erase for Verify's semantic search
}

var _ deletion.Store = (*Store)(nil)

// New returns a Store over client.
func New(client *qdrant.Client) *Store { return &Store{client: client} }

// errNotCompleted is a write Qdrant accepted but did not report done.
var errNotCompleted = errors.New("qdrant: write not completed")

// Erase deletes every point of s from every collection of st and reports, per collection
// (its name with the tenant filled in), the exact count that matched before the delete;
// the delete itself is always sent, with wait=true. A missing collection holds nothing and
// counts 0. For a tenant-scope s it deletes the tenant's points by the tenant field, or
// drops the tenant's collections in a store without one. Errors retrying cannot fix
// (InvalidArgument, PermissionDenied, Unimplemented) are retry.Permanent, all others
// transient, FailedPrecondition after st's own retries; a subject with no identifier to
// match, or a filter that could match every point, is a permanent error sent to no one.
// Error messages name collections by template, never by an identifier.
func (st *Store) Erase(ctx context.Context, inv inventory.Entry, s deletion.Subject) (deletion.Result, error) {
	l, err := LocatorsOf(inv)
	if err != nil {
		return deletion.Result{}, err
	}
	if s.TenantScope() && l.TenantField != "" {
		return st.eraseTenantPoints(ctx, l, s)
	}
	if s.TenantScope() {
		return st.eraseTenant(ctx, l, s)
	}
	f, err := subjectFilter(l, s)
	if err != nil {
		return deletion.Result{}, err
	}
	return st.eraseFilter(ctx, inv, l, s, f)
}

// eraseFilter deletes the points passing f from every collection of st for s, after
// checking f.
func (st *Store) eraseFilter(ctx context.Context, inv inventory.Entry, l Locators, s deletion.Subject, f *qdrant.Filter) (deletion.Result, error) {
	if err := checkFilter(f); err != nil {
		return deletion.Result{}, err
	}
	semantic := l.similar() != SimilarOff
	key := pendingKey(inv, s)
	var res deletion.Result
	for _, tmpl := range l.Collections {
		loc := location(tmpl, s.Tenant)
		var matched, similar, mentions int64
		for _, coll := range collections(tmpl, s) {
			n, err := st.count(ctx, coll, f)
			if err != nil {
				return res, fmt.Errorf("qdrant: count %s: %w", loc, redact(err, coll, loc))
			}
			var vs []vector
			if semantic {
				if vs, err = st.readVectors(ctx, l, coll, f); err != nil {
					return res, fmt.Errorf("qdrant: read vectors of %s: %w", loc, redact(err, coll, loc))
				}
				st.pending.add(key, coll, loc, vs)
			}
			err = st.deletePoints(ctx, coll, f)
			if err != nil && status.Code(err) != codes.NotFound {
				return res, fmt.Errorf("qdrant: delete from %s: %w", loc, redact(classify(err), coll, loc))
			}
			matched += n
			if l.similar() == SimilarErase {
				var truncated bool
				ids, err := st.similar(ctx, l, coll, f, st.pending.get(key).colls[coll], &truncated)
				if err == nil {
					err = st.deleteIDs(ctx, coll, ids)
				}
				if err != nil {
					return res, fmt.Errorf("qdrant: erase similar in %s: %w", loc, redact(err, coll, loc))
				}
				similar += int64(len(ids))
			}
			m, err := st.handleMentions(ctx, l, coll, s)
			if err != nil {
				return res, fmt.Errorf("qdrant: %s mentions in %s: %w", l.mentions(), loc, redact(err, coll, loc))
			}
			mentions += m
		}
		res.Locations = append(res.Locations, event.LocationCount{Location: loc, Deleted: matched})
		if similar > 0 {
			res.Locations = append(res.Locations, event.LocationCount{Location: loc + " (similar)", Deleted: similar})
		}
		if mentions > 0 {
			res.Locations = append(res.Locations, event.LocationCount{Location: loc + " (mentions)", Deleted: mentions})
		}
	}
	return res, nil
}

// deletePoints deletes the points of coll passing f, with wait=true, retrying
// FailedPrecondition; it returns the raw error for the caller to classify.
func (st *Store) deletePoints(ctx context.Context, coll string, f *qdrant.Filter) error {
	return st.retry(ctx, func() error {
		r, err := st.client.Delete(ctx, &qdrant.DeletePoints{
			CollectionName: coll,
			Wait:           qdrant.PtrOf(true),
			Points:         qdrant.NewPointsSelectorFilter(f),
		})
		if err != nil {
			return err
		}
		return completed(r)
	})
}

// completed is nil for a write Qdrant reports Completed, else a transient error naming
// the status (WaitTimeout: not applied within the request's timeout; Acknowledged: only
// queued; ClockRejected: refused as out of order).
func completed(r *qdrant.UpdateResult) error {
	if r.GetStatus() == qdrant.UpdateStatus_Completed {
		return nil
	}
	return fmt.Errorf("%w: status %s", errNotCompleted, r.GetStatus())
}

// retry runs call until it answers anything but FailedPrecondition, at most
// PreconditionTries times, waiting between tries.
func (st *Store) retry(ctx context.Context, call func() error) error {
	tries, wait := st.PreconditionTries, st.PreconditionBackoff
	if tries <= 0 {
		tries = DefaultPreconditionTries
	}
	if wait <= 0 {
		wait = DefaultPreconditionBackoff
	}
	for try := 1; ; try++ {
		err := call()
		if status.Code(err) != codes.FailedPrecondition || try >= tries {
			return err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return err
		}
		wait *= 2
	}
}

// Verify counts, exactly and with the filter Erase uses, the points of s that remain in
// st's collections (for a tenant-scope s, every point of the tenant: those of its tenant
// field, or every point of its own collections). With text fields it counts residual
// mentions too, and reports as unexamined each identifier the mention search cannot find.
func (st *Store) Verify(ctx context.Context, inv inventory.Entry, s deletion.Subject) (event.Verification, error) {
	l, err := LocatorsOf(inv)
	if err != nil {
		return event.Verification{}, err
	}
	if s.TenantScope() {
		return st.verifyTenant(ctx, l, s)
	}
	f, err := subjectFilter(l, s)
	if err != nil {
		return event.Verification{}, err
	}
	v := event.Verification{Method: MethodSubject}
	for _, tmpl := range l.Collections {
		for _, coll := range collections(tmpl, s) {
			n, err := st.count(ctx, coll, f)
			if err != nil {
				loc := location(tmpl, s.Tenant)
				return event.Verification{}, fmt.Errorf("qdrant: verify %s: %w", loc, redact(err, coll, loc))
			}
			v.Remaining += n
			m, err := st.mentioning(ctx, l, coll, s.Tenant, identifiers(s))
			if err != nil {
				loc := location(tmpl, s.Tenant)
				return event.Verification{}, fmt.Errorf("qdrant: verify mentions in %s: %w", loc, redact(err, coll, loc))
			}
			v.Mentions += int64(len(m))
		}
	}
	if len(l.TextFields) > 0 {
		v.Method += MethodMentions
		items := unsearchable(l, s)
		v.Unexamined += int64(len(items))
		v.UnexaminedItems = append(v.UnexaminedItems, items...)
	}
	if l.similar() != SimilarOff {
		key := pendingKey(inv, s)
		var truncated bool
		ids, searched, err := st.similarOf(ctx, l, key, f, &truncated)
		if err != nil {
			return event.Verification{}, err
		}
		if searched {
			v.Method += similarMethod(l)
			if truncated {
				v.Method += MethodTruncated
			}
			v.Similar = ids
		}
		st.pending.forget(key)
	}
	return v, nil
}

// verifyTenant counts every point of the tenant that remains: by the tenant field, or in
// the tenant's own collections.
func (st *Store) verifyTenant(ctx context.Context, l Locators, s deletion.Subject) (event.Verification, error) {
	if err := tenantTemplates(l); err != nil {
		return event.Verification{}, err
	}
	f, err := tenantFilter(l, s.Tenant)
	if err != nil {
		return event.Verification{}, err
	}
	v := event.Verification{Method: MethodTenant}
	if f != nil {
		v.Method = MethodTenantFilter
	}
	for _, tmpl := range l.Collections {
		name := location(tmpl, s.Tenant)
		n, err := st.count(ctx, name, f)
		if err != nil {
			return event.Verification{}, fmt.Errorf("qdrant: verify %s: %w", name, err)
		}
		v.Remaining += n
	}
	return v, nil
}

// eraseTenantPoints deletes, with wait=true, every point whose tenant field holds the
// tenant from each collection of a store with a tenant field, and reports the exact count
// that matched before the delete. It drops nothing: other tenants share the collections.
func (st *Store) eraseTenantPoints(ctx context.Context, l Locators, s deletion.Subject) (deletion.Result, error) {
	if err := tenantTemplates(l); err != nil {
		return deletion.Result{}, err
	}
	f, err := tenantFilter(l, s.Tenant)
	if err != nil {
		return deletion.Result{}, err
	}
	var res deletion.Result
	for _, tmpl := range l.Collections {
		name := location(tmpl, s.Tenant)
		n, err := st.count(ctx, name, f)
		if err != nil {
			return res, fmt.Errorf("qdrant: count %s: %w", name, err)
		}
		if err := st.deletePoints(ctx, name, f); err != nil && status.Code(err) != codes.NotFound {
			return res, fmt.Errorf("qdrant: delete from %s: %w", name, classify(err))
		}
		res.Locations = append(res.Locations, event.LocationCount{Location: name, Deleted: n})
	}
	return res, nil
}

// eraseTenant drops the tenant's collections. A name that is an alias is resolved to the
// collection it names, which is dropped (and with it, in Qdrant, every alias of it) only
// when every alias naming that collection is one of this tenant's own names: a collection
// some other name also reaches may hold another tenant's data, and is refused as a
// permanent error. Dropping the alias's name itself would do nothing: Qdrant answers
// false for DeleteCollection of an alias and keeps both.
func (st *Store) eraseTenant(ctx context.Context, l Locators, s deletion.Subject) (deletion.Result, error) {
	if err := tenantTemplates(l); err != nil {
		return deletion.Result{}, err
	}
	aliases, err := st.aliases(ctx)
	if err != nil {
		return deletion.Result{}, fmt.Errorf("qdrant: list aliases: %w", err)
	}
	own := map[string]bool{}
	for _, tmpl := range l.Collections {
		own[location(tmpl, s.Tenant)] = true
	}
	var res deletion.Result
	for _, tmpl := range l.Collections {
		name := location(tmpl, s.Tenant)
		target := name
		if t, ok := aliases[name]; ok {
			for a, c := range aliases {
				if c == t && !own[a] {
					return res, retry.Permanent(fmt.Errorf("qdrant: %s is an alias of collection %s, which alias %s also names: tenant erasure will not drop a collection other names reach", name, t, a))
				}
			}
			target = t
		}
		n, err := st.count(ctx, name, nil)
		if err != nil {
			return res, fmt.Errorf("qdrant: count %s: %w", name, err)
		}
		if err := st.dropCollection(ctx, target); err != nil {
			return res, fmt.Errorf("qdrant: drop %s: %w", name, err)
		}
		res.Locations = append(res.Locations, event.LocationCount{Location: name, Deleted: n})
	}
	return res, nil
}

// aliases maps every alias to the collection it names.
func (st *Store) aliases(ctx context.Context) (map[string]string, error) {
	var list []*qdrant.AliasDescription
	err := st.retry(ctx, func() (err error) {
		list, err = st.client.ListAliases(ctx)
		return err
	})
	if err != nil {
		return nil, classify(err)
	}
	out := make(map[string]string, len(list))
	for _, a := range list {
		out[a.GetAliasName()] = a.GetCollectionName()
	}
	return out, nil
}

// dropCollection deletes coll; a collection that is already gone is not an error.
func (st *Store) dropCollection(ctx context.Context, coll string) error {
	err := st.retry(ctx, func() error { return st.client.DeleteCollection(ctx, coll) })
	if err == nil || status.Code(err) == codes.NotFound {
		return nil
	}
	// Qdrant answers "false" rather than NotFound when there was nothing to drop.
	if ok, xerr := st.client.CollectionExists(ctx, coll); xerr == nil && !ok {
		return nil
	}
	return classify(err)
}

// tenantTemplates refuses tenant erasure over collection templates that name a subject
// (the tenant's collections cannot be enumerated from them) and, in a store without a
// tenant field, over a collection that is not the tenant's own (no {tenant} in its name:
// dropping it, or counting all its points, would reach other tenants).
func tenantTemplates(l Locators) error {
	for _, tmpl := range l.Collections {
		if inventory.Uses(tmpl, inventory.Subject) || inventory.Uses(tmpl, inventory.SubjectHash) || inventory.Uses(tmpl, inventory.Session) {
			return retry.Permanent(fmt.Errorf("qdrant: collection template %q names a subject: tenant erasure cannot enumerate its collections", tmpl))
		}
		if l.TenantField == "" && !inventory.Uses(tmpl, inventory.Tenant) {
			return retry.Permanent(fmt.Errorf("qdrant: collection %q names no {tenant} and the store has no tenant_field: tenant erasure would reach other tenants", tmpl))
		}
	}
	return nil
}

// count is the exact count of points passing f in coll (all points for a nil f); a
// missing collection counts 0.
func (st *Store) count(ctx context.Context, coll string, f *qdrant.Filter) (int64, error) {
	var n uint64
	err := st.retry(ctx, func() (err error) {
		n, err = st.client.Count(ctx, &qdrant.CountPoints{CollectionName: coll, Filter: f, Exact: qdrant.PtrOf(true)})
		return err
	})
	if status.Code(err) == codes.NotFound {
		return 0, nil
	}
	if err != nil {
		return 0, classify(err)
	}
	return int64(n), nil
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
// (InvalidArgument, e.g. strict mode refusing an unindexed filter or a key outside
// Qdrant's grammar), PermissionDenied, and Unimplemented. Everything else — Unavailable,
// DeadlineExceeded, ResourceExhausted, Aborted, Internal, FailedPrecondition (Qdrant's
// answer during shard transfers), a cancelled context — stays transient.
func classify(err error) error {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unimplemented:
		return retry.Permanent(err)
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
