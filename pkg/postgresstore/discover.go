package postgresstore

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

var _ deletion.Discoverer = (*Store)(nil)

// Discover reads information_schema for every table outside the system schemas and
// reports those that no table of a postgres store of inv covers ({tenant} matching any
// name part) and that look like personal data: a column named like an identity-like field,
// or, failing that, a text or JSON value among opts.Sample sampled rows matching a pii
// pattern. Tables are reported as schema.table with known tenants replaced by {tenant},
// grouped by that shape (Count is the number of tables); reasons name columns, never
// values. Discover only reads.
//
// Fields are the identity-like columns of a shape; Suggest is a new postgres store listing
// its table (see suggestion), with the column a table shared by tenants names its tenant
// in (tenantColumn), if there is one.
func (p *Store) Discover(ctx context.Context, inv *inventory.Inventory, opts deletion.DiscoverOptions) ([]deletion.Uncovered, error) {
	opts = opts.Defaults()
	covers, err := coversOf(inv)
	if err != nil {
		return nil, err
	}
	rows, err := p.pool.Query(ctx, `SELECT table_schema, table_name, column_name, data_type
		FROM information_schema.columns
		WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_schema NOT LIKE 'pg_toast%'
		ORDER BY table_schema, table_name, ordinal_position`)
	if err != nil {
		return nil, classify("discover", err)
	}
	type table struct {
		schema, name string
		named, text  []string
		tenant       []string // columns that may hold the tenant (tenantColumn)
	}
	var tables []*table
	for rows.Next() {
		var schema, name, col, typ string
		if err := rows.Scan(&schema, &name, &col, &typ); err != nil {
			rows.Close()
			return nil, classify("discover", err)
		}
		if n := len(tables); n == 0 || tables[n-1].schema != schema || tables[n-1].name != name {
			tables = append(tables, &table{schema: schema, name: name})
		}
		tb := tables[len(tables)-1]
		if opts.IdentityField(col) {
			tb.named = append(tb.named, col)
		}
		if typ == "text" || typ == "character varying" || typ == "jsonb" || typ == "json" {
			tb.text = append(tb.text, col)
		}
		if typ == "text" || typ == "character varying" || typ == "character" {
			tb.tenant = append(tb.tenant, col)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify("discover", err)
	}
	type group struct {
		count   int64
		reasons []string
		fields  []string
		tenant  map[string]bool // the tenant column of each table ("" for none)
	}
	groups := map[string]*group{}
	for _, tb := range tables {
		if covered(covers, tb.schema, tb.name) {
			continue
		}
		var why string
		if len(tb.named) > 0 {
			why = "identity-like columns " + strings.Join(tb.named, ", ")
		} else if len(tb.text) > 0 {
			personal, err := p.samplePersonal(ctx, tb.schema, tb.name, tb.text, opts.Sample)
			if err != nil {
				return nil, err
			}
			if personal {
				why = "values match personal-data patterns"
			}
		}
		if why == "" {
			continue
		}
		shape := tenantShape(tb.schema, opts.Tenants) + "." + tenantShape(tb.name, opts.Tenants)
		g := groups[shape]
		if g == nil {
			g = &group{tenant: map[string]bool{}}
			groups[shape] = g
		}
		g.count++
		for _, c := range tb.named {
			if !slices.Contains(g.fields, c) {
				g.fields = append(g.fields, c)
			}
		}
		g.tenant[tenantColumn(tb.tenant, tb.named)] = true
		if !slices.Contains(g.reasons, why) {
			g.reasons = append(g.reasons, why)
		}
	}
	var out []deletion.Uncovered
	for shape, g := range groups {
		sort.Strings(g.reasons)
		out = append(out, deletion.Uncovered{Kind: Kind, Location: shape, Reason: strings.Join(g.reasons, "; "), Count: g.count, Fields: g.fields})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Location < out[j].Location })
	taken := map[string]bool{}
	for _, n := range inv.Names() {
		taken[n] = true
	}
	for i, u := range out {
		tenant := ""
		if g := groups[u.Location]; len(g.tenant) == 1 { // the tables of a shape agree
			for c := range g.tenant {
				tenant = c
			}
		}
		out[i].Suggest = suggestion(u.Location, u.Fields, tenant, taken)
	}
	return out, nil
}

// samplePersonal reads up to n rows of the text columns cols of schema.name and reports
// whether a value matches a pii pattern.
func (p *Store) samplePersonal(ctx context.Context, schema, name string, cols []string, n int) (bool, error) {
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = pgx.Identifier{c}.Sanitize() + "::text"
	}
	q := fmt.Sprintf("SELECT %s FROM %s LIMIT %d", strings.Join(sel, ", "), pgx.Identifier{schema, name}.Sanitize(), n)
	rows, err := p.pool.Query(ctx, q)
	if err != nil {
		return false, classify("discover sample", err)
	}
	defer rows.Close()
	for rows.Next() {
		vals := make([]*string, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			return false, classify("discover sample", err)
		}
		for _, v := range vals {
			if v != nil && deletion.PersonalValue(*v) {
				return true, nil
			}
		}
	}
	return false, classify("discover sample", rows.Err())
}

// coversOf returns the patterns of the tables the postgres stores of inv name (tableRE).
func coversOf(inv *inventory.Inventory) ([]*regexp.Regexp, error) {
	var covers []*regexp.Regexp
	for _, st := range inv.OfKinds(Kind) {
		l, err := decode(st)
		if err != nil {
			return nil, fmt.Errorf("postgresstore: store %q: %w", st.Name, err)
		}
		for _, tb := range l.Tables {
			covers = append(covers, tableRE(tb.Table))
		}
	}
	return covers, nil
}

// covered reports whether one of covers matches the table schema.name.
func covered(covers []*regexp.Regexp, schema, name string) bool {
	return slices.ContainsFunc(covers, func(re *regexp.Regexp) bool { return re.MatchString(schema+"."+name) || re.MatchString(name) })
}

// tableRE matches the schema-qualified names a table template can name.
func tableRE(tmpl string) *regexp.Regexp {
	parts := strings.Split(tmpl, inventory.Tenant)
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("^" + strings.Join(parts, "[^.]+") + "$")
}

// tenantShape replaces each known tenant in a name by {tenant}.
func tenantShape(name string, tenants []string) string {
	for _, t := range tenants {
		if t != "" {
			name = strings.ReplaceAll(name, t, inventory.Tenant)
		}
	}
	return name
}
