// Package s3prefixstore erases source documents and uploads kept in S3 under per-subject
// prefixes (inventory kind "s3prefix"), such as s3://uploads/{tenant}/users/{subject}/ or
// s3://docs/{tenant}/sessions/{session}/.
//
// Erase removes every object version and every delete marker under each expanded prefix:
// it lists them with ListObjectVersions and deletes them with DeleteObjects, at most 1000
// a call, each by its explicit version id ("null" for an object written while versioning
// was off or suspended), never by a plain DELETE, which in a versioned bucket would only
// add a delete marker. A tenant-scope request erases each template's tenant prefix (see
// Locators). Verify lists the versions again: the store is clean when no version and no
// delete marker remains. A version under Object Lock (a legal hold, or a retention date
// not yet reached) cannot be deleted: Erase leaves it and Verify reports it unexamined with
// the reason, so such an erasure ends FAILED, never clean.
//
// Identifiers are written into keys with Encode and every placeholder ends at "/", so an
// identifier matches only its own prefix. Every template holds "{tenant}/" before its
// first identifier (Locators), so each tenant's objects lie under a prefix of their own and
// an erasure of one tenant never lists another's. Reports name templates, never an
// identifier: an object in one is its prefix template, the shape of the rest of its key
// and a keyed reference (deletion.ItemNames, WithKey), never its name.
// Errors are classified by objectstore.Classify, as the dataset store's are: a missing
// bucket, a refused or malformed request is permanent; anything else (the service down,
// throttling, internal errors) is transient. A Store is safe for concurrent use.
package s3prefixstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Method is the verification method the store reports.
const Method = "list object versions and delete markers under each prefix"

const (
	maxBatch = 1000      // DeleteObjects takes at most 1000 keys
	roundMax = 10 * 1000 // versions listed before a round of deletes
	maxItems = 20        // unexamined items named in a verification (all are counted)
)

// Store erases subjects from the S3 prefixes of inventory stores of kind "s3prefix".
type Store struct {
	client *s3.Client
	now    func() time.Time
	names  deletion.ItemNames
}

var _ deletion.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithKey makes the Store's reports name objects by references keyed by key
// (deletion.ItemNames); without it they name objects by their shape alone.
func WithKey(key subject.Key) Option {
	return func(s *Store) { s.names = deletion.NewItemNames(key) }
}

