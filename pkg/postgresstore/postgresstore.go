// Package postgresstore erases data subjects from inventory stores of kind "postgres":
// rows of configured tables (chat history, LangGraph's Postgres checkpointer) whose subject
// or session columns equal one of the subject's identifiers, with github.com/jackc/pgx/v5.
//
// Table and column names come from the inventory, validated and quoted; identifiers are
// always bound parameters. Every statement is scoped to the request's tenant. Comparisons
// are exact and typed (text, integers, uuid); other column types are refused.
//
// Erase deletes the matching rows of every table in one transaction. Verify counts them
// at one snapshot. A table hidden by row-level security is reported unexamined. Errors
// never carry row values.
//
// Details: docs/stores/postgres.md.
package postgresstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Kind is the inventory kind this package serves.
const Kind = "postgres"

// VerifyMethod is the Method of every Verification this package returns.
const VerifyMethod = "postgres COUNT(*) of matching rows per table, one read-only snapshot"

// Store is a deletion.Store and deletion.Validator for inventory stores of kind
// "postgres". It is safe for concurrent use; the pool is the caller's to close.
type Store struct {
	pool *pgxpool.Pool
}

var (
	_ deletion.Store     = (*Store)(nil)
	_ deletion.Validator = (*Store)(nil)
)

// New returns a Store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Erase deletes every row of s in st's tables in one transaction and reports the deleted
// rows per table. See the package documentation for the contract.
func (p *Store) Erase(ctx context.Context, st inventory.Entry, s deletion.Subject) (deletion.Result, error) {
	l, err := decode(st)
	if err != nil {
		return deletion.Result{}, retry.Permanent(err)
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return deletion.Result{}, classify("begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var res deletion.Result
	for _, tb := range l.Tables {
		q, err := query(ctx, tx, tb, s)
		if err != nil {
			return deletion.Result{}, err
		}
		loc := event.LocationCount{Location: q.location}
		if q.ok {
			tag, err := tx.Exec(ctx, "DELETE FROM "+q.table+q.where, q.args...)
			if err != nil {
				return deletion.Result{}, classify("delete from "+q.location, err)
			}
			loc.Deleted = tag.RowsAffected()
		}
		res.Locations = append(res.Locations, loc)
	}
	if err := tx.Commit(ctx); err != nil {
		return deletion.Result{}, classify("commit", err)
	}
	return res, nil
}

// Verify counts the rows of s that remain in st's tables, at one snapshot. It changes
// nothing.
func (p *Store) Verify(ctx context.Context, st inventory.Entry, s deletion.Subject) (event.Verification, error) {
	l, err := decode(st)
	if err != nil {
		return event.Verification{}, retry.Permanent(err)
	}
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return event.Verification{}, classify("begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	v := event.Verification{Method: VerifyMethod}
	for _, tb := range l.Tables {
		q, err := query(ctx, tx, tb, s)
		if err != nil {
			return event.Verification{}, err
		}
		if q.hidden {
			v.Unexamined++
			v.UnexaminedItems = append(v.UnexaminedItems, q.location+": row-level security may hide rows from this role")
		}
		if !q.ok {
			continue
		}
		var n int64
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+q.table+q.where, q.args...).Scan(&n); err != nil {
			return event.Verification{}, classify("count in "+q.location, err)
		}
		v.Remaining += n
	}
	return v, nil
}

// tableQuery is what a statement on one table needs: the quoted table name and a WHERE
// clause with its arguments. ok is false when no row of the table can be the subject's.
type tableQuery struct {
	table, location string
	where           string
	args            []any
	ok              bool
	hidden          bool // row-level security may hide rows from this role
}

// query builds the WHERE clause selecting the rows of s in tb, after reading the types of
// tb's columns in tx.
func query(ctx context.Context, tx pgx.Tx, tb Table, s deletion.Subject) (tableQuery, error) {
	table, location, err := tb.name(s.Tenant)
	if err != nil {
		return tableQuery{}, err
	}
	q := tableQuery{table: table, location: location}
	cols := slices.Concat(tb.SubjectColumns, tb.SessionColumns)
	if tb.TenantColumn != "" {
		cols = append(cols, tb.TenantColumn)
	}
	types, found, err := columnTypes(ctx, tx, table, location, cols, &q.hidden)
	if err != nil || !found {
		if err == nil && !inventory.Uses(tb.Table, inventory.Tenant) {
			err = retry.Permanent(fmt.Errorf("postgresstore: table %s does not exist", location))
		}
		return q, err // a per-tenant table that does not exist holds nothing
	}
	var conds []string
	bind := func(col, value string) (bool, error) {
		c, ok, err := equals(col, types[col], value, len(q.args)+1)
		if err != nil {
			return false, retry.Permanent(fmt.Errorf("postgresstore: table %s: %w", location, err))
		}
		if ok {
			conds = append(conds, c)
			q.args = append(q.args, arg(types[col], value))
		}
		return ok, nil
	}
	var tenant string
	if tb.TenantColumn != "" {
		ok, err := bind(tb.TenantColumn, s.Tenant)
		if err != nil || !ok {
			return q, err // the tenant cannot be in this column: no row is the subject's
		}
		tenant, conds = conds[0], nil
	}
	if s.TenantScope() {
		if tenant != "" {
			q.where = " WHERE " + tenant
		}
		q.ok = true
		return q, nil
	}
	for _, col := range tb.SubjectColumns {
		if s.ID != "" {
			if _, err := bind(col, s.ID); err != nil {
				return q, err
			}
		}
	}
	for _, col := range tb.SessionColumns {
		for i, ses := range s.Sessions {
			if ses != "" && !slices.Contains(s.Sessions[:i], ses) {
				if _, err := bind(col, ses); err != nil {
					return q, err
				}
			}
		}
	}
	if len(conds) == 0 {
		return q, nil
	}
	q.where = " WHERE (" + strings.Join(conds, " OR ") + ")"
	if tenant != "" {
		q.where = " WHERE " + tenant + " AND (" + strings.Join(conds, " OR ") + ")"
	}
	q.ok = true
	return q, nil
}

// colType is a column's type as the catalog gives it (a domain's base type).
type colType struct {
	name          string // pg_type.typname
	category      string // pg_type.typcategory
	deterministic bool   // its collation is deterministic (or it has none)
}

// allColumnsSQL reads the name and colType of every column of the table $1 (an oid).
const allColumnsSQL = `SELECT a.attname, t.typname, t.typcategory, coalesce(co.collisdeterministic, true)
FROM pg_attribute a
JOIN pg_type d ON d.oid = a.atttypid
JOIN pg_type t ON t.oid = CASE WHEN d.typtype = 'd' THEN d.typbasetype ELSE d.oid END
LEFT JOIN pg_collation co ON co.oid = a.attcollation
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped`

// columnsSQL is allColumnsSQL for the columns named in $2 only.
const columnsSQL = allColumnsSQL + ` AND a.attname = ANY($2)`

// hiddenSQL says whether row-level security applies to the current role on a table: it is
// enabled, and the role is neither a superuser, nor BYPASSRLS, nor the owner of a table
// that does not force it.
const hiddenSQL = `SELECT c.relrowsecurity AND NOT r.rolsuper AND NOT r.rolbypassrls
	AND (c.relforcerowsecurity OR c.relowner <> r.oid)
FROM pg_class c, pg_roles r WHERE c.oid = $1 AND r.rolname = current_user`

// columnTypes reads the types of cols in table and sets hidden when row-level security
// may hide rows of it from the current role; found is false when the table does not
// exist. A column the table does not have is a permanent error.
func columnTypes(ctx context.Context, tx pgx.Tx, table, location string, cols []string, hidden *bool) (map[string]colType, bool, error) {
	var oid *uint32
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1)::oid", table).Scan(&oid); err != nil {
		return nil, false, classify("look up table "+location, err)
	}
	if oid == nil {
		return nil, false, nil
	}
	if err := tx.QueryRow(ctx, hiddenSQL, *oid).Scan(hidden); err != nil {
		return nil, false, classify("read the row security of "+location, err)
	}
	rows, err := tx.Query(ctx, columnsSQL, *oid, cols)
	if err != nil {
		return nil, false, classify("read the columns of "+location, err)
	}
	types := map[string]colType{}
	for rows.Next() {
		var name string
		var ct colType
		if err := rows.Scan(&name, &ct.name, &ct.category, &ct.deterministic); err != nil {
			return nil, false, classify("read the columns of "+location, err)
		}
		types[name] = ct
	}
	if err := rows.Err(); err != nil {
		return nil, false, classify("read the columns of "+location, err)
	}
	var missing []error
	for _, c := range cols {
		if _, ok := types[c]; !ok {
			missing = append(missing, fmt.Errorf("postgresstore: table %s has no column %q", location, c))
		}
	}
	if err := errors.Join(missing...); err != nil {
		return nil, false, retry.Permanent(err)
	}
	return types, true, nil
}

