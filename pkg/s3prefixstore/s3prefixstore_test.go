package s3prefixstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// Templates of the store under test: uploads per subject, documents per session.
const (
	userTemplate    = "s3://" + uploadsBucket + "/{tenant}/users/{subject}/"
	sessionTemplate = "s3://" + docsBucket + "/{tenant}/sessions/{session}/"
)

func testStore() inventory.Entry {
	return inventory.Entry{Name: "uploads", Kind: Kind, Locators: inventory.Locators{
		"prefixes": []any{userTemplate, sessionTemplate},
	}}
}

// world writes and reads S3 the way the application does (keys written with Encode),
// without the Store under test.
type world struct {
	fake   *wire
	srv    *testenv.S3Server
	client *s3.Client
}

func newWorld(t testing.TB) world {
	f, srv := newWire(t)
	return world{fake: f, srv: srv, client: srv.Client}
}

func userPrefix(s deletion.Subject) string {
	return Encode(s.Tenant) + "/users/" + Encode(s.ID) + "/"
}

func sessionPrefix(s deletion.Subject, ses string) string {
	return Encode(s.Tenant) + "/sessions/" + Encode(ses) + "/"
}

func (w world) put(t testing.TB, bucket, key, body string) string {
	t.Helper()
	out, err := w.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)})
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	return aws.ToString(out.VersionId)
}