// New returns a Store over client, which needs s3:ListBucketVersions,
// s3:DeleteObjectVersion, s3:GetObjectLegalHold and s3:GetObjectRetention on the buckets.
func New(client *s3.Client, opts ...Option) *Store {
	s := &Store{client: client, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// target is one expanded prefix: what is listed and deleted, and where it is reported.
type target struct {
	bucket, prefix string
	location       string // the template (or tenant template) the prefix came from
}

// targets expands the templates of st for s, dropping prefixes that another one covers.
func targets(st inventory.Entry, s deletion.Subject) ([]target, error) {
	ts, err := templates(st)
	if err != nil {
		return nil, err
	}
	if s.Tenant == "" {
		return nil, retry.Permanent(errors.New("s3prefix: empty tenant"))
	}
	var out []target
	for _, t := range ts {
		if s.TenantScope() {
			out = append(out, target{t.bucket, inventory.Expand(t.tenant, s.Vars(""), Encode), "s3://" + t.bucket + "/" + t.tenant})
			continue
		}
		if inventory.Uses(t.key, inventory.Subject) && s.ID == "" || inventory.Uses(t.key, inventory.SubjectHash) && s.Hash == "" {
			continue
		}
		sessions := []string{""}
		if inventory.Uses(t.key, inventory.Session) {
			sessions = nil
			for _, ses := range s.Sessions {
				if ses != "" {
					sessions = append(sessions, ses)
				}
			}
		}
		for _, ses := range sessions {
			out = append(out, target{t.bucket, inventory.Expand(t.key, s.Vars(ses), Encode), t.raw})
		}
	}
	slices.SortFunc(out, func(a, b target) int {
		return strings.Compare(a.bucket+"/"+a.prefix, b.bucket+"/"+b.prefix)
	})
	kept := out[:0]
	for _, tg := range out {
		if n := len(kept); n > 0 && kept[n-1].bucket == tg.bucket && strings.HasPrefix(tg.prefix, kept[n-1].prefix) {
			continue
		}
		kept = append(kept, tg)
	}
	return kept, nil
}

// entry is one object version or delete marker.
type entry struct {
	key, version string
	marker       bool
}

// Erase deletes every version and delete marker under the prefixes of s in st, except
// versions under Object Lock (Verify reports those). It is idempotent.
func (s *Store) Erase(ctx context.Context, st inventory.Entry, sub deletion.Subject) (deletion.Result, error) {
	tgs, err := targets(st, sub)
	if err != nil {
		return deletion.Result{}, err
	}
	var res deletion.Result
	for _, tg := range tgs {
		n, err := s.eraseTarget(ctx, tg)
		res.Locations = addCount(res.Locations, tg.location, n)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// eraseTarget deletes in rounds: list up to roundMax deletable entries from the start of
// the prefix, delete them, list again. Listing never continues past a deletion, so it
// relies on no marker that a deletion could invalidate. What cannot be deleted (Object
// Lock), or is listed again after S3 reported it deleted, is skipped and left to Verify.
func (s *Store) eraseTarget(ctx context.Context, tg target) (int64, error) {
	var deleted int64
	skip := map[entry]bool{}
	var prev map[entry]bool // deleted in the previous round
	for {
		var round []entry
		err := s.list(ctx, tg, func(page []entry) bool {
			for _, e := range page {
				switch {
				case skip[e]:
				case prev[e]:
					skip[e] = true
				default:
					round = append(round, e)
				}
			}
			return len(round) < roundMax
		})
		if err != nil || len(round) == 0 {
			return deleted, err
		}
		prev = make(map[entry]bool, len(round))
		for batch := range slices.Chunk(round, maxBatch) {
			n, held, err := s.deleteBatch(ctx, tg.bucket, batch)
			deleted += n
			for _, e := range held {
				skip[e] = true
			}
			if err != nil {
				return deleted, err
			}
		}
		for _, e := range round {
			if !skip[e] {
				prev[e] = true
			}
		}
	}
}

// list pages through the versions and delete markers under tg's prefix, calling fn with
// each page until fn returns false.
func (s *Store) list(ctx context.Context, tg target, fn func([]entry) bool) error {
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(tg.bucket), Prefix: aws.String(tg.prefix)}
	for {
		page, err := s.client.ListObjectVersions(ctx, in)
		if err != nil {
			return wrap("list object versions", tg.bucket, err)
		}
		es := make([]entry, 0, len(page.Versions)+len(page.DeleteMarkers))
		for _, v := range page.Versions {
			es = append(es, entry{key: aws.ToString(v.Key), version: versionID(v.VersionId)})
		}
		for _, d := range page.DeleteMarkers {
			es = append(es, entry{key: aws.ToString(d.Key), version: versionID(d.VersionId), marker: true})
		}
		if !fn(es) || !aws.ToBool(page.IsTruncated) {
			return nil
		}
		if aws.ToString(page.NextKeyMarker) == "" {
			return fmt.Errorf("s3 bucket %s: list object versions: truncated page without a next key marker", tg.bucket)
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}

// versionID is a listed version id; a missing one is S3's "null" version.
func versionID(id *string) string {
	if v := aws.ToString(id); v != "" {
		return v
	}
	return "null"
}

// deleteBatch deletes es (at most maxBatch) by version id and returns how many S3 reported
// deleted and which are held by Object Lock.
func (s *Store) deleteBatch(ctx context.Context, bucket string, es []entry) (int64, []entry, error) {
	ids := make([]types.ObjectIdentifier, len(es))
	byID := make(map[entry]entry, len(es))
	for i, e := range es {
		ids[i] = types.ObjectIdentifier{Key: aws.String(e.key), VersionId: aws.String(e.version)}
		byID[entry{key: e.key, version: e.version}] = e
	}
	out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket: aws.String(bucket),
		Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(false)},
	})
	if err != nil {
		return 0, nil, wrap("delete objects", bucket, err)
	}
	n := int64(len(out.Deleted))
	gone := make(map[entry]bool, len(out.Deleted))
	for _, d := range out.Deleted {
		gone[entry{key: aws.ToString(d.Key), version: versionID(d.VersionId)}] = true
	}
	seen := map[entry]bool{}
	var held []entry
	var errs []error
	for _, e := range out.Errors {
		code := aws.ToString(e.Code)
		switch class := objectstore.CodeClass(code); {
		case class == objectstore.Missing:
			// gone already (a concurrent erasure)
		case code == "AccessDenied":
			for _, ent := range erred(es, byID, gone, e) {
				if seen[ent] {
					continue
				}
				seen[ent] = true
				reason, err := s.lockOf(ctx, bucket, ent)
				switch {
				case err != nil:
					errs = append(errs, err)
				case reason != "":
					held = append(held, ent)
				default:
					errs = append(errs, retry.Permanent(fmt.Errorf("s3 bucket %s: delete object version: access denied", bucket)))
				}
			}
		case class == objectstore.Permanent:
			errs = append(errs, retry.Permanent(fmt.Errorf("s3 bucket %s: delete object version: %s", bucket, code)))
		default:
			errs = append(errs, fmt.Errorf("s3 bucket %s: delete object version: %s", bucket, code))
		}
	}
	return n, held, errors.Join(errs...)
}

// erred returns the entries of es that the DeleteObjects error e names. S3 names the key
// and the version id; a server that leaves the version id out (moto does) names every
// entry of the key in the batch that was not deleted, never the "null" version in their
// place.
func erred(es []entry, byID map[entry]entry, gone map[entry]bool, e types.Error) []entry {
	key := aws.ToString(e.Key)
	if e.VersionId != nil {
		if ent, ok := byID[entry{key: key, version: versionID(e.VersionId)}]; ok {
			return []entry{ent}
		}
		return []entry{{key: key, version: versionID(e.VersionId)}}
	}
	var out []entry
	for _, ent := range es {
		if ent.key == key && !gone[entry{key: ent.key, version: ent.version}] {
			out = append(out, ent)
		}
	}
	return out
}

// noLock are the errors S3 answers when a version has no legal hold or retention, or the
// bucket has no Object Lock at all.
var noLock = map[string]bool{
	"NoSuchObjectLockConfiguration":        true,
	"ObjectLockConfigurationNotFoundError": true,
	"InvalidRequest":                       true, // "Bucket is missing Object Lock Configuration"
}

// lockOf says why Object Lock keeps version e, or "" when it does not.
func (s *Store) lockOf(ctx context.Context, bucket string, e entry) (string, error) {
	if e.marker {
		return "", nil // delete markers are never locked
	}
	in := &s3.GetObjectLegalHoldInput{Bucket: aws.String(bucket), Key: aws.String(e.key), VersionId: aws.String(e.version)}
	hold, err := s.client.GetObjectLegalHold(ctx, in)
	var api smithy.APIError
	switch {
	case err == nil && hold.LegalHold != nil && hold.LegalHold.Status == types.ObjectLockLegalHoldStatusOn:
		return "object lock legal hold", nil
	case err != nil && !(errors.As(err, &api) && noLock[api.ErrorCode()]):
		return "", wrap("get object legal hold", bucket, err)
	}
	ret, err := s.client.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(bucket), Key: aws.String(e.key), VersionId: aws.String(e.version)})
	switch {
	case err == nil && ret.Retention != nil && ret.Retention.RetainUntilDate != nil && ret.Retention.RetainUntilDate.After(s.now()):
		return fmt.Sprintf("object lock retention (%s) until %s", ret.Retention.Mode, ret.Retention.RetainUntilDate.UTC().Format(time.RFC3339)), nil
	case err != nil && !(errors.As(err, &api) && noLock[api.ErrorCode()]):
		return "", wrap("get object retention", bucket, err)
	}
	return "", nil
}

