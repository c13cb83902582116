package datasetstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// withSummaries is the option every summary test uses, with the suite's pseudonym key.
var withSummaries = WithSummaries(deletiontest.Key)

func TestConformanceS3Summaries(t *testing.T) {
	deletiontest.Run(t, func(t *testing.T) deletiontest.Fixture {
		f, _, _ := s3Fixture(t)
		c := f.Impl.(*Store).s3
		f.Impl = New(c, "", withSummaries)
		return f
	})
}

func TestConformanceFormatsSummaries(t *testing.T) {
	deletiontest.Run(t, func(t *testing.T) deletiontest.Fixture {
		f := formatsFixture(t)
		f.Impl = New(f.Impl.(*Store).s3, "", withSummaries)
		return f
	})
}

// requests counts the object requests a gofakes3 server receives, per method and key
// ("key@version" when a version id is named), and the listings under "LIST".
type requests struct {
	mu     sync.Mutex
	counts map[string]int // "GET key", "PUT key@version"...
	lists  map[string]int // listings per prefix
}

func (rq *requests) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := url.PathUnescape(strings.TrimPrefix(r.URL.Path, "/"+testBucket+"/"))
		if q := r.URL.Query(); r.Method == http.MethodGet && (q.Has("versions") || q.Has("list-type")) {
			rq.mu.Lock()
			rq.counts["LIST "]++ // n("LIST", "")
			rq.lists[q.Get("prefix")]++
			rq.mu.Unlock()
		} else if err == nil && key != "" && key != r.URL.Path {
			if id := r.URL.Query().Get("versionId"); id != "" {
				key += "@" + id
			}
			rq.mu.Lock()
			rq.counts[r.Method+" "+key]++
			rq.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// n is the number of requests of method on key (all its versions).
func (rq *requests) n(method, key string) int {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	total := 0
	for k, c := range rq.counts {
		if k == method+" "+key || strings.HasPrefix(k, method+" "+key+"@") {
			total += c
		}
	}
	return total
}

// total is the number of object requests of every method and key, summaries included.
func (rq *requests) total() int {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	n := 0
	for _, c := range rq.counts {
		n += c
	}
	return n
}

// listed is the number of listings of prefix.
func (rq *requests) listed(prefix string) int {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	return rq.lists[prefix]
}

func (rq *requests) reset() {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	rq.counts, rq.lists = map[string]int{}, map[string]int{}
}

func countedS3(t *testing.T, versioned bool) (*s3.Client, *requests) {
	rq := &requests{counts: map[string]int{}, lists: map[string]int{}}
	srv := testenv.S3With(t, testenv.S3Options{Unversioned: !versioned, Wrap: rq.wrap}, testBucket)
	return srv.Client, rq
}

// tenObjects writes acme/d0.csv … acme/d9.csv, each with the rows of two bystanders;
// d3.csv also holds the victim's row. It returns the keys.
func tenObjects(t *testing.T, w s3World) []string {
	var keys []string
	for i := range 10 {
		rows := []row{{Customer: fmt.Sprintf("by-%03d", i), Sessions: []string{fmt.Sprintf("sess-by-%03d", i)}, Text: "hello"}, {Customer: fmt.Sprintf("by-%03d", i+100), Text: trickyText}}
		if i == 3 {
			rows = append(rows, row{Customer: "cust-victim", Text: "mine"})
		}
		key := fmt.Sprintf("acme/d%d.csv", i)
		w.put(t, key, renderCSV(t, rows))
		keys = append(keys, key)
	}
	return keys
}

var victimSubject = deletion.Subject{Tenant: "acme", ID: "cust-victim", Hash: "h", Sessions: []string{"sess-victim"}}

// TestSummarySkipsObjectsWithoutTheSubject: once summaries exist, an erasure and its
// verification read only the object that holds the subject, even from a fresh process.
func TestSummarySkipsObjectsWithoutTheSubject(t *testing.T) {
	for _, versioned := range []bool{true, false} {
		t.Run(fmt.Sprintf("versioned=%v", versioned), func(t *testing.T) {
			ctx := context.Background()
			c, rq := countedS3(t, versioned)
			w := s3World{c}
			var keys []string
			if versioned {
				keys = tenObjects(t, w)
			} else {
				keys = tenObjectsPlain(t, c)
			}
			st := testInventory("s3://" + testBucket + "/{tenant}/")
			// A first erasure (of someone absent) reads everything and writes the summaries.
			if _, err := New(c, "", withSummaries).Erase(ctx, st, deletiontest.NewSubject("acme", "nobody")); err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if rq.n("GET", k) != 1 {
					t.Fatalf("first pass read %s %d times; want 1", k, rq.n("GET", k))
				}
			}
			rq.reset()
			store := New(c, "", withSummaries) // a fresh process: summaries come from the bucket
			res, err := store.Erase(ctx, st, victimSubject)
			if err != nil {
				t.Fatal(err)
			}
			v, err := store.Verify(ctx, st, victimSubject)
			if err != nil {
				t.Fatal(err)
			}
			if deleted := res.Locations[0].Deleted; deleted != 1 || v.Remaining != 0 || v.Mentions != 0 || v.Unexamined != 0 {
				t.Fatalf("erase %+v verify %+v; want 1 row removed, nothing left", res, v)
			}
			for i, k := range keys {
				got := rq.n("GET", k)
				if i != 3 && got != 0 {
					t.Errorf("%s does not hold the subject but was read %d times", k, got)
				}
				if i == 3 && got == 0 {
					t.Errorf("%s holds the subject but was not read", k)
				}
			}
			// Every other row is still there, byte for byte.
			if got := string(w.get(t, "acme/d3.csv", "")); strings.Contains(got, "cust-victim") || !strings.Contains(got, "by-003") {
				t.Errorf("d3 after erasure:\n%s", got)
			}
			assertNoRawValues(t, c, "cust-victim", "by-003", "sess-by-003")
		})
	}
}

