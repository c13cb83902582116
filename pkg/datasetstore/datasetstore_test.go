package datasetstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

func s3Fixture(t *testing.T) (deletiontest.Fixture, *fixture, s3World) {
	c := newS3Client(t)
	w := s3World{c}
	f := &fixture{w: w, rows: map[string][]row{}, keys: func(tenant string) []string {
		return []string{tenant + "/eval/qa.csv", tenant + "/eval/nested/qa.jsonl"}
	}}
	return deletiontest.Fixture{
		Impl:  New(c, ""),
		Store: testInventory("s3://" + testBucket + "/{tenant}/"),
		Seed:  f.seed,
		Count: f.count,
		Down: func(t *testing.T) deletion.Store {
			down := s3.New(c.Options(), func(o *s3.Options) {
				o.BaseEndpoint = aws.String(fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t)))
				o.RetryMaxAttempts = 1
			})
			return New(down, "")
		},
		Malformed: func(t testing.TB, s deletion.Subject) {
			w.put(t.(*testing.T), s.Tenant+"/eval/broken.jsonl.gz", []byte("not gzip"))
		},
	}, f, w
}

func dirFixture(t *testing.T) (deletiontest.Fixture, *fixture, dirWorld) {
	w := dirWorld{t.TempDir()}
	f := &fixture{w: w, rows: map[string][]row{}, keys: func(tenant string) []string {
		return []string{"datasets/" + tenant + "/qa.csv", "archive/" + tenant + "/nested/qa.jsonl"}
	}}
	return deletiontest.Fixture{
		Impl:   New(nil, w.root),
		Store:  testInventory("datasets/{tenant}/", "file://archive/{tenant}/"),
		Seed:   f.seed,
		Count:  f.count,
		NoDown: "a local directory has no server to lose",
		Malformed: func(t testing.TB, s deletion.Subject) {
			w.put(t.(*testing.T), "datasets/"+s.Tenant+"/broken.jsonl.gz", []byte("not gzip"))
		},
	}, f, w
}

func TestConformanceS3(t *testing.T) {
	deletiontest.Run(t, func(t *testing.T) deletiontest.Fixture { f, _, _ := s3Fixture(t); return f })
}

// formatsFixture is s3Fixture with one dataset of each other format per tenant: a JSON
// array, a gzip-compressed TSV, NDJSON and Parquet.
func formatsFixture(t *testing.T) deletiontest.Fixture {
	fx, f, _ := s3Fixture(t)
	f.keys = func(tenant string) []string {
		return []string{tenant + "/qa.json", tenant + "/qa.tsv.gz", tenant + "/x/qa.ndjson", tenant + "/qa.parquet"}
	}
	return fx
}

func TestConformanceFormats(t *testing.T) {
	deletiontest.Run(t, formatsFixture)
}

func TestConformanceDir(t *testing.T) {
	deletiontest.Run(t, func(t *testing.T) deletiontest.Fixture { f, _, _ := dirFixture(t); return f })
}

func TestEraseReportsPerPrefix(t *testing.T) {
	ctx := context.Background()
	t.Run("s3", func(t *testing.T) {
		fx, _, _ := s3Fixture(t)
		s := deletiontest.NewSubject("acme", "cust-9")
		fx.Seed(t, s, 2)
		res, err := fx.Impl.Erase(ctx, fx.Store, s)
		if err != nil {
			t.Fatal(err)
		}
		want := []event.LocationCount{
			{Location: "s3://lethe-datasets/acme/", Deleted: 8},
			{Location: "s3://lethe-datasets/acme/ (old versions)", Deleted: 0},
		}
		if !equalLocations(res.Locations, want) {
			t.Errorf("locations = %+v, want %+v", res.Locations, want)
		}
	})
	t.Run("dir", func(t *testing.T) {
		fx, _, _ := dirFixture(t)
		s := deletiontest.NewSubject("acme", "cust-9")
		fx.Seed(t, s, 2)
		res, err := fx.Impl.Erase(ctx, fx.Store, s)
		if err != nil {
			t.Fatal(err)
		}
		want := []event.LocationCount{
			{Location: "datasets/acme/", Deleted: 4},
			{Location: "file://archive/acme/", Deleted: 4},
		}
		if !equalLocations(res.Locations, want) {
			t.Errorf("locations = %+v, want %+v", res.Locations, want)
		}
	})
}

