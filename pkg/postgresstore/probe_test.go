package postgresstore_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/postgresstore"
)

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

// probeTables creates, beside the fixture's covered tables, tables no inventory entry
// covers: events shared by tenants with a tenant column, memories per tenant schema,
// profiles shared without a tenant column, tickets with personal values only, odd with an
// identity-like column of a type the store cannot compare, secret that the role "prober"
// may not read, and a slow view.
func probeTables(t *testing.T, sv *server) (*fixture, *inventory.Inventory) {
	f := sv.fixture(t)
	s := f.schema
	f.seed(t, deletiontest.NewSubject("acme", "cust-1"), 1)
	f.seed(t, deletiontest.NewSubject("globex", "cust-1"), 1)
	sv.exec(t, "CREATE TABLE "+s+".events (id serial, tenant_id text, user_id text, thread_id text, body text)")
	sv.exec(t, "INSERT INTO "+s+".events (tenant_id, user_id, thread_id) VALUES ('acme', 'cust-1', NULL), ('acme', 'cust-1', 't-1'), ('acme', 'cust-2', 'sess-1'), ('acme', 'cust-2', NULL), ('acme', 'cust-10', 'sess-10'), ('globex', 'cust-1', 'sess-1')")
	for tenant, n := range map[string]int{"acme": 1, "globex": 2} {
		sv.exec(t, "CREATE TABLE "+f.tenantSchema(tenant)+".memories (user_id text, memory text)")
		for range n {
			sv.exec(t, "INSERT INTO "+f.tenantSchema(tenant)+".memories VALUES ('cust-1', 'likes tea')")
		}
	}
	sv.exec(t, "CREATE TABLE "+s+".profiles (id int, email text, member_id int, plan text)")
	sv.exec(t, "INSERT INTO "+s+".profiles VALUES (1, 'jane.doe@example.com', 90417, 'pro'), (2, 'joe@example.com', 90418, 'free')")
	sv.exec(t, "CREATE TABLE "+s+".tickets (id int, body text)")
	sv.exec(t, "INSERT INTO "+s+".tickets VALUES (1, 'call jane.doe@example.com back')")
	sv.exec(t, "CREATE TABLE "+s+".odd (customer_id jsonb)")
	sv.exec(t, `INSERT INTO `+s+`.odd VALUES ('"cust-1"')`)
	sv.exec(t, "CREATE TABLE "+s+".secret (user_id text)")
	sv.exec(t, "INSERT INTO "+s+".secret VALUES ('cust-1')")
	sv.exec(t, "CREATE VIEW "+s+".slow AS SELECT 'cust-1'::text AS user_id FROM pg_sleep(5)")
	return f, &inventory.Inventory{Version: "1", Stores: []inventory.Entry{f.store()}}
}

// ours keeps the locations of f's schemas (other tests share the server).
func ours(f *fixture, locs []deletion.Uncovered) []deletion.Uncovered {
	return slices.DeleteFunc(locs, func(u deletion.Uncovered) bool {
		return !strings.HasPrefix(u.Location, f.schema+".") && !strings.HasPrefix(u.Location, f.schema+"_")
	})
}