// tenObjectsPlain is tenObjects for a bucket without versions.
// summarisedTen puts tenObjects in a counted, versioned bucket and returns a Store with
// summaries over it and the inventory store of their prefix.
func summarisedTen(t *testing.T) (*s3.Client, *requests, []string, inventory.Entry, *Store) {
	c, rq := countedS3(t, true)
	keys := tenObjects(t, s3World{c})
	return c, rq, keys, testInventory("s3://" + testBucket + "/{tenant}/"), New(c, "", withSummaries)
}

func tenObjectsPlain(t *testing.T, c *s3.Client) []string {
	var keys []string
	for i := range 10 {
		rows := []row{{Customer: fmt.Sprintf("by-%03d", i), Sessions: []string{fmt.Sprintf("sess-by-%03d", i)}, Text: "hello"}}
		if i == 3 {
			rows = append(rows, row{Customer: "cust-victim", Text: "mine"})
		}
		key := fmt.Sprintf("acme/d%d.csv", i)
		putPlain(t, c, key, renderCSV(t, rows))
		keys = append(keys, key)
	}
	return keys
}

func putPlain(t *testing.T, c *s3.Client, key string, data []byte) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: &key, Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
}

// summaryObjects returns the content of every version of every summary.
func summaryObjects(t *testing.T, c *s3.Client) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	b := objectstore.NewS3(c, testBucket)
	var keys []string
	if err := b.List(ctx, summaryRoot, func(k string) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		obj, err := b.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(obj.Body)
		obj.Body.Close()
		out[k] = data
	}
	return out
}

// assertNoRawValues fails when a summary holds one of the raw values.
func assertNoRawValues(t *testing.T, c *s3.Client, raw ...string) {
	t.Helper()
	sums := summaryObjects(t, c)
	if len(sums) == 0 {
		t.Fatal("no summary was written")
	}
	for k, data := range sums {
		for _, r := range raw {
			if bytes.Contains(data, []byte(r)) {
				t.Errorf("summary %s holds the raw value %q", k, r)
			}
		}
	}
}

