package postgresstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

var _ deletion.Prober = (*Store)(nil)

// tableSQL finds the tables, views and foreign tables named $1 as Discover names them
// (schema.table).
const tableSQL = `SELECT c.oid, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname || '.' || c.relname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')`

// Probe counts, per location of locs, the rows of its table where one of the location's
// Fields equals s's id or a session, with Erase's typed exact comparisons and bound
// parameters. It reads only: one read-only transaction per location, with a statement
// timeout of lim.Time. The count is of s's tenant: in the table named for it, or by the
// tenant column Discover suggests; a shared table without one is counted across tenants
// (an over-report, never an under-report).
//
// A missing table, or one a postgres store of inv now covers, is Found 0. A location is
// unexamined when it names no Fields, a Field is missing or of a type the store cannot
// compare (the others still count), the role may not read the table, the timeout cancels
// the count, or more than lim.Items rows match (Found is then lim.Items). A tenant-scope s
// gives nil. Errors are classified as Verify's.
func (p *Store) Probe(ctx context.Context, inv *inventory.Inventory, locs []deletion.Uncovered, s deletion.Subject, lim deletion.ProbeLimits) ([]deletion.Probed, error) {
	if s.TenantScope() {
		return nil, nil
	}
	if err := subject.ValidateTenant(s.Tenant); err != nil {
		return nil, retry.Permanent(fmt.Errorf("postgresstore: probe: %w", err))
	}
	ids := s.Identifiers()
	if len(ids) == 0 {
		return nil, retry.Permanent(errors.New("postgresstore: probe: subject has neither an id nor a session"))
	}
	lim = lim.Defaults()
	covers, err := coversOf(inv)
	if err != nil {
		return nil, retry.Permanent(err)
	}
	return deletion.EachProbed(locs, Kind, func(loc deletion.Uncovered) (deletion.Probed, error) {
		return p.probe(ctx, covers, loc, s.Tenant, ids, lim)
	})
}

// probe is Probe of one location.
func (p *Store) probe(ctx context.Context, covers []*regexp.Regexp, loc deletion.Uncovered, tenant string, ids []string, lim deletion.ProbeLimits) (deletion.Probed, error) {
	pr := deletion.Probed{Location: loc.Location}
	if len(loc.Fields) == 0 {
		pr.Unexamined = "no identity-like column found there to match: name its columns in an inventory entry"
		return pr, nil
	}
	perTenant := inventory.Uses(loc.Location, inventory.Tenant)
	name := strings.ReplaceAll(loc.Location, inventory.Tenant, tenant)
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return pr, classify("probe: begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	timeout := strconv.FormatInt(max(lim.Time.Milliseconds(), 1), 10)
	if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true)", timeout); err != nil {
		return pr, classify("probe: set the statement timeout", err)
	}
	// unread reports err as the reason the location is unexamined when it is a server's
	// refusal, and returns it otherwise.
	unread := func(op string, err error) (deletion.Probed, error) {
		var pg *pgconn.PgError
		switch {
		case ctx.Err() != nil:
			return pr, classify("probe: "+op, err)
		case errors.As(err, &pg) && pg.Code == "57014": // query_canceled: the statement timeout
			pr.Unexamined = fmt.Sprintf("the probe's statement timeout of %s was reached", lim.Time)
			return pr, nil
		case errors.As(err, &pg) && pg.Code == "42P01": // dropped since the look-up
			return pr, nil
		case errors.As(err, &pg) && retry.IsPermanent(classify(op, err)):
			pr.Unexamined = (&pgError{op: op, pg: pg}).Error()
			return pr, nil
		}
		return pr, classify("probe: "+op, err)
	}
	var oids []uint32
	var quoted string
	var isCovered bool
	rows, err := tx.Query(ctx, tableSQL, name)
	if err != nil {
		return unread("look up the table", err)
	}
	for rows.Next() {
		var oid uint32
		var schema, table string
		if err := rows.Scan(&oid, &schema, &table); err != nil {
			rows.Close()
			return unread("look up the table", err)
		}
		oids, quoted = append(oids, oid), pgx.Identifier{schema, table}.Sanitize()
		isCovered = covered(covers, schema, table)
	}
	if err := rows.Err(); err != nil {
		return unread("look up the table", err)
	}
	switch len(oids) {
	case 0:
		return pr, nil // no such table: nothing of anyone there
	case 1:
		if isCovered {
			return pr, nil
		}
	default:
		pr.Unexamined = "the name is that of more than one table (a dot in a schema or table name)"
		return pr, nil
	}
	var hidden bool
	if err := tx.QueryRow(ctx, hiddenSQL, oids[0]).Scan(&hidden); err != nil {
		return unread("read the row security", err)
	}
	types := map[string]colType{}
	var text []string
	rows, err = tx.Query(ctx, allColumnsSQL, oids[0])
	if err != nil {
		return unread("read the columns", err)
	}
	for rows.Next() {
		var c string
		var ct colType
		if err := rows.Scan(&c, &ct.name, &ct.category, &ct.deterministic); err != nil {
			rows.Close()
			return unread("read the columns", err)
		}
		types[c] = ct
		if ct.category == "S" {
			text = append(text, c)
		}
	}
	if err := rows.Err(); err != nil {
		return unread("read the columns", err)
	}
	var conds, why []string
	var args []any
	for _, f := range loc.Fields {
		ct, ok := types[f]
		if !ok {
			why = append(why, fmt.Sprintf("the table has no column %q (any more): run discovery again", f))
			continue
		}
		if _, _, err := equals(f, ct, "", 1); err != nil {
			why = append(why, err.Error()) // a type it cannot compare exactly
			continue
		}
		for _, id := range ids {
			if c, ok, _ := equals(f, ct, id, len(args)+1); ok {
				conds, args = append(conds, c), append(args, arg(ct, id))
			}
		}
	}
	if len(conds) == 0 { // no identifier can be a value of the columns it can compare
		pr.Unexamined = strings.Join(why, "; ")
		return pr, nil
	}
	where := "(" + strings.Join(conds, " OR ") + ")"
	if tc := tenantColumn(text, loc.Fields); !perTenant && tc != "" {
		c, _, err := equals(tc, types[tc], tenant, len(args)+1)
		if err != nil {
			return pr, err // a text column always compares
		}
		where, args = c+" AND "+where, append(args, tenant)
	}
	q := fmt.Sprintf("SELECT count(*) FROM (SELECT 1 FROM %s WHERE %s LIMIT %d) s", quoted, where, lim.Items+1)
	if err := tx.QueryRow(ctx, q, args...).Scan(&pr.Found); err != nil {
		return unread("count", err)
	}
	if pr.Found > int64(lim.Items) {
		pr.Found = int64(lim.Items)
		why = append(why, fmt.Sprintf("more matching rows than the probe's bound of %d", lim.Items))
	}
	if hidden {
		why = append(why, "row-level security may hide rows from this role")
	}
	pr.Unexamined = strings.Join(why, "; ")
	return pr, nil
}