// TestDiscoverSuggest: each uncovered table names its identity-like columns and suggests a
// postgres store listing it with them (session-like ones as session columns) and its
// tenant column; the suggestions the kind can express validate and, added to the
// inventory, cover their tables; the others say why in a comment.
func TestDiscoverSuggest(t *testing.T) {
	ctx := context.Background()
	sv := newServer(t)
	f, inv := probeTables(t, sv)
	s := f.schema
	st := postgresstore.New(sv.pool)
	opts := deletion.DiscoverOptions{Tenants: []string{"acme", "globex"}}
	got, err := st.Discover(ctx, inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		fields     []string
		subj, sess []string
		tenant     string
		valid      bool
	}
	wants := map[string]want{
		s + ".events":            {[]string{"user_id", "thread_id"}, []string{"user_id"}, []string{"thread_id"}, "tenant_id", true},
		s + "_{tenant}.memories": {[]string{"user_id"}, []string{"user_id"}, nil, "", true},
		s + ".profiles":          {[]string{"email", "member_id"}, []string{"email", "member_id"}, nil, "", false},
		s + ".tickets":           {nil, nil, nil, "", false},
		s + ".odd":               {[]string{"customer_id"}, []string{"customer_id"}, nil, "", false},
		s + ".secret":            {[]string{"user_id"}, []string{"user_id"}, nil, "", false},
		s + ".slow":              {[]string{"user_id"}, []string{"user_id"}, nil, "", false},
	}
	got = ours(f, got)
	if len(got) != len(wants) {
		t.Fatalf("discovered %+v, want %d locations", got, len(wants))
	}
	names := map[string]bool{}
	var covered []string
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
		var l postgresstore.Locators
		if err := e.Locators.Decode(&l); err != nil || len(l.Tables) != 1 {
			t.Fatalf("%s: %+v, %v", u.Location, l, err)
		}
		tb := l.Tables[0]
		if e.Kind != postgresstore.Kind || tb.Table != u.Location || !slices.Equal(tb.SubjectColumns, w.subj) || !slices.Equal(tb.SessionColumns, w.sess) || tb.TenantColumn != w.tenant {
			t.Errorf("%s: suggests %+v, want %+v:\n%s", u.Location, tb, w, u.Suggest)
		}
		err := postgresstore.Validate(e)
		if (err == nil) != w.valid {
			t.Errorf("%s: Validate(suggestion) = %v, want valid %v:\n%s", u.Location, err, w.valid, u.Suggest)
		}
		if err != nil && !strings.Contains(u.Suggest, "#") {
			t.Errorf("%s: an invalid suggestion says nothing of why:\n%s", u.Location, u.Suggest)
		}
		if names[e.Name] || slices.Contains(inv.Names(), e.Name) {
			t.Errorf("%s: suggested name %q is taken", u.Location, e.Name)
		}
		names[e.Name] = true
		if b, _ := json.Marshal(u); strings.Contains(string(b), "jane") || strings.Contains(string(b), "cust-") {
			t.Errorf("report %s holds a value", b)
		}
		if err == nil {
			inv.Stores = append(inv.Stores, e)
			covered = append(covered, u.Location)
		}
	}
	again, err := st.Discover(ctx, inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range ours(f, again) {
		if slices.Contains(covered, u.Location) {
			t.Errorf("with its suggestion added, %s is still reported", u.Location)
		}
	}
	if n := len(ours(f, again)); n != len(wants)-len(covered) {
		t.Errorf("with the suggestions added, discovered %+v; want %d locations", ours(f, again), len(wants)-len(covered))
	}
	// Once covered, a table's rows are its store's to erase: a probe finds nothing outside.
	events := []deletion.Uncovered{{Kind: postgresstore.Kind, Location: s + ".events", Fields: []string{"user_id"}}}
	acme := deletion.Subject{Tenant: "acme", ID: "cust-1"}
	for n, inv := range []*inventory.Inventory{{Version: "1", Stores: inv.Stores[:1]}, inv} {
		got, err := st.Probe(ctx, inv, events, acme, deletion.ProbeLimits{})
		if want := int64(2 * (1 - n)); err != nil || len(got) != 1 || got[0].Found != want || got[0].Unexamined != "" {
			t.Errorf("probe with %d inventory entries = %+v, %v; want %d found", len(inv.Stores), got, err, want)
		}
	}
}