var (
	decimalRE = regexp.MustCompile(`^(0|-?[1-9][0-9]*)$`)
	uuidRE    = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// equals returns the condition "col equals parameter n" for a column of type ct, and false
// when value cannot be a value of that type (it then matches no row of the column). A
// type it cannot compare exactly is an error.
func equals(col string, ct colType, value string, n int) (string, bool, error) {
	c, p := pgx.Identifier{col}.Sanitize(), "$"+strconv.Itoa(n)
	switch {
	case ct.category == "S" && ct.deterministic && slices.Contains([]string{"text", "varchar", "bpchar"}, ct.name):
		return c + " = " + p, true, nil
	case ct.category == "S":
		return c + `::text COLLATE "C" = ` + p + "::text", true, nil
	case slices.Contains([]string{"int2", "int4", "int8"}, ct.name):
		if _, err := strconv.ParseInt(value, 10, 64); err != nil || !decimalRE.MatchString(value) {
			return "", false, nil
		}
		return c + " = " + p + "::int8", true, nil
	case ct.name == "uuid":
		if !uuidRE.MatchString(value) {
			return "", false, nil
		}
		return c + " = " + p + "::text::uuid", true, nil
	}
	return "", false, fmt.Errorf("column %q has type %s: subject, session and tenant columns must be text, varchar, char, integer or uuid", col, ct.name)
}

// arg is value as the parameter of equals binds it.
func arg(ct colType, value string) any {
	if slices.Contains([]string{"int2", "int4", "int8"}, ct.name) {
		n, _ := strconv.ParseInt(value, 10, 64)
		return n
	}
	return value
}
