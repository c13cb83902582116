package postgresstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/postgresstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

func TestConformance(t *testing.T) {
	sv := newServer(t)
	deletiontest.Run(t, func(t *testing.T) deletiontest.Fixture {
		f, _ := sv.deletionFixture(t)
		return f
	})
}

// downStore is a Store whose pool points at a port nobody listens on.
func downStore(t *testing.T) *postgresstore.Store {
	pool, err := pgxpool.New(context.Background(), fmt.Sprintf("postgres://lethe@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", testenv.FreePort(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return postgresstore.New(pool)
}

// alterUserIDToJSON makes the subject column of the chat table one the store cannot
// compare exactly.
func (f *fixture) alterUserIDToJSON(t testing.TB) {
	f.sv.exec(t, "ALTER TABLE "+f.schema+".chat_history ALTER COLUMN user_id TYPE jsonb USING to_jsonb(user_id)")
}

// TestErrorClassification: a table the store cannot serve (a column of another type, a
// fixed table or a column that does not exist, a foreign key refusing the delete) is a
// permanent error, and the transaction deletes nothing. No error names an identifier. (A
// server that is down and a cancelled context are the conformance suite's.)
func TestErrorClassification(t *testing.T) {
	sv := newServer(t)
	ctx := context.Background()
	s := deletiontest.NewSubject("acme", "cust-err")
	permanent := []struct {
		name    string
		breakIt func(t *testing.T, f *fixture) inventory.Entry
	}{
		{"ColumnOfAnotherType", func(t *testing.T, f *fixture) inventory.Entry { f.alterUserIDToJSON(t); return f.store() }},
		{"FixedTableMissing", func(t *testing.T, f *fixture) inventory.Entry {
			sv.exec(t, "DROP TABLE "+f.schema+".chat_history")
			return f.store()
		}},
		{"ColumnMissing", func(t *testing.T, f *fixture) inventory.Entry {
			sv.exec(t, "ALTER TABLE "+f.schema+".chat_history DROP COLUMN session_id")
			return f.store()
		}},
		{"ForeignKeyRestricts", func(t *testing.T, f *fixture) inventory.Entry {
			sv.exec(t, "CREATE TABLE "+f.schema+".feedback (chat_id bigint REFERENCES "+f.schema+".chat_history (id) ON DELETE RESTRICT)")
			sv.exec(t, "INSERT INTO "+f.schema+".feedback SELECT id FROM "+f.schema+".chat_history")
			return f.store()
		}},
	}
	for _, tc := range permanent {
		t.Run(tc.name, func(t *testing.T) {
			f := sv.fixture(t)
			want := f.seed(t, s, 2)
			ts := f.tenantSchema(s.Tenant) + ".checkpoints"
			before := sv.count(t, "SELECT count(*) FROM "+ts)
			st := tc.breakIt(t, f)
			_, eraseErr := postgresstore.New(sv.pool).Erase(ctx, st, s)
			_, verifyErr := postgresstore.New(sv.pool).Verify(ctx, st, s)
			if !retry.IsPermanent(eraseErr) {
				t.Errorf("Erase = %v, want a permanent error", eraseErr)
			}
			if tc.name != "ForeignKeyRestricts" && !retry.IsPermanent(verifyErr) {
				t.Errorf("Verify = %v, want a permanent error", verifyErr)
			}
			for _, err := range []error{eraseErr, verifyErr} {
				if err != nil && (strings.Contains(err.Error(), s.ID) || strings.Contains(err.Error(), s.Sessions[0])) {
					t.Errorf("error names an identifier: %v", err)
				}
			}
			// One transaction: the other table keeps every row.
			if got := sv.count(t, "SELECT count(*) FROM "+ts); got != before {
				t.Errorf("a failed erasure changed the checkpoints: %d rows, had %d", got, before)
			}
			if tc.name == "ForeignKeyRestricts" && f.rows(t, s) != want {
				t.Errorf("a refused delete left %d of %d rows", f.rows(t, s), want)
			}
		})
	}
}

// TestPerTenantTableMissing: a tenant without its per-tenant table holds nothing there.
func TestPerTenantTableMissing(t *testing.T) {
	sv := newServer(t)
	f := sv.fixture(t)
	s := deletiontest.NewSubject("newcomer", "cust-1")
	sv.exec(t, "INSERT INTO "+f.schema+".chat_history (tenant_id, user_id) VALUES ($1, $2)", s.Tenant, s.ID)
	st := postgresstore.New(sv.pool)
	res, err := st.Erase(context.Background(), f.store(), s)
	if err != nil {
		t.Fatal(err)
	}
	want := []event.LocationCount{{Location: f.schema + ".chat_history", Deleted: 1}, {Location: f.schema + "_newcomer.checkpoints"}}
	if fmt.Sprint(res.Locations) != fmt.Sprint(want) {
		t.Errorf("locations %v, want %v", res.Locations, want)
	}
	if v, err := st.Verify(context.Background(), f.store(), s); err != nil || !v.Clean() {
		t.Errorf("Verify = %+v, %v", v, err)
	}
}

// TestTypedMatching: integer columns match only the canonical decimal form, uuid columns
// only the hyphenated form (in either case of its hex digits), a nondeterministic (case-insensitive) collation does
// not make "bob" match "BOB", and a name column is not matched by a longer id cut to 63
// bytes.
func TestTypedMatching(t *testing.T) {
	sv := newServer(t)
	ctx := context.Background()
	sv.exec(t, `CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)`)
	sv.exec(t, `CREATE TABLE typed (tenant_id text, num bigint, small int2, id uuid, name text COLLATE ci, vc varchar(20), nm name)`)
	long := strings.Repeat("n", 63)
	sv.exec(t, `INSERT INTO typed (tenant_id, nm) VALUES ('t', $1)`, long)
	sv.exec(t, `INSERT INTO typed VALUES
		('t', 7, 7, NULL, NULL, NULL),
		('t', -12, NULL, NULL, NULL, NULL),
		('t', NULL, NULL, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', NULL, NULL),
		('t', NULL, NULL, NULL, 'BOB', NULL),
		('t', NULL, NULL, NULL, 'bob', 'bob'),
		('u', 7, NULL, NULL, NULL, NULL)`)
	inv := inventory.Entry{Name: "typed", Kind: postgresstore.Kind, Locators: inventory.Locators{"tables": []any{
		map[string]any{"table": "typed", "subject_columns": []any{"num", "small", "id", "name", "vc", "nm"}, "tenant_column": "tenant_id"},
	}}}
	st := postgresstore.New(sv.pool)
	for _, tc := range []struct {
		id   string
		want int64
	}{
		{"7", 1}, {"007", 0}, {"+7", 0}, {"7.0", 0}, {"-12", 1}, {"99999999999999999999", 0},
		{"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", 1}, {"A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", 1}, {"a0eebc999c0b4ef8bb6d6bb9bd380a11", 0},
		{"{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", 0}, {"bob", 1}, {"BOB", 1}, {"Bob", 0},
		{long, 1}, {long + "x", 0}, // a name parameter would be cut to 63 bytes
	} {
		v, err := st.Verify(ctx, inv, deletion.Subject{Tenant: "t", ID: tc.id})
		if err != nil {
			t.Fatalf("Verify %q: %v", tc.id, err)
		}
		if v.Remaining != tc.want {
			t.Errorf("id %q matches %d rows, want %d", tc.id, v.Remaining, tc.want)
		}
	}
	res, err := st.Erase(ctx, inv, deletion.Subject{Tenant: "t", ID: "7"})
	if err != nil || res.Deleted() != 1 {
		t.Fatalf("Erase 7 = %+v, %v; want 1 row (the other tenant's 7 stays)", res, err)
	}
	if n := sv.count(t, "SELECT count(*) FROM typed WHERE num = 7"); n != 1 {
		t.Errorf("%d rows with 7 left, want the other tenant's", n)
	}
}

// TestTenantScopePerTenantTable: a tenant-scope erasure empties the tenant's own table and
// leaves another tenant's table alone.
func TestTenantScopePerTenantTable(t *testing.T) {
	sv := newServer(t)
	f := sv.fixture(t)
	a, g := deletiontest.NewSubject("acme", "x"), deletiontest.NewSubject("globex", "x")
	f.seed(t, a, 2)
	keep := f.seed(t, g, 2)
	res, err := postgresstore.New(sv.pool).Erase(context.Background(), f.store(), deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant})
	if err != nil {
		t.Fatal(err)
	}
	if n := sv.count(t, "SELECT count(*) FROM "+f.tenantSchema("acme")+".checkpoints"); n != 0 {
		t.Errorf("%d checkpoints of acme left", n)
	}
	if got := f.rows(t, g); got != keep {
		t.Errorf("globex: %d rows of %d", got, keep)
	}
	t.Logf("tenant erasure: %v", res.Locations)
}

// BenchmarkErase erases one subject (3 chat rows, 2 checkpoints) beside 100 000 rows of
// other subjects in a chat table indexed on (tenant_id, user_id) and session_id, and
// verifies: one erasure (with its catalog reads) plus one verification per iteration.
func BenchmarkErase(b *testing.B) {
	sv := newServer(b)
	f := sv.fixture(b)
	chat := f.schema + ".chat_history"
	sv.exec(b, "INSERT INTO "+chat+" (tenant_id, user_id, session_id, message) SELECT 'acme', 'u' || g, 's' || g, 'hello' FROM generate_series(1, 100000) g")
	sv.exec(b, "CREATE INDEX ON "+chat+" (tenant_id, user_id)")
	sv.exec(b, "CREATE INDEX ON "+chat+" (session_id)")
	sv.exec(b, "ANALYZE "+chat)
	st, inv, ctx := postgresstore.New(sv.pool), f.store(), context.Background()
	s := deletiontest.NewSubject("acme", "bench-subject")
	for b.Loop() {
		b.StopTimer()
		f.seed(b, s, 1)
		b.StartTimer()
		if _, err := st.Erase(ctx, inv, s); err != nil {
			b.Fatal(err)
		}
		if v, err := st.Verify(ctx, inv, s); err != nil || !v.Clean() {
			b.Fatalf("Verify = %+v, %v", v, err)
		}
	}
}

// TestRowLevelSecurityIsUnexamined: rows a policy hides from the store's role are neither
// deleted nor counted, so the table is reported unexamined, never clean; for a role that
// bypasses row-level security the same table verifies clean after the erasure.
func TestRowLevelSecurityIsUnexamined(t *testing.T) {
	sv := newServer(t)
	ctx := context.Background()
	sv.exec(t, "CREATE TABLE notes (tenant_id text, user_id text, visible bool)")
	sv.exec(t, "INSERT INTO notes VALUES ('acme', 'cust-1', true), ('acme', 'cust-1', false)")
	sv.exec(t, "ALTER TABLE notes ENABLE ROW LEVEL SECURITY")
	sv.exec(t, "CREATE POLICY only_visible ON notes USING (visible)")
	sv.exec(t, "CREATE ROLE eraser LOGIN")
	sv.exec(t, "GRANT SELECT, DELETE ON notes TO eraser")
	pool, err := pgxpool.New(ctx, strings.Replace(sv.dsn, "lethe@", "eraser@", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	inv := inventory.Entry{Name: "notes", Kind: postgresstore.Kind, Locators: inventory.Locators{"tables": []any{
		map[string]any{"table": "notes", "subject_columns": []any{"user_id"}, "tenant_column": "tenant_id"},
	}}}
	s := deletion.Subject{Tenant: "acme", ID: "cust-1"}
	st := postgresstore.New(pool)
	if _, err := st.Erase(ctx, inv, s); err != nil {
		t.Fatal(err)
	}
	v, err := st.Verify(ctx, inv, s)
	if err != nil {
		t.Fatal(err)
	}
	if v.Clean() || v.Unexamined != 1 || len(v.UnexaminedItems) != 1 || !strings.HasPrefix(v.UnexaminedItems[0], "notes: row-level security") {
		t.Errorf("Verify under row-level security = %+v, want notes unexamined", v)
	}
	if n := sv.count(t, "SELECT count(*) FROM notes"); n != 1 {
		t.Fatalf("%d rows left, want the hidden one", n)
	}
	sv.exec(t, "ALTER ROLE eraser BYPASSRLS")
	pool.Reset() // new sessions see the role's new attribute
	if _, err := st.Erase(ctx, inv, s); err != nil {
		t.Fatal(err)
	}
	if v, err := st.Verify(ctx, inv, s); err != nil || !v.Clean() {
		t.Errorf("Verify with BYPASSRLS = %+v, %v; want clean", v, err)
	}
}

// langGraphDDL is the schema LangGraph's Postgres checkpointer creates (its MIGRATIONS).
const langGraphDDL = `
CREATE TABLE checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '',
	checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT, type TEXT, checkpoint JSONB NOT NULL,
	metadata JSONB NOT NULL DEFAULT '{}', PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id));
CREATE TABLE checkpoint_blobs (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '',
	channel TEXT NOT NULL, version TEXT NOT NULL, type TEXT NOT NULL, blob BYTEA,
	PRIMARY KEY (thread_id, checkpoint_ns, channel, version));
CREATE TABLE checkpoint_writes (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '',
	checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL,
	type TEXT, blob BYTEA NOT NULL, task_path TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx));`

// TestExampleInventoryOnLangGraphTables erases one thread through the example inventory's
// entries from LangGraph's own checkpointer schema (per tenant) and from a chat history:
// the thread and the subject's messages are gone, another thread keeps every row.
func TestExampleInventoryOnLangGraphTables(t *testing.T) {
	sv := newServer(t)
	ctx := context.Background()
	inv, err := inventory.Load("../../deploy/examples/inventory-postgres.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sv.exec(t, "CREATE SCHEMA lg_acme; SET search_path TO lg_acme;"+langGraphDDL+"RESET search_path")
	sv.exec(t, "CREATE TABLE public.chat_history (tenant_id text, user_id text, session_id text, message text)")
	for _, thread := range []string{"thread-victim", "thread-other"} {
		for i := range 3 {
			sv.exec(t, "INSERT INTO lg_acme.checkpoints (thread_id, checkpoint_id, checkpoint) VALUES ($1, $2, '{}')", thread, fmt.Sprint(i))
			sv.exec(t, "INSERT INTO lg_acme.checkpoint_blobs (thread_id, channel, version, type) VALUES ($1, 'messages', $2, 'msgpack')", thread, fmt.Sprint(i))
			sv.exec(t, "INSERT INTO lg_acme.checkpoint_writes (thread_id, checkpoint_id, task_id, idx, channel, blob) VALUES ($1, $2, 't', 0, 'messages', '\\x00')", thread, fmt.Sprint(i))
		}
		sv.exec(t, "INSERT INTO public.chat_history VALUES ('acme', $1, $2, 'hi')", strings.TrimPrefix(thread, "thread-"), thread)
	}
	s := deletion.Subject{Tenant: "acme", ID: "victim", Sessions: []string{"thread-victim"}}
	st := postgresstore.New(sv.pool)
	var deleted int64
	for _, store := range inv.OfKinds(postgresstore.Kind) {
		res, err := st.Erase(ctx, store, s)
		if err != nil {
			t.Fatalf("%s: %v", store.Name, err)
		}
		deleted += res.Deleted()
		if v, err := st.Verify(ctx, store, s); err != nil || !v.Clean() {
			t.Errorf("%s: Verify = %+v, %v", store.Name, v, err)
		}
	}
	if deleted != 3*3+1 {
		t.Errorf("deleted %d rows, want 9 checkpoint rows and 1 message", deleted)
	}
	for _, tb := range []string{"lg_acme.checkpoints", "lg_acme.checkpoint_blobs", "lg_acme.checkpoint_writes"} {
		if n := sv.count(t, "SELECT count(*) FROM "+tb+" WHERE thread_id = 'thread-other'"); n != 3 {
			t.Errorf("%s: the other thread has %d rows of 3", tb, n)
		}
	}
	if n := sv.count(t, "SELECT count(*) FROM public.chat_history"); n != 1 {
		t.Errorf("chat history: %d rows, want the other subject's", n)
	}
}