// TestProbe: a probe counts exactly the rows holding the subject's identifiers in each
// uncovered table, with typed comparisons, within the tenant where the table tells it;
// zero with nothing unexamined where there is none or the table is gone; a column of
// another type, a table the role may not read, a statement timeout and a bound reached are
// unexamined; its output holds no identifier.
func TestProbe(t *testing.T) {
	ctx := context.Background()
	sv := newServer(t)
	f, inv := probeTables(t, sv)
	s := f.schema
	locs, err := postgresstore.New(sv.pool).Discover(ctx, inv, deletion.DiscoverOptions{Tenants: []string{"acme", "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	locs = ours(f, locs)
	var slow []deletion.Uncovered
	locs = slices.DeleteFunc(locs, func(u deletion.Uncovered) bool {
		if u.Location == s+".slow" {
			slow = append(slow, u)
			return true
		}
		return false
	})
	locs = append(locs,
		deletion.Uncovered{Kind: postgresstore.Kind, Location: s + ".gone", Fields: []string{"user_id"}},
		deletion.Uncovered{Kind: "redis", Location: "crm:{tenant}:{id}", Fields: []string{"user_id"}})
	sv.exec(t, "CREATE ROLE prober LOGIN")
	for _, schema := range []string{s, f.tenantSchema("acme"), f.tenantSchema("globex")} {
		sv.exec(t, "GRANT USAGE ON SCHEMA "+schema+" TO prober")
		sv.exec(t, "GRANT SELECT ON ALL TABLES IN SCHEMA "+schema+" TO prober")
	}
	sv.exec(t, "REVOKE SELECT ON "+s+".secret FROM prober")
	pool, err := pgxpool.New(ctx, strings.Replace(sv.dsn, "lethe@", "prober@", 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := postgresstore.New(pool)

	type want struct {
		found      int64
		unexamined string // a part of the reason; "" for none
	}
	probe := func(name string, locs []deletion.Uncovered, subj deletion.Subject, lim deletion.ProbeLimits, wants map[string]want) {
		t.Helper()
		got, err := st.Probe(ctx, inv, locs, subj, lim)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(wants) {
			t.Errorf("%s: probed %+v, want %d locations", name, got, len(wants))
		}
		for i, p := range got {
			w, ok := wants[p.Location]
			if !ok || p.Location != locs[i].Location || p.Found != w.found || (w.unexamined == "") != (p.Unexamined == "") || !strings.Contains(p.Unexamined, w.unexamined) {
				t.Errorf("%s: probed %+v, want %+v", name, p, w)
			}
		}
		b, _ := json.Marshal(got)
		for _, id := range append([]string{subj.ID}, subj.Sessions...) {
			if strings.Contains(string(b), id) {
				t.Errorf("%s: probe output holds identifier %q: %s", name, id, b)
			}
		}
	}
	unreadable := map[string]want{
		s + ".odd":          {0, "type jsonb"},
		s + ".secret":       {0, "permission denied"},
		s + ".gone":         {0, ""},
		"crm:{tenant}:{id}": {0, "not a postgres location"},
	}
	with := func(w map[string]want) map[string]want {
		for k, v := range unreadable {
			if _, ok := w[k]; !ok {
				w[k] = v
			}
		}
		return w
	}
	probe("acme cust-1", locs, deletion.Subject{Tenant: "acme", ID: "cust-1", Sessions: []string{"sess-1"}}, deletion.ProbeLimits{}, with(map[string]want{
		s + ".events":            {3, ""}, // not globex's row with the same id
		s + "_{tenant}.memories": {1, ""},
		s + ".profiles":          {0, ""}, // cust-1 is no member_id: compared as text, never cast
		s + ".tickets":           {0, "no identity-like column"},
	}))
	probe("globex cust-1", locs, deletion.Subject{Tenant: "globex", ID: "cust-1"}, deletion.ProbeLimits{}, with(map[string]want{
		s + ".events":            {1, ""},
		s + "_{tenant}.memories": {2, ""},
		s + ".profiles":          {0, ""},
		s + ".tickets":           {0, "no identity-like column"},
	}))
	// profiles has no tenant column: counted across tenants.
	probe("globex email", locs, deletion.Subject{Tenant: "globex", ID: "jane.doe@example.com"}, deletion.ProbeLimits{}, with(map[string]want{
		s + ".events":            {0, ""},
		s + "_{tenant}.memories": {0, ""},
		s + ".profiles":          {1, ""},
		s + ".tickets":           {0, "no identity-like column"},
	}))
	probe("acme 90417", locs, deletion.Subject{Tenant: "acme", ID: "90417"}, deletion.ProbeLimits{}, with(map[string]want{
		s + ".events":            {0, ""},
		s + "_{tenant}.memories": {0, ""},
		s + ".profiles":          {1, ""},
		s + ".tickets":           {0, "no identity-like column"},
	}))
	probe("acme, one row", locs, deletion.Subject{Tenant: "acme", ID: "cust-1", Sessions: []string{"sess-1"}}, deletion.ProbeLimits{Items: 1}, with(map[string]want{
		s + ".events":            {1, "bound of 1"},
		s + "_{tenant}.memories": {1, ""},
		s + ".profiles":          {0, ""},
		s + ".tickets":           {0, "no identity-like column"},
	}))
	start := time.Now()
	probe("slow", slow, deletion.Subject{Tenant: "acme", ID: "cust-1"}, deletion.ProbeLimits{Time: 200 * time.Millisecond}, map[string]want{
		s + ".slow": {0, "statement timeout"},
	})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a probe bounded to 200ms took %s", d)
	}
	if got, err := st.Probe(ctx, inv, locs, deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}, deletion.ProbeLimits{}); got != nil || err != nil {
		t.Errorf("tenant-scope probe = %+v, %v; want nil, nil", got, err)
	}
}