// Verify lists every prefix of s in st again: each version or delete marker left counts as
// remaining, except versions under Object Lock, which count as unexamined and are named
// (deletion.ItemNames) with their version id and the reason (at most maxItems of them).
func (s *Store) Verify(ctx context.Context, st inventory.Entry, sub deletion.Subject) (event.Verification, error) {
	tgs, err := targets(st, sub)
	if err != nil {
		return event.Verification{}, err
	}
	v := event.Verification{Method: Method}
	for _, tg := range tgs {
		var left []entry
		if err := s.list(ctx, tg, func(page []entry) bool { left = append(left, page...); return true }); err != nil {
			return event.Verification{}, err
		}
		for _, e := range left {
			reason, err := s.lockOf(ctx, tg.bucket, e)
			if err != nil {
				return event.Verification{}, err
			}
			if reason == "" {
				v.Remaining++
				continue
			}
			v.Unexamined++
			if len(v.UnexaminedItems) < maxItems {
				name := s.names.Name(tg.location, strings.TrimPrefix(e.key, tg.prefix), "s3://"+tg.bucket+"/"+e.key)
				v.UnexaminedItems = append(v.UnexaminedItems, fmt.Sprintf("%s version %s: %s", name, e.version, reason))
			}
		}
	}
	return v, nil
}

func addCount(ls []event.LocationCount, loc string, n int64) []event.LocationCount {
	for i := range ls {
		if ls[i].Location == loc {
			ls[i].Deleted += n
			return ls
		}
	}
	return append(ls, event.LocationCount{Location: loc, Deleted: n})
}

// wrap classifies an S3 error of op on bucket (objectstore.Classify). It never names a key
// or a prefix: they hold identifiers.
func wrap(op, bucket string, err error) error { return objectstore.Classify(bucket, op, err) }