// TestStaleSummaryIsNotTrusted: the application rewrites an object behind Lethe's back, or
// a summary is corrupt: the object is read in full and the subject erased.
func TestStaleSummaryIsNotTrusted(t *testing.T) {
	for _, versioned := range []bool{true, false} {
		t.Run(fmt.Sprintf("versioned=%v", versioned), func(t *testing.T) {
			ctx := context.Background()
			c, rq := countedS3(t, versioned)
			tenObjectsPlain(t, c)
			st := testInventory("s3://" + testBucket + "/{tenant}/")
			store := New(c, "", withSummaries)
			if _, err := store.Erase(ctx, st, victimSubject); err != nil {
				t.Fatal(err)
			}
			// The application writes the victim back into d5 and d7 without Lethe; d8's
			// summary is overwritten with garbage.
			putPlain(t, c, "acme/d5.csv", []byte("customer_id,session_id,question\ncust-victim,,back again\nby-005,,kept\n"))
			putPlain(t, c, "acme/d7.csv", []byte("customer_id,session_id,question\nby-007,sess-victim,legacy row\n"))
			putPlain(t, c, store.sum.nameOf("acme/d8.csv"), []byte("{not json"))
			putPlain(t, c, "acme/d8.csv", []byte("customer_id,session_id,question\ncust-victim,,third\n"))
			rq.reset()
			res, err := New(c, "", withSummaries).Erase(ctx, st, victimSubject)
			if err != nil {
				t.Fatal(err)
			}
			if res.Locations[0].Deleted != 3 {
				t.Fatalf("erase after stale summaries = %+v; want 3 rows", res)
			}
			for _, k := range []string{"acme/d5.csv", "acme/d7.csv", "acme/d8.csv"} {
				if rq.n("GET", k) == 0 {
					t.Errorf("%s changed behind Lethe but was not read", k)
				}
			}
			if rq.n("GET", "acme/d4.csv") != 0 {
				t.Error("d4 did not change and does not hold the subject, but was read")
			}
			v, err := New(c, "", withSummaries).Verify(ctx, st, victimSubject)
			if err != nil || v.Remaining != 0 {
				t.Fatalf("verify = %+v, %v; want nothing left", v, err)
			}
			if got := string(s3World{c}.get(t, "acme/d5.csv", "")); got != "customer_id,session_id,question\nby-005,,kept\n" {
				t.Errorf("d5 = %q", got)
			}
		})
	}
}

// TestSummaryOfNoncurrentVersion: a noncurrent version holding the subject is found and
// deleted through its own summary entry; the clean current version is not read, nor is
// the noncurrent one by a later erasure of someone it does not hold.
func TestSummaryOfNoncurrentVersion(t *testing.T) {
	ctx := context.Background()
	c, rq := countedS3(t, true)
	w := s3World{c}
	const key = "acme/qa.csv"
	old := w.putVersion(t, key, renderCSV(t, []row{{Customer: "cust-victim", Text: "old"}, {Customer: "by-1", Text: "old"}}))
	w.putVersion(t, key, renderCSV(t, []row{{Customer: "by-1", Text: "new"}}))
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	if _, err := New(c, "", withSummaries).Erase(ctx, st, deletiontest.NewSubject("acme", "nobody")); err != nil {
		t.Fatal(err)
	}
	rq.reset()
	store := New(c, "", withSummaries)
	res, err := store.Erase(ctx, st, victimSubject)
	if err != nil {
		t.Fatal(err)
	}
	if res.Locations[0].Deleted != 0 || res.Locations[1].Deleted != 1 {
		t.Fatalf("erase = %+v; want 0 current rows, 1 old version", res)
	}
	if rq.n("GET", key+"@"+old) != 1 || rq.n("GET", key)-rq.n("GET", key+"@"+old) != 0 {
		t.Errorf("reads %v; want only the old version read", rq.counts)
	}
	if vs := w.versions(t, key); len(vs) != 1 || strings.Contains(string(vs[0]), "cust-victim") {
		t.Errorf("versions after erasure: %q", vs)
	}
	rq.reset()
	if _, err := New(c, "", withSummaries).Erase(ctx, st, deletiontest.NewSubject("acme", "someone-else")); err != nil {
		t.Fatal(err)
	}
	if n := rq.n("GET", key); n != 0 {
		t.Errorf("an erasure of an absent subject read the object %d times", n)
	}
}

