package datasetstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// putIn writes key to bucket.
func putIn(t *testing.T, c *s3.Client, bucket, key, data string) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader([]byte(data))}); err != nil {
		t.Fatal(err)
	}
}

// putFile writes name below the dataset directory root.
func putFile(t *testing.T, root, name, data string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// parseSuggest decodes a suggestion with pkg/inventory, as one entry of an inventory file.
func parseSuggest(t *testing.T, y string) inventory.Entry {
	t.Helper()
	doc := "version: \"1\"\nstores:\n  - " + strings.ReplaceAll(strings.TrimSpace(y), "\n", "\n    ") + "\n"
	inv, err := inventory.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("suggestion does not decode: %v\n%s", err, doc)
	}
	return inv.Stores[0]
}

// TestDiscoverSuggest: each uncovered shape names its identity-like fields (nested ones by
// their dotted path) and suggests a dataset store; the suggestions that can be expressed
// validate, and once added to the inventory the shapes they cover are no longer reported.
func TestDiscoverSuggest(t *testing.T) {
	ctx := context.Background()
	c := testenv.S3(t, testBucket, "data-acme").Client
	putIn(t, c, testBucket, "acme/eval/qa.csv", "customer_id,question\ncust-1,q\n")
	putIn(t, c, testBucket, "acme/exports/users-1.csv", "customer_id,email,session_id\ncust-1,jane.doe@example.com,sess-1\n")
	putIn(t, c, testBucket, "acme/exports/users-2.csv", "customer_id,thread_id\ncust-2,t-2\n")
	putIn(t, c, testBucket, "acme/chats/2026/cust-1.jsonl", `{"meta":{"customer_id":"cust-1","conversation_id":"c-1"},"by":{"cust-1":{"email":"x"}}}`+"\n")
	putIn(t, c, testBucket, "legacy/transcripts.jsonl", `{"session_id":"sess-1"}`+"\n")
	putIn(t, c, testBucket, "notes.json", `[{"note":"reach me at jane.doe@example.com"}]`)
	putIn(t, c, "data-acme", "exports/x.csv", "user_id\ncust-1\n")
	root := t.TempDir()
	putFile(t, root, "datasets/acme/qa.csv", "customer_id\ncust-1\n")
	putFile(t, root, "scratch/acme/cust-9.csv", "user_id,text\ncust-9,hi\n")
	inv := &inventory.Inventory{Version: "1", Stores: []inventory.Entry{
		testInventory("s3://"+testBucket+"/{tenant}/eval/", "datasets/{tenant}/", "s3://data-{tenant}/eval/"),
	}}
	opts := deletion.DiscoverOptions{Tenants: []string{"acme"}}
	st := New(c, root)
	got, err := st.Discover(ctx, inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		fields []string
		prefix string
		valid  bool
		subj   []string
		sess   []string
	}
	b := "s3://" + testBucket + "/"
	wants := map[string]want{
		b + "{tenant}/exports/{id}.csv": {[]string{"customer_id", "email", "session_id", "thread_id"}, b + "{tenant}/exports/", true,
			[]string{"customer_id", "email"}, []string{"session_id", "thread_id"}},
		b + "{tenant}/chats/{id}/{id}.jsonl": {[]string{"meta.conversation_id", "meta.customer_id"}, b + "{tenant}/chats/", true,
			[]string{"meta.customer_id"}, []string{"meta.conversation_id"}},
		b + "legacy/{id}.jsonl":               {[]string{"session_id"}, b + "legacy/", false, nil, []string{"session_id"}},
		b + "{id}.json":                       {nil, b, false, nil, nil},
		"s3://data-{tenant}/exports/{id}.csv": {[]string{"user_id"}, "s3://data-{tenant}/exports/", true, []string{"user_id"}, nil},
		"file://scratch/{tenant}/{id}.csv":    {[]string{"user_id"}, "file://scratch/{tenant}/", true, []string{"user_id"}, nil},
	}
	if len(got) != len(wants) {
		t.Fatalf("discovered %+v, want %d locations", got, len(wants))
	}
	names := map[string]string{}
	for _, u := range got {
		w, ok := wants[u.Location]
		if !ok {
			t.Errorf("discovered %+v: not expected", u)
			continue
		}
		if !slices.Equal(u.Fields, w.fields) {
			t.Errorf("%s: fields %q, want %q", u.Location, u.Fields, w.fields)
		}
		e := parseSuggest(t, u.Suggest)
		var l Locators
		if err := e.Locators.Decode(&l); err != nil {
			t.Fatalf("%s: %v", u.Location, err)
		}
		if e.Kind != Kind || !slices.Equal(l.Prefixes, []string{w.prefix}) || !slices.Equal(l.SubjectColumns, w.subj) || !slices.Equal(l.SessionColumns, w.sess) {
			t.Errorf("%s: suggests %+v, want prefix %q, subject columns %q, session columns %q:\n%s", u.Location, l, w.prefix, w.subj, w.sess, u.Suggest)
		}
		if err := Validate(e); (err == nil) != w.valid {
			t.Errorf("%s: Validate(suggestion) = %v, want valid %v:\n%s", u.Location, err, w.valid, u.Suggest)
		}
		if !w.valid && !strings.Contains(u.Suggest, "#") {
			t.Errorf("%s: an invalid suggestion says nothing of why:\n%s", u.Location, u.Suggest)
		}
		if other, dup := names[e.Name]; dup {
			t.Errorf("%s and %s are suggested under one name %q", u.Location, other, e.Name)
		}
		names[e.Name] = u.Location
		if slices.Contains(inv.Names(), e.Name) {
			t.Errorf("%s: suggested name %q is taken", u.Location, e.Name)
		}
		for _, raw := range []string{"jane", "cust-", "sess-", "c-1", "t-2", "users-"} {
			if strings.Contains(u.Suggest, raw) || slices.ContainsFunc(u.Fields, func(f string) bool { return strings.Contains(f, raw) }) {
				t.Errorf("%s: report %+v holds a raw value %q", u.Location, u, raw)
			}
		}
		if w.valid {
			inv.Stores = append(inv.Stores, e)
		}
	}
	again, err := st.Discover(ctx, inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, u := range again {
		left = append(left, u.Location)
	}
	slices.Sort(left)
	if want := []string{b + "legacy/{id}.jsonl", b + "{id}.json"}; !slices.Equal(left, want) {
		t.Errorf("with the suggestions added, discovered %q; want %q", left, want)
	}
	// A bucket per tenant: the probe reads the subject's tenant's bucket, and a tenant
	// without one has nothing there (with the suggestion added, the probe leaves out what
	// it covers: nothing is left to find).
	inv.Stores = inv.Stores[:1]
	perTenant := []deletion.Uncovered{{Kind: Kind, Location: "s3://data-{tenant}/exports/{id}.csv", Fields: []string{"user_id"}}}
	for tenant, want := range map[string]int64{"acme": 1, "globex": 0} {
		got, err := st.Probe(ctx, inv, perTenant, deletion.Subject{Tenant: tenant, ID: "cust-1"}, deletion.ProbeLimits{})
		if err != nil || len(got) != 1 || got[0].Found != want || got[0].Unexamined != "" {
			t.Errorf("probe of %s in a bucket per tenant = %+v, %v; want %d found", tenant, got, err, want)
		}
	}
}

// probeWorld is the backend of TestProbe: datasets outside the inventory in S3 and in the
// dataset directory, rows of cust-1 in two tenants, and an object that does not decode.
func probeWorld(t *testing.T) (*Store, *inventory.Inventory, []deletion.Uncovered) {
	c := newS3Client(t)
	w := s3World{c}
	w.put(t, "acme/eval/qa.csv", []byte("customer_id\ncust-1\n")) // covered
	w.put(t, "acme/exports/a.csv", []byte("customer_id,session_id,text\ncust-1,,hi\ncust-2,sess-1,legacy\ncust-2,,other\ncust-1,sess-1,both\ncust-10,,prefix\n"))
	w.put(t, "acme/exports/c.csv", []byte("customer_id\ncust-1\n"))
	w.put(t, "acme/exports/b.csv.gz", gz(t, "customer_id,session_id\ncust-1,\n"))
	w.put(t, "acme/chats/cust-1.jsonl", []byte(`{"meta":{"customer_id":"cust-1"}}`+"\n"+`{"meta":{"customer_id":"CUST-1"}}`+"\n"+`{"customer_id":"cust-1"}`+"\n"))
	w.put(t, "globex/exports/a.csv", []byte("customer_id,session_id\ncust-1,sess-1\ncust-1,\n"))
	w.put(t, "acme/broken/cust-1.jsonl", []byte(`{"customer_id":"cust-1"}`+"\n"+`{"customer_id": cust-1}`+"\n"))
	w.put(t, "acme/raw/part-0", []byte(`{"customer_id":"cust-1"}`+"\n"))
	w.put(t, "acme/raw/logo.png", []byte("\x89PNG\r\n\x1a\n not a dataset")) // no dataset: in no shape
	w.put(t, "legacy/transcripts.jsonl", []byte(`{"session_id":"sess-1"}`+"\n"+`{"session_id":"sess-2"}`+"\n"))
	root := t.TempDir()
	putFile(t, root, "scratch/acme/x.csv", "user_id\ncust-1\ncust-1\n")
	putFile(t, root, "scratch/globex/x.csv", "user_id\ncust-1\n")
	inv := &inventory.Inventory{Version: "1", Stores: []inventory.Entry{testInventory("s3://" + testBucket + "/{tenant}/eval/")}}
	st := New(c, root, WithKey(deletiontest.Key))
	locs, err := st.Discover(context.Background(), inv, deletion.DiscoverOptions{Tenants: []string{"acme", "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	return st, inv, locs
}

// TestProbe: a probe counts exactly the rows of the subject in each uncovered location of
// its tenant (another tenant's rows with the same id are not counted where the shape names
// the tenant), reports zero and nothing unexamined where there is none, reports an object
// it cannot decode and a bound reached as unexamined, and its output holds no identifier.
func TestProbe(t *testing.T) {
	ctx := context.Background()
	st, inv, locs := probeWorld(t)
	b := "s3://" + testBucket + "/"
	all := map[string]bool{}
	for _, u := range locs {
		all[u.Location] = true
	}
	for _, l := range []string{b + "{tenant}/exports/{id}.csv", b + "{tenant}/exports/{id}.csv.gz", b + "{tenant}/chats/{id}.jsonl",
		b + "{tenant}/broken/{id}.jsonl", b + "legacy/{id}.jsonl", "file://scratch/{tenant}/{id}.csv", b + "{tenant}/raw/{id}"} {
		if !all[l] {
			t.Fatalf("discovery did not report %s: %+v", l, locs)
		}
	}
	locs = append(locs, deletion.Uncovered{Kind: "redis", Location: "crm:{tenant}:{id}", Fields: []string{"customer_id"}})
	probe := func(s deletion.Subject, lim deletion.ProbeLimits) map[string]deletion.Probed {
		t.Helper()
		got, err := st.Probe(ctx, inv, locs, s, lim)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(got)
		for _, raw := range append([]string{s.ID}, s.Sessions...) {
			if strings.Contains(string(b), raw) {
				t.Errorf("probe output holds identifier %q: %s", raw, b)
			}
		}
		out := map[string]deletion.Probed{}
		for i, p := range got {
			if i >= len(locs) || p.Location != locs[i].Location {
				t.Errorf("probe output not one per location, in order: %+v", got)
				break
			}
			if locs[i].Kind != Kind && !strings.Contains(p.Unexamined, "not a dataset location") {
				t.Errorf("a location of kind %s probed: %+v", locs[i].Kind, p)
			}
			out[p.Location] = p
		}
		if len(got) != len(locs) {
			t.Errorf("probed %d locations, want %d", len(got), len(locs))
		}
		return out
	}
	type want struct {
		found      int64
		unexamined string // a part of the reason, "" for none
	}
	check := func(name string, got map[string]deletion.Probed, wants map[string]want) {
		t.Helper()
		for loc, w := range wants {
			p := got[loc]
			if p.Found != w.found || (w.unexamined == "") != (p.Unexamined == "") || !strings.Contains(p.Unexamined, w.unexamined) {
				t.Errorf("%s: %s: probed %+v, want found %d, unexamined %q", name, loc, p, w.found, w.unexamined)
			}
		}
	}
	acme := deletion.Subject{Tenant: "acme", ID: "cust-1", Sessions: []string{"sess-1"}}
	check("acme cust-1", probe(acme, deletion.ProbeLimits{}), map[string]want{
		b + "{tenant}/exports/{id}.csv":    {4, ""},
		b + "{tenant}/exports/{id}.csv.gz": {1, ""},
		b + "{tenant}/chats/{id}.jsonl":    {2, ""},
		b + "{tenant}/broken/{id}.jsonl":   {0, b + "{tenant}/broken/{id}.jsonl [ref "},
		b + "legacy/{id}.jsonl":            {1, ""}, // no {tenant}: every tenant's rows
		b + "{tenant}/raw/{id}":            {1, ""}, // not the .png beside it
		"file://scratch/{tenant}/{id}.csv": {2, ""},
	})
	globex := deletion.Subject{Tenant: "globex", ID: "cust-1", Sessions: []string{"sess-9"}}
	check("globex cust-1", probe(globex, deletion.ProbeLimits{}), map[string]want{
		b + "{tenant}/exports/{id}.csv":    {2, ""},
		b + "{tenant}/exports/{id}.csv.gz": {0, ""},
		b + "{tenant}/chats/{id}.jsonl":    {0, ""},
		b + "legacy/{id}.jsonl":            {0, ""},
		"file://scratch/{tenant}/{id}.csv": {1, ""},
	})
	nobody := deletion.Subject{Tenant: "acme", ID: "cust-404", Sessions: []string{"sess-404"}}
	check("nobody", probe(nobody, deletion.ProbeLimits{}), map[string]want{
		b + "{tenant}/exports/{id}.csv":    {0, ""},
		b + "{tenant}/chats/{id}.jsonl":    {0, ""},
		b + "legacy/{id}.jsonl":            {0, ""},
		"file://scratch/{tenant}/{id}.csv": {0, ""},
	})
	// The exports shape holds two objects: a bound of one object leaves it unexamined.
	check("one object", probe(acme, deletion.ProbeLimits{Items: 1}), map[string]want{
		b + "{tenant}/exports/{id}.csv":    {3, "bound of 1"},
		b + "{tenant}/exports/{id}.csv.gz": {1, ""},
		"file://scratch/{tenant}/{id}.csv": {2, ""},
	})
	check("no time", probe(acme, deletion.ProbeLimits{Time: time.Nanosecond}), map[string]want{
		b + "{tenant}/exports/{id}.csv":    {0, "time bound"},
		"file://scratch/{tenant}/{id}.csv": {0, "time bound"},
	})
	if got, err := st.Probe(ctx, inv, locs, deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}, deletion.ProbeLimits{}); got != nil || err != nil {
		t.Errorf("tenant-scope probe = %+v, %v; want nil, nil", got, err)
	}
	// An uncovered location named without fields cannot be matched: unexamined.
	got, err := st.Probe(ctx, inv, []deletion.Uncovered{{Kind: Kind, Location: b + "{id}.json"}}, acme, deletion.ProbeLimits{})
	if err != nil || len(got) != 1 || got[0].Unexamined == "" {
		t.Errorf("probe of a location without fields = %+v, %v; want it unexamined", got, err)
	}
}

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