func equalLocations(a, b []event.LocationCount) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTenantScope(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (deletiontest.Fixture, *fixture, world)
		extra string // a non-dataset object under the tenant's prefix
	}{
		{"s3", func(t *testing.T) (deletiontest.Fixture, *fixture, world) { f, x, w := s3Fixture(t); return f, x, w }, "acme/README.md"},
		{"dir", func(t *testing.T) (deletiontest.Fixture, *fixture, world) { f, x, w := dirFixture(t); return f, x, w }, "datasets/acme/README.md"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx, f, w := tc.setup(t)
			a, b := deletiontest.NewSubject("acme", "x"), deletiontest.NewSubject("acme", "y")
			other := deletiontest.NewSubject("globex", "x")
			fx.Seed(t, a, 1)
			fx.Seed(t, b, 1)
			keepOther := fx.Seed(t, other, 1)
			w.put(t, tc.extra, []byte("not a dataset"))
			if s3w, ok := w.(s3World); ok { // an older version too
				s3w.putVersion(t, "acme/eval/qa.csv", renderCSV(t, f.rows["acme/eval/qa.csv"]))
			}
			tenant := deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}
			// Not a dataset and not excluded: unexamined.
			if v, err := fx.Impl.Verify(ctx, fx.Store, tenant); err != nil || v.Unexamined != 1 || !strings.Contains(strings.Join(v.UnexaminedItems, ""), "{tenant}/*.md: ") {
				t.Errorf("Verify without the exclusion = %+v, %v; want README.md unexamined", v, err)
			}
			fx.Store.Locators = fx.Store.Locators.With("exclude", []string{"*.MD"})
			v, err := fx.Impl.Verify(ctx, fx.Store, tenant)
			if err != nil || v.Remaining == 0 || v.Method != MethodObjects {
				t.Fatalf("Verify before = %+v, %v; want objects remaining", v, err)
			}
			res, err := fx.Impl.Erase(ctx, fx.Store, tenant)
			if err != nil {
				t.Fatal(err)
			}
			if res.Deleted() != v.Remaining {
				t.Errorf("deleted %d, verify counted %d", res.Deleted(), v.Remaining)
			}
			if v, err := fx.Impl.Verify(ctx, fx.Store, tenant); err != nil || !v.Clean() || len(v.Excluded) != 1 || !strings.HasSuffix(v.Excluded[0], "{tenant}/*.md") {
				t.Errorf("Verify after = %+v, %v; want clean with README.md excluded", v, err)
			}
			for _, key := range f.keys("acme") {
				if got := w.versions(t, key); len(got) != 0 {
					t.Errorf("%s: %d versions left", key, len(got))
				}
			}
			if got := w.versions(t, tc.extra); len(got) != 1 {
				t.Errorf("non-dataset object: %d versions, want it untouched", len(got))
			}
			if got := f.count(t, other); got != keepOther {
				t.Errorf("other tenant: %d rows left of %d", got, keepOther)
			}
		})
	}
}

func TestRejectsBadPrefixes(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s := deletiontest.NewSubject("acme", "cust-1")
	for _, tc := range []struct {
		name   string
		impl   *Store
		prefix string
		subj   deletion.Subject
	}{
		{"subject placeholder", New(nil, root), "datasets/{tenant}/{subject}/", s},
		{"session placeholder", New(nil, root), "datasets/{tenant}/{session}.csv", s},
		{"dot-dot", New(nil, root), "datasets/{tenant}/../../etc/", s},
		{"leading dot-dot", New(nil, root), "../{tenant}/", s},
		{"absolute file url", New(nil, root), "file:///etc/{tenant}/", s},
		{"absolute path", New(nil, root), "/etc/{tenant}/", s},
		{"unknown scheme", New(nil, root), "gs://bucket/{tenant}/", s},
		{"no s3 client", New(nil, root), "s3://bucket/{tenant}/", s},
		{"no directory", New(nil, ""), "datasets/{tenant}/", s},
		{"no bucket", New(newS3Client(t), ""), "s3:///{tenant}/", s},
		{"hostile tenant", New(nil, root), "datasets/{tenant}/", deletion.Subject{Tenant: "../..", ID: "x", Sessions: []string{"y"}}},
		{"hash in tenant scope", New(nil, root), "datasets/{tenant}/{subject_hash}/", deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}},
		{"no identifiers", New(nil, root), "datasets/{tenant}/", deletion.Subject{Tenant: "acme"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := testInventory(tc.prefix)
			if _, err := tc.impl.Erase(ctx, st, tc.subj); !retry.IsPermanent(err) {
				t.Errorf("Erase: %v, want a permanent error", err)
			} else if strings.Contains(err.Error(), "cust-1") {
				t.Errorf("error %q holds the subject id", err)
			}
			if _, err := tc.impl.Verify(ctx, st, tc.subj); !retry.IsPermanent(err) {
				t.Errorf("Verify: %v, want a permanent error", err)
			}
		})
	}
}

func TestMissingBucketIsPermanent(t *testing.T) {
	st := testInventory("s3://no-such-bucket/{tenant}/")
	_, err := New(newS3Client(t), "").Erase(context.Background(), st, deletiontest.NewSubject("acme", "a"))
	if !retry.IsPermanent(err) {
		t.Errorf("Erase on a missing bucket: %v, want a permanent error", err)
	}
}

func TestSymlinkOutsideRootIsNotFollowed(t *testing.T) {
	ctx := context.Background()
	outside := dirWorld{t.TempDir()}
	s := deletiontest.NewSubject("acme", "cust-1")
	data := renderCSV(t, []row{{Customer: "cust-1", Text: "outside"}})
	outside.put(t, "x.csv", data)
	fx, _, w := dirFixture(t)
	w.put(t, "datasets/acme/keep.txt", nil)
	if err := os.Symlink(outside.root+"/x.csv", w.root+"/datasets/acme/link.csv"); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.Impl.Erase(ctx, fx.Store, s); err != nil {
		t.Fatal(err)
	}
	if got := outside.versions(t, "x.csv")[0]; !bytes.Equal(got, data) {
		t.Error("a file outside the dataset root was rewritten through a symbolic link")
	}
}