// TestBatchRewritesEachObjectOnce: a batch of many subjects reads only the objects that
// hold one of them and rewrites each of those once.
func TestBatchRewritesEachObjectOnce(t *testing.T) {
	ctx := context.Background()
	c, rq := countedS3(t, true)
	w := s3World{c}
	var subjects []deletion.Subject
	for i := range 40 {
		subjects = append(subjects, deletiontest.NewSubject("acme", fmt.Sprintf("cust-%03d", i)))
	}
	// d0..d9: d0..d4 hold the subjects (8 each), d5..d9 only bystanders.
	for d := range 10 {
		rows := []row{{Customer: fmt.Sprintf("by-%03d", d), Text: "keep"}}
		if d < 5 {
			for i := range 8 {
				rows = append(rows, row{Customer: fmt.Sprintf("cust-%03d", d*8+i), Text: "go"})
			}
		}
		w.put(t, fmt.Sprintf("acme/d%d.csv", d), renderCSV(t, rows))
	}
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	if _, err := New(c, "", withSummaries).Erase(ctx, st, deletiontest.NewSubject("acme", "nobody")); err != nil {
		t.Fatal(err)
	}
	// Finding the batch reads each object holding one of its subjects once, and counts
	// for each subject what Find counts for it alone.
	store := New(c, "", withSummaries)
	rq.reset()
	found, ferrs := store.CountBatch(ctx, st, subjects)
	for d := range 10 {
		key := fmt.Sprintf("acme/d%d.csv", d)
		if gets, want := rq.n("GET", key), map[bool]int{true: 1, false: 0}[d < 5]; gets != want {
			t.Errorf("CountBatch: %s read %d times, want %d", key, gets, want)
		}
	}
	for i, err := range ferrs {
		alone, err2 := store.Count(ctx, st, subjects[i])
		if err != nil || err2 != nil || !reflect.DeepEqual(found[i], alone) {
			t.Errorf("subject %d: CountBatch %+v, %v; Count %+v, %v", i, found[i], err, alone, err2)
		}
	}
	rq.reset()
	results, errs := New(c, "", withSummaries).EraseBatch(ctx, st, subjects)
	// One listing of the location, and one of each rewritten object's summary versions:
	// an object whose listed current version is the one rewritten is not listed again.
	if n := rq.n("LIST", ""); n != 1+5 {
		t.Errorf("EraseBatch made %d listings; want 6", n)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		if results[i].Locations[0].Deleted != 1 {
			t.Errorf("subject %d: %+v; want 1 row", i, results[i])
		}
	}
	for d := range 10 {
		key := fmt.Sprintf("acme/d%d.csv", d)
		puts, gets := rq.n("PUT", key), rq.n("GET", key)
		if d < 5 && puts != 1 || d >= 5 && (puts != 0 || gets != 0) {
			t.Errorf("%s: %d puts, %d gets", key, puts, gets)
		}
		if n := len(w.versions(t, key)); n != 1 {
			t.Errorf("%s keeps %d versions after the erasure; want 1 (the superseded one deleted)", key, n)
		}
	}
	// Verifying the batch lists the location once for all 40 subjects (alone, each lists
	// it for its rows and again for its mentions) and finds each subject gone, as Verify does.
	rq.reset()
	vs, verrs := store.VerifyBatch(ctx, st, subjects)
	if n := rq.n("LIST", ""); n != 1 {
		t.Errorf("VerifyBatch of 40 subjects listed the location %d times; want 1", n)
	}
	rq.reset()
	alone, err := store.Verify(ctx, st, subjects[0])
	if err != nil {
		t.Fatal(err)
	}
	if n := rq.n("LIST", ""); n != 2 {
		t.Errorf("Verify of one subject listed the location %d times; the test expects 2", n)
	}
	for i, err := range verrs {
		if err != nil || vs[i].Remaining != 0 || vs[i].Mentions != 0 || vs[i].Unexamined != 0 || !reflect.DeepEqual(vs[i], alone) {
			t.Errorf("subject %d: VerifyBatch %+v, %v; Verify alone %+v", i, vs[i], err, alone)
		}
	}
}

