package postgresstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/postgresstore"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// server is one PostgreSQL server and a pool on it, shared by the fixtures of one test.
type server struct {
	dsn  string
	pool *pgxpool.Pool
}

func newServer(t testing.TB) *server {
	t.Helper()
	dsn := testenv.Postgres(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &server{dsn: dsn, pool: pool}
}

func (sv *server) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := sv.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (sv *server) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := sv.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

var fixtures atomic.Int64

// fixture is a chat-history table shared by tenants (tenant_id, user_id, session_id) and a
// checkpoint table per tenant schema keyed by thread_id (the session), as LangGraph's
// checkpointer writes it, in schemas of their own.
type fixture struct {
	sv     *server
	schema string // of the shared table; the per-tenant schemas are schema_<tenant>
}

func (sv *server) fixture(t testing.TB) *fixture {
	f := &fixture{sv: sv, schema: fmt.Sprintf("fx%d", fixtures.Add(1))}
	sv.exec(t, "CREATE SCHEMA "+f.schema)
	sv.exec(t, "CREATE TABLE "+f.schema+".chat_history (id bigserial PRIMARY KEY, tenant_id text NOT NULL, user_id text, session_id text, message text)")
	return f
}

func (f *fixture) store() inventory.Entry {
	return inventory.Entry{Name: "chat", Kind: postgresstore.Kind, Locators: inventory.Locators{
		"tables": []any{
			map[string]any{"table": f.schema + ".chat_history", "subject_columns": []any{"user_id"},
				"session_columns": []any{"session_id"}, "tenant_column": "tenant_id"},
			map[string]any{"table": f.schema + "_{tenant}.checkpoints", "session_columns": []any{"thread_id"}},
		},
	}}
}

func (f *fixture) tenantSchema(tenant string) string {
	return pgx.Identifier{f.schema + "_" + tenant}.Sanitize()
}

// seed writes n rows of s's own, n legacy rows with only a session, one row with both and
// n checkpoints per session, next to rows of nobody (NULL ids, empty strings).
func (f *fixture) seed(t testing.TB, s deletion.Subject, n int) int {
	ts := f.tenantSchema(s.Tenant)
	f.sv.exec(t, "CREATE SCHEMA IF NOT EXISTS "+ts)
	f.sv.exec(t, "CREATE TABLE IF NOT EXISTS "+ts+".checkpoints (thread_id text, checkpoint_ns text NOT NULL DEFAULT '', checkpoint_id text, checkpoint jsonb)")
	chat := f.schema + ".chat_history"
	for i := range n {
		f.sv.exec(t, "INSERT INTO "+chat+" (tenant_id, user_id, message) VALUES ($1, $2, $3)", s.Tenant, s.ID, fmt.Sprint("hello ", i))
		f.sv.exec(t, "INSERT INTO "+chat+" (tenant_id, user_id, session_id, message) VALUES ($1, NULL, $2, 'legacy'), ($1, '', '', 'nobody')", s.Tenant, s.Sessions[0])
		for _, ses := range s.Sessions {
			f.sv.exec(t, "INSERT INTO "+ts+".checkpoints (thread_id, checkpoint_id, checkpoint) VALUES ($1, $2, '{}')", ses, fmt.Sprint(i))
		}
	}
	f.sv.exec(t, "INSERT INTO "+chat+" (tenant_id, user_id, session_id, message) VALUES ($1, $2, $3, 'both')", s.Tenant, s.ID, s.Sessions[0])
	return 2*n + 1 + n*len(s.Sessions)
}

// rows counts, with its own SQL, the rows of s that an erasure must remove.
func (f *fixture) rows(t *testing.T, s deletion.Subject) int {
	n := f.sv.count(t, "SELECT count(*) FROM "+f.schema+".chat_history WHERE tenant_id = $1 AND (user_id = $2 OR session_id = ANY($3))",
		s.Tenant, s.ID, s.Sessions)
	ts := f.schema + "_" + s.Tenant
	if f.sv.count(t, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", ts) == 1 {
		n += f.sv.count(t, "SELECT count(*) FROM "+f.tenantSchema(s.Tenant)+".checkpoints WHERE thread_id = ANY($1)", s.Sessions)
	}
	return n
}

func (sv *server) deletionFixture(t *testing.T) (deletiontest.Fixture, *fixture) {
	f := sv.fixture(t)
	return deletiontest.Fixture{
		Impl:  postgresstore.New(sv.pool),
		Store: f.store(),
		Seed:  func(t *testing.T, s deletion.Subject, n int) int { return f.seed(t, s, n) },
		Count: f.rows,
		Down:  func(t *testing.T) deletion.Store { return downStore(t) },
		// A subject column turned into jsonb: the store cannot compare it exactly.
		Malformed: func(t testing.TB, _ deletion.Subject) { f.alterUserIDToJSON(t) },
	}, f
}