// hide adds a delete marker on key.
func (w world) hide(t testing.TB, bucket, key string) {
	t.Helper()
	if _, err := w.client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// count is the number of versions and delete markers under prefix, read page by page.
func (w world) count(t testing.TB, bucket, prefix string) int {
	t.Helper()
	n := 0
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
	for {
		out, err := w.client.ListObjectVersions(context.Background(), in)
		if err != nil {
			t.Fatalf("list versions: %v", err)
		}
		n += len(out.Versions) + len(out.DeleteMarkers)
		if !aws.ToBool(out.IsTruncated) {
			return n
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
}

// seed writes, for s, n uploads of two versions each and a delete marker on one of them,
// and n documents per session (the first one a "null" version, written while versioning
// is suspended); it returns how many versions and delete markers that is.
func (w world) seed(t testing.TB, s deletion.Subject, n int) int {
	t.Helper()
	total := 0
	if s.ID != "" {
		for i := range n {
			key := fmt.Sprintf("%supload-%d.pdf", userPrefix(s), i)
			w.put(t, uploadsBucket, key, "first")
			w.put(t, uploadsBucket, key, "second")
			total += 2
		}
		w.hide(t, uploadsBucket, userPrefix(s)+"upload-0.pdf")
		total++
	}
	for _, ses := range s.Sessions {
		for i := range n {
			if i == 0 {
				setVersioning(t, w.client, types.BucketVersioningStatusSuspended)
			}
			w.put(t, docsBucket, fmt.Sprintf("%sdoc-%d.txt", sessionPrefix(s, ses), i), "doc")
			if i == 0 {
				setVersioning(t, w.client, types.BucketVersioningStatusEnabled)
			}
			total++
		}
	}
	return total
}

func (w world) countSubject(t testing.TB, s deletion.Subject) int {
	n := 0
	if s.ID != "" {
		n += w.count(t, uploadsBucket, userPrefix(s))
	}
	for _, ses := range s.Sessions {
		n += w.count(t, docsBucket, sessionPrefix(s, ses))
	}
	return n
}

func TestConformance(t *testing.T) {
	deletiontest.Run(t, func(t *testing.T) deletiontest.Fixture {
		w := newWorld(t)
		return deletiontest.Fixture{
			Impl:  New(w.client),
			Store: testStore(),
			Seed:  func(t *testing.T, s deletion.Subject, n int) int { return w.seed(t, s, n) },
			Count: func(t *testing.T, s deletion.Subject) int { return w.countSubject(t, s) },
			Down: func(t *testing.T) deletion.Store {
				down := newWorld(t)
				down.srv.Stop()
				return New(down.client)
			},
			// An upload under a legal hold cannot be erased: Verify names it unexamined.
			Unreadable: func(t testing.TB, s deletion.Subject) {
				key := userPrefix(s) + "held.pdf"
				id := w.put(t, uploadsBucket, key, "held")
				hold(t, w, key, id)
			},
		}
	})
}

func hold(t testing.TB, w world, key, id string) {
	t.Helper()
	_, err := w.client.PutObjectLegalHold(context.Background(), &s3.PutObjectLegalHoldInput{
		Bucket: aws.String(uploadsBucket), Key: aws.String(key), VersionId: aws.String(id),
		LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOn},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHostileIdentifiers erases each of the hostile identifiers next to a bystander
// it could be confused with; the bystander keeps every version.
func TestHostileIdentifiers(t *testing.T) {
	pairs := [][2]string{
		{"%", "a%"}, {"%", "%25"}, {"_", "a"}, {"'", "''"}, {";", "a;"}, {"--", "-"},
		{"*", "anyone"}, {"/", "a"}, {"a/b", "a"}, {"a", "a/b"}, {"..", "."}, {".", "%2E"},
		{"../acme", "x"}, {"a", "ab"}, {"ab", "a"}, {"zoe\u0301", "zo\u00e9"}, {"zo\u00e9", "zoe\u0301"},
	}
	for _, p := range pairs {
		t.Run(fmt.Sprintf("%+q_vs_%+q", p[0], p[1]), func(t *testing.T) {
			w := newWorld(t)
			victim, bystander := deletiontest.NewSubject("acme", p[0]), deletiontest.NewSubject("acme", p[1])
			want, keep := w.seed(t, victim, 2), w.seed(t, bystander, 2)
			res, err := New(w.client).Erase(context.Background(), testStore(), victim)
			if err != nil {
				t.Fatal(err)
			}
			if res.Deleted() != int64(want) {
				t.Errorf("deleted %d, seeded %d", res.Deleted(), want)
			}
			if n := w.countSubject(t, victim); n != 0 {
				t.Errorf("%d versions of the victim remain", n)
			}
			if n := w.countSubject(t, bystander); n != keep {
				t.Errorf("bystander has %d versions of %d", n, keep)
			}
		})
	}
}

// TestBatchesAndPages: 2,401 versions under one prefix are listed in pages of 1000 and
// deleted in DeleteObjects calls of at most 1000, each object with its version id.
func TestBatchesAndPages(t *testing.T) {
	w := newWorld(t)
	s := deletiontest.NewSubject("acme", "many")
	s.Sessions = nil
	bystander := deletiontest.NewSubject("acme", "man")
	keep := w.seed(t, bystander, 1)
	const objects = 1200
	for i := range objects {
		key := fmt.Sprintf("%sf-%04d", userPrefix(s), i)
		w.put(t, uploadsBucket, key, "v1")
		w.put(t, uploadsBucket, key, "v2")
	}
	w.hide(t, uploadsBucket, userPrefix(s)+"f-0000")
	const want = 2*objects + 1
	res, err := New(w.client).Erase(context.Background(), testStore(), s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted() != want {
		t.Errorf("deleted %d, want %d", res.Deleted(), want)
	}
	sum := 0
	for _, b := range w.fake.batches {
		if b[0] > 1000 || b[1] != 0 {
			t.Errorf("a DeleteObjects call of %d objects, %d without a version id", b[0], b[1])
		}
		sum += b[0]
	}
	if len(w.fake.batches) < 3 || sum != want {
		t.Errorf("%d DeleteObjects calls for %d objects, want at least 3 for %d", len(w.fake.batches), sum, want)
	}
	if w.fake.listPages < 3 {
		t.Errorf("%d listing pages for %d versions", w.fake.listPages, want)
	}
	v, err := New(w.client).Verify(context.Background(), testStore(), s)
	if err != nil || !v.Clean() {
		t.Errorf("Verify = %+v, %v", v, err)
	}
	if n := w.countSubject(t, bystander); n != keep {
		t.Errorf("bystander has %d versions of %d", n, keep)
	}
}

// TestNullVersionDeletedByID: the "null" version is deleted by that id, and nothing is
// deleted without one (which would only add a delete marker).
func TestNullVersionDeletedByID(t *testing.T) {
	w := newWorld(t)
	s := deletiontest.NewSubject("acme", "nully")
	want := w.seed(t, s, 1)
	res, err := New(w.client).Erase(context.Background(), testStore(), s)
	if err != nil || res.Deleted() != int64(want) {
		t.Fatalf("Erase = %d, %v; want %d", res.Deleted(), err, want)
	}
	if w.fake.nullDelete != 1 {
		t.Errorf("%d deletions of the null version, want 1", w.fake.nullDelete)
	}
	for _, b := range w.fake.batches {
		if b[1] != 0 {
			t.Errorf("%d objects deleted without a version id", b[1])
		}
	}
	if n := w.countSubject(t, s); n != 0 {
		t.Errorf("%d versions or markers remain", n)
	}
}

// TestObjectLock: versions under a legal hold or an unexpired retention stay; Verify names
// them unexamined with the reason and the store ends FAILED. An expired retention does not
// hold.
func TestObjectLock(t *testing.T) {
	w := newWorld(t)
	s := deletiontest.NewSubject("acme", "cust-locked")
	w.seed(t, s, 1)
	held := w.put(t, uploadsBucket, userPrefix(s)+"cust-locked-passport.pdf", "held")
	hold(t, w, userPrefix(s)+"cust-locked-passport.pdf", held)
	retain := func(key, mode string, until time.Time) {
		id := w.put(t, uploadsBucket, key, "kept")
		_, err := w.client.PutObjectRetention(context.Background(), &s3.PutObjectRetentionInput{
			Bucket: aws.String(uploadsBucket), Key: aws.String(key), VersionId: aws.String(id),
			Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionMode(mode), RetainUntilDate: aws.Time(until)},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Governance mode, so that the test's clean-up can bypass it (nothing can bypass
	// compliance mode before its date): the store has no bypass and treats both alike.
	retain(userPrefix(s)+"contract.pdf", "GOVERNANCE", time.Now().Add(24*time.Hour))
	retain(userPrefix(s)+"expired.pdf", "GOVERNANCE", time.Now().Add(-time.Hour))

	st := New(w.client)
	res, err := st.Erase(context.Background(), testStore(), s)
	if err != nil {
		t.Fatalf("Erase: %v", err)
	}
	v, err := st.Verify(context.Background(), testStore(), s)
	if err != nil {
		t.Fatal(err)
	}
	if v.Remaining != 0 || v.Unexamined != 2 || len(v.UnexaminedItems) != 2 {
		t.Fatalf("Verify = %+v; want 2 unexamined, 0 remaining", v)
	}
	if got := deletion.StatusOf(res, v); got != event.StatusFailed {
		t.Errorf("status %s, want FAILED", got)
	}
	joined := strings.Join(v.UnexaminedItems, "\n")
	for _, want := range []string{
		userTemplate + "*.pdf version " + held + ": object lock legal hold",
		userTemplate + "*.pdf version ",
		"object lock retention (GOVERNANCE) until ",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("unexamined items %q lack %q", v.UnexaminedItems, want)
		}
	}
	if strings.Contains(joined, s.ID) || strings.Contains(joined, "passport") || strings.Contains(joined, "contract") {
		t.Errorf("unexamined items %q hold the subject id or an object name", v.UnexaminedItems)
	}
	if n := w.countSubject(t, s); n != 2 {
		t.Errorf("%d versions remain, want the 2 locked ones", n)
	}
}

// TestReportsNameNoObject: locked objects whose names hold an email, a customer id or a
// plain name are reported, by a subject and by a tenant erasure, as their prefix template,
// their shape and a keyed reference found again from the object's full name, never by
// their names.
func TestReportsNameNoObject(t *testing.T) {
	w := newWorld(t)
	s := deletiontest.NewSubject("acme", "cust-4711")
	names := map[string]string{} // key -> its reference
	for _, rel := range []string{"uploads/anna.schmidt@example.de.png", "cust-4711-invoice.pdf", "annaschmidt"} {
		key := userPrefix(s) + rel
		hold(t, w, key, w.put(t, uploadsBucket, key, "held"))
		names[key] = deletion.NewItemNames(deletiontest.Key).Ref("s3://" + uploadsBucket + "/" + key)
	}
	store := New(w.client, WithKey(deletiontest.Key))
	for _, subj := range []deletion.Subject{s, {Tenant: "acme", Scope: event.ScopeTenant}} {
		if _, err := store.Erase(context.Background(), testStore(), subj); err != nil {
			t.Fatal(err)
		}
		v, err := store.Verify(context.Background(), testStore(), subj)
		if err != nil {
			t.Fatal(err)
		}
		if v.Unexamined != 3 || len(v.UnexaminedItems) != 3 {
			t.Fatalf("verification %+v; want the 3 locked objects unexamined", v)
		}
		var refs []string
		for _, item := range v.UnexaminedItems {
			for _, raw := range []string{"anna", "schmidt", "example", "4711", "invoice", "/uploads/", "acme"} {
				if strings.Contains(item, raw) {
					t.Errorf("item %q holds %q", item, raw)
				}
			}
			if i := strings.Index(item, " [ref "); i >= 0 {
				refs = append(refs, item[i+6:i+22])
			}
		}
		for key, ref := range names {
			if !slices.Contains(refs, ref) {
				t.Errorf("no item refers to %s (%s): %q", key, ref, v.UnexaminedItems)
			}
		}
		if joined := strings.Join(v.UnexaminedItems, "\n"); !strings.Contains(joined, "*/*.png [ref ") || !strings.Contains(joined, "*.pdf [ref ") {
			t.Errorf("items %q keep no extension", v.UnexaminedItems)
		}
	}
}

// TestTenantScope erases everything under each template's tenant prefix, and nothing of
// another tenant or outside those prefixes.
func TestTenantScope(t *testing.T) {
	w := newWorld(t)
	a, b := deletiontest.NewSubject("acme", "cust-1"), deletiontest.NewSubject("acme", "cust-2")
	other := deletiontest.NewSubject("acme2", "cust-1")
	want := w.seed(t, a, 2) + w.seed(t, b, 1)
	keep := w.seed(t, other, 2)
	w.put(t, uploadsBucket, "acme/settings.json", "{}") // outside acme/users/
	res, err := New(w.client).Erase(context.Background(), testStore(), deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted() != int64(want) {
		t.Errorf("deleted %d, seeded %d", res.Deleted(), want)
	}
	locs := map[string]bool{}
	for _, l := range res.Locations {
		locs[l.Location] = true
	}
	if !locs["s3://"+uploadsBucket+"/{tenant}/users/"] || !locs["s3://"+docsBucket+"/{tenant}/sessions/"] {
		t.Errorf("locations %+v, want the tenant prefixes", res.Locations)
	}
	if n := w.count(t, uploadsBucket, "acme/users/") + w.count(t, docsBucket, "acme/sessions/"); n != 0 {
		t.Errorf("%d versions of the tenant remain", n)
	}
	if n := w.countSubject(t, other); n != keep {
		t.Errorf("tenant acme2 has %d of %d", n, keep)
	}
	if n := w.count(t, uploadsBucket, "acme/settings.json"); n != 1 {
		t.Errorf("an object outside the tenant prefixes: %d versions, want 1", n)
	}
	if _, err := New(w.client).Erase(context.Background(), testStore(), deletion.Subject{Scope: event.ScopeTenant}); !retry.IsPermanent(err) {
		t.Errorf("an empty tenant: %v, want a permanent error", err)
	}
}

// TestMissingBucketIsPermanent: an inventory naming a bucket that does not exist is no
// error retrying can fix (the suite checks that a backend that is down is transient).
func TestMissingBucketIsPermanent(t *testing.T) {
	s := deletiontest.NewSubject("acme", "cust-1")
	missing := inventory.Entry{Name: "x", Kind: Kind, Locators: inventory.Locators{"prefixes": []any{"s3://no-such-bucket/{tenant}/{subject}/"}}}
	w := newWorld(t)
	if _, err := New(w.client).Erase(context.Background(), missing, s); err == nil || !retry.IsPermanent(err) {
		t.Errorf("Erase: %v, want a permanent error", err)
	}
	if _, err := New(w.client).Verify(context.Background(), missing, s); err == nil || !retry.IsPermanent(err) {
		t.Errorf("Verify: %v, want a permanent error", err)
	}
}