// TestConcurrentSummaryWriters: two processes (two stores, two caches) erase different
// subjects from the same objects at once; whatever summary entries they lose, a third
// process finds nothing left of either and every bystander row kept.
func TestConcurrentSummaryWriters(t *testing.T) {
	ctx := context.Background()
	c, _ := countedS3(t, true)
	w := s3World{c}
	a, b := deletiontest.NewSubject("acme", "cust-a"), deletiontest.NewSubject("acme", "cust-b")
	for d := range 6 {
		w.put(t, fmt.Sprintf("acme/d%d.csv", d), renderCSV(t, []row{{Customer: "cust-a"}, {Customer: "cust-b"}, {Customer: fmt.Sprintf("by-%d", d)}}))
	}
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	var wg sync.WaitGroup
	for _, s := range []deletion.Subject{a, b} {
		wg.Go(func() {
			store := New(c, "", withSummaries)
			for {
				// A conflict with the other process is transient: retry as the runtime does.
				if _, err := store.Erase(ctx, st, s); err == nil {
					return
				}
			}
		})
	}
	wg.Wait()
	third := New(c, "", withSummaries)
	for _, s := range []deletion.Subject{a, b} {
		if v, err := third.Verify(ctx, st, s); err != nil || v.Remaining != 0 {
			t.Errorf("verify %s = %+v, %v", s.ID, v, err)
		}
	}
	for d := range 6 {
		if got := string(w.versions(t, fmt.Sprintf("acme/d%d.csv", d))[0]); got != fmt.Sprintf("customer_id,session_id,question\nby-%d,,\n", d) {
			t.Errorf("d%d = %q", d, got)
		}
	}
}

// TestTenantErasureDropsSummaries: erasing a tenant deletes its objects' summaries too.
func TestTenantErasureDropsSummaries(t *testing.T) {
	ctx := context.Background()
	c, _, _, st, store := summarisedTen(t)
	if _, err := store.Erase(ctx, st, deletiontest.NewSubject("acme", "nobody")); err != nil {
		t.Fatal(err)
	}
	if n := len(summaryObjects(t, c)); n != 10 {
		t.Fatalf("%d summaries; want 10", n)
	}
	tenant := deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}
	if _, err := store.Erase(ctx, st, tenant); err != nil {
		t.Fatal(err)
	}
	vs, err := objectstore.NewS3(c, testBucket).ListVersions(ctx, summaryRoot)
	if err != nil || len(vs) != 0 {
		t.Errorf("summary versions after the tenant erasure: %d, %v; want none", len(vs), err)
	}
	store.sum.mu.Lock()
	defer store.sum.mu.Unlock()
	if n, w := len(store.sum.cache), len(store.sum.written); n != 0 || w != 0 {
		t.Errorf("the process still knows %d summaries (%d written) of the erased tenant's objects", n, w)
	}
}

// TestSummariesEraseWhatFullReadsErase: on random datasets (every format, history,
// mentions, bystanders, an identifier with a space) and random sequences of application
// writes, erasures, batches, counts and verifications, a store with summaries returns
// exactly what a store without them returns and leaves every version byte for byte the
// same.
func TestSummariesEraseWhatFullReadsErase(t *testing.T) {
	ctx := context.Background()
	ids := []string{"cust-0", "cust-1", "cust-2", "cust-3", "ann lee", "c9"}
	keys := []string{"acme/a.csv", "acme/b.jsonl", "acme/c.json", "acme/d.tsv.gz", "acme/e.parquet"}
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			plain, summarised := newS3Client(t), newS3Client(t)
			stores := []*Store{New(plain, "", WithKey(deletiontest.Key)), New(summarised, "", withSummaries)}
			worlds := []s3World{{plain}, {summarised}}
			st := testInventory("s3://" + testBucket + "/{tenant}/")
			if p := []string{"", MentionsRedact, MentionsErase}[r.IntN(3)]; p != "" {
				st.Locators = st.Locators.With("mentions", p)
			}
			subj := func() deletion.Subject {
				id := ids[r.IntN(len(ids))]
				return deletion.Subject{Tenant: "acme", ID: id, Hash: "h", Sessions: []string{"sess-" + id}}
			}
			randomRows := func() []row {
				var rows []row
				for range 1 + r.IntN(6) {
					var rw row
					if r.IntN(4) > 0 {
						rw.Customer = ids[r.IntN(len(ids))]
					}
					if r.IntN(3) == 0 {
						rw.Sessions = []string{"sess-" + ids[r.IntN(len(ids))]}
					}
					rw.Text = []string{"hello", "ticket from " + ids[r.IntN(len(ids))] + ".", "(" + ids[r.IntN(len(ids))] + ")", trickyText}[r.IntN(4)]
					rows = append(rows, rw)
				}
				return rows
			}
			for _, k := range keys {
				data := render(t, k, randomRows())
				for _, w := range worlds {
					w.putVersion(t, k, data)
				}
			}
			for op := range 14 {
				var got [2]string
				switch r.IntN(6) {
				case 0: // the application writes a new version
					k := keys[r.IntN(len(keys))]
					data := render(t, k, randomRows())
					for _, w := range worlds {
						w.putVersion(t, k, data)
					}
					continue
				case 1:
					s := subj()
					for i, store := range stores {
						res, err := store.Erase(ctx, st, s)
						got[i] = fmt.Sprintf("erase %s: %+v %v", s.ID, res, err)
					}
				case 2:
					var batch []deletion.Subject
					for range 1 + r.IntN(3) {
						batch = append(batch, subj())
					}
					for i, store := range stores {
						res, errs := store.EraseBatch(ctx, st, batch)
						got[i] = fmt.Sprintf("batch: %+v %v", res, errs)
					}
				case 3:
					s := subj()
					for i, store := range stores {
						res, err := store.Count(ctx, st, s)
						got[i] = fmt.Sprintf("count %s: %+v %v", s.ID, res, err)
					}
				case 4:
					s := subj()
					for i, store := range stores {
						res, errs := store.CountBatch(ctx, st, []deletion.Subject{s})
						got[i] = fmt.Sprintf("count batch %s: %+v %v", s.ID, res, errs)
					}
				default:
					s := subj()
					for i, store := range stores {
						v, err := store.Verify(ctx, st, s)
						got[i] = fmt.Sprintf("verify %s: %+v %v", s.ID, v, err)
					}
				}
				if got[0] != got[1] {
					t.Fatalf("op %d:\nwithout summaries %s\nwith summaries    %s", op, got[0], got[1])
				}
			}
			for _, k := range keys {
				a, b := worlds[0].versions(t, k), worlds[1].versions(t, k)
				if fmt.Sprint(a) != fmt.Sprint(b) {
					t.Errorf("%s: versions differ:\n%q\n%q", k, a, b)
				}
			}
		})
	}
}

// TestCheckingWritesNothing: Verify, Count and Find only read: the summaries they build stay
// in the process (a second Verify of the same store reads nothing it can skip), and nothing
// is written to the bucket they check.
func TestCheckingWritesNothing(t *testing.T) {
	ctx := context.Background()
	c, rq, keys, st, store := summarisedTen(t)
	rq.reset()
	if _, err := store.Verify(ctx, st, victimSubject); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Count(ctx, st, victimSubject); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Count(ctx, st, victimSubject); err != nil {
		t.Fatal(err)
	}
	for k, n := range rq.counts {
		if strings.HasPrefix(k, "PUT ") || strings.HasPrefix(k, "DELETE ") {
			t.Errorf("checking wrote: %s ×%d", k, n)
		}
	}
	if n := len(summaryObjects(t, c)); n != 0 {
		t.Errorf("%d summaries stored by checking; want none", n)
	}
	rq.reset()
	if _, err := store.Verify(ctx, st, victimSubject); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if got := rq.n("GET", k); i != 3 && got != 0 {
			t.Errorf("second Verify read %s %d times; its summary is in the process", k, got)
		}
	}
}

// TestViewsShareWhatTheyLearn: views of one object run concurrently in a process (batches,
// verifications). A view opened before another one summarised a version finds that summary
// in the process cache, reading neither the stored summary nor the object; and a view
// whose own list lacks an entry does not drop it from the cache when it records another.
func TestViewsShareWhatTheyLearn(t *testing.T) {
	ctx := context.Background()
	c, rq := countedS3(t, true)
	store := New(c, "", withSummaries)
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	locs, m, err := store.targets(st, victimSubject)
	if err != nil {
		t.Fatal(err)
	}
	l := locs[0]
	early, late := l.view(m, nil), l.view(m, nil)
	key := "acme/d0.csv"
	early.doc(key) // loaded before anything was summarised
	e1 := entry{VersionID: "v1", ETag: "e1", Scope: late.scope, IDs: make([]byte, 8)}
	e2 := entry{VersionID: "v2", ETag: "e2", Scope: late.scope, IDs: make([]byte, 8)}
	late.add(key, e1)
	rq.reset()
	if _, ok := early.find(ctx, key, "v1", `"e1"`); !ok {
		t.Fatal("the earlier view did not find the version the later one summarised")
	}
	if n := rq.total(); n != 0 {
		t.Errorf("finding a summary the process holds made %d S3 requests; want 0", n)
	}
	// a third view that never saw e1 records e2: the cache keeps both
	third := l.view(m, nil)
	third.docs[key] = &loaded{fetched: true}
	third.add(key, e2)
	for _, want := range []entry{e1, e2} {
		fresh := l.view(m, nil)
		fresh.docs[key] = &loaded{entries: store.sum.cached(fresh.cacheID(key)), fetched: true}
		if _, ok := fresh.find(ctx, key, want.VersionID, want.ETag); !ok {
			t.Errorf("the cache lost the entry of %s", want.VersionID)
		}
	}
}

// TestVerificationReadsNothingTheProcessKnows: after a process erased a subject, verifying
// it reads no stored summary and no object the summaries clear: the process cache holds
// the summary of every version the erasure left, and checking writes nothing.
func TestVerificationReadsNothingTheProcessKnows(t *testing.T) {
	ctx := context.Background()
	_, rq, _, st, store := summarisedTen(t)
	if _, err := store.Erase(ctx, st, victimSubject); err != nil {
		t.Fatal(err)
	}
	rq.reset()
	for range 3 {
		v, err := store.Verify(ctx, st, victimSubject)
		if err != nil || v.Remaining != 0 || v.Mentions != 0 || v.Unexamined != 0 {
			t.Fatalf("verify = %+v, %v", v, err)
		}
	}
	rq.mu.Lock()
	defer rq.mu.Unlock()
	for k, n := range rq.counts {
		if k != "LIST " {
			t.Errorf("verification after the erasure made %d requests %q", n, k)
		}
	}
}

// TestVersionWrittenAfterTheListingIsErased: when a version is written between an
// erasure's listing and its rewrite (a late write of the application), the rewrite
// supersedes that version, and the version the listing saw as current — holding the
// subject's row — is still found non-current and deleted.
func TestVersionWrittenAfterTheListingIsErased(t *testing.T) {
	ctx := context.Background()
	var w s3World
	var once sync.Once
	key := "acme/d0.csv"
	late := renderCSV(t, []row{{Customer: "cust-victim", Text: "late"}, {Customer: "by-1", Text: "keep"}})
	srv := testenv.S3With(t, testenv.S3Options{Wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/"+key) && r.URL.Query().Get("versionId") == "" {
				once.Do(func() { w.putVersion(t, key, late) }) // after the listing, before the read
			}
			h.ServeHTTP(rw, r)
		})
	}}, testBucket)
	w = s3World{srv.Client}
	w.put(t, key, renderCSV(t, []row{{Customer: "cust-victim", Text: "first"}, {Customer: "by-1", Text: "keep"}}))
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	store := New(srv.Client, "", withSummaries)
	if _, err := store.Erase(ctx, st, victimSubject); err != nil {
		t.Fatal(err)
	}
	vs := w.versions(t, key)
	for i, v := range vs {
		if strings.Contains(string(v), "cust-victim") {
			t.Errorf("version %d of %d still holds the subject: %q", i, len(vs), v)
		}
	}
	if v, err := store.Verify(ctx, st, victimSubject); err != nil || !v.Clean() {
		t.Errorf("verify = %+v, %v", v, err)
	}
}

// TestSummaryRewriteSkipsWhatTheProcessKnows: once a process wrote an object's summary,
// its next erasure of that object replaces the summary on the condition that it is still
// the one written (no read of it, no listing of its versions) and deletes the version it
// supersedes; when another process wrote it in between, the condition fails and the
// stored entries are merged, so a third process still skips the objects without the subject.
func TestSummaryRewriteSkipsWhatTheProcessKnows(t *testing.T) {
	ctx := context.Background()
	c, rq := countedS3(t, true)
	w := s3World{c}
	key := "acme/d0.csv"
	w.put(t, key, renderCSV(t, []row{{Customer: "cust-a"}, {Customer: "cust-b"}, {Customer: "cust-c"}, {Customer: "by-1"}}))
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	one, other := New(c, "", withSummaries), New(c, "", withSummaries)
	if _, err := one.Erase(ctx, st, deletiontest.NewSubject("acme", "cust-a")); err != nil {
		t.Fatal(err)
	}
	summaryRequests := func() map[string]int {
		rq.mu.Lock()
		defer rq.mu.Unlock()
		out := map[string]int{}
		for k, n := range rq.counts {
			if method, name, ok := strings.Cut(k, " "); ok && strings.HasPrefix(name, summaryRoot) {
				out[method] += n
			}
		}
		out["LIST"] = rq.counts["LIST "]
		return out
	}
	rq.reset()
	if _, err := one.Erase(ctx, st, deletiontest.NewSubject("acme", "cust-b")); err != nil {
		t.Fatal(err)
	}
	if got := summaryRequests(); got["GET"] != 0 || got["PUT"] != 1 || got["DELETE"] != 1 || got["LIST"] != 1 {
		t.Errorf("second erasure by the same process: summary requests %v; want 1 PUT, 1 DELETE, no GET, and the location's listing only", got)
	}
	// another process rewrites the object and its summary: the first one's condition fails
	if _, err := other.Erase(ctx, st, deletiontest.NewSubject("acme", "cust-c")); err != nil {
		t.Fatal(err)
	}
	if _, err := one.Erase(ctx, st, deletiontest.NewSubject("acme", "by-1")); err != nil {
		t.Fatal(err)
	}
	if got := string(w.versions(t, key)[0]); got != "customer_id,session_id,question\n" {
		t.Errorf("object after the four erasures: %q", got)
	}
	if n := len(w.versions(t, summaryObjectName(t, c))); n != 1 {
		t.Errorf("the summary keeps %d versions; want 1", n)
	}
	rq.reset()
	if v, err := New(c, "", withSummaries).Verify(ctx, st, deletiontest.NewSubject("acme", "cust-a")); err != nil || !v.Clean() {
		t.Fatalf("verify = %+v, %v", v, err)
	}
	if n := rq.n("GET", key); n != 0 {
		t.Errorf("a third process read the object %d times; its stored summary should clear it", n)
	}
}

// summaryObjectName is the key of the one summary object in the test bucket.
func summaryObjectName(t *testing.T, c *s3.Client) string {
	t.Helper()
	var names []string
	for name := range summaryObjects(t, c) {
		names = append(names, name)
	}
	if len(names) != 1 {
		t.Fatalf("summaries %v; want one", names)
	}
	return names[0]
}

// TestReadDuringRewriteWaitsForItsSummary: a read of a version other than the one this
// process is rewriting its object from (most likely the version being written) waits for
// the rewrite's summary instead of building the same one again; a read of the version the
// rewrite started from does not wait.
func TestReadDuringRewriteWaitsForItsSummary(t *testing.T) {
	c, _ := countedS3(t, true)
	store := New(c, "", withSummaries)
	locs, m, err := store.targets(testInventory("s3://"+testBucket+"/{tenant}/"), victimSubject)
	if err != nil {
		t.Fatal(err)
	}
	key := "acme/d0.csv"
	writer, reader := locs[0].view(m, nil), locs[0].readView(m, nil)
	end := store.sum.rewriting(writer.cacheID(key), `"e1"`)
	if reader.summarised(key, &objectstore.Object{VersionID: "v1", Token: `"e1"`}) {
		t.Fatal("the version the rewrite started from has no summary, yet it was taken as summarised")
	}
	got := make(chan bool)
	go func() { got <- reader.summarised(key, &objectstore.Object{VersionID: "v2", Token: `"e2"`}) }()
	select {
	case <-got:
		t.Fatal("a read of the version being written did not wait for the rewrite")
	case <-time.After(50 * time.Millisecond):
	}
	writer.add(key, entry{VersionID: "v2", ETag: "e2", Scope: writer.scope, IDs: make([]byte, 8)})
	end()
	if !<-got {
		t.Error("after the rewrite, the version it wrote was not found summarised")
	}
	// no rewrite in progress: nothing to wait for
	if reader.summarised(key, &objectstore.Object{VersionID: "v3", Token: `"e3"`}) {
		t.Error("a version never summarised was taken as summarised")
	}
}
