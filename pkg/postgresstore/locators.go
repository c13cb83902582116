package postgresstore

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"gopkg.in/yaml.v3"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Locators are the locators of an inventory store of kind "postgres".
type Locators struct {
	Tables []Table `yaml:"tables"`
}

// Table is one table holding rows of data subjects.
type Table struct {
	// Table is "table" or "schema.table"; either part may use {tenant} (a table or schema
	// per tenant). Names are quoted, so they are case-sensitive as written; an unqualified
	// name is found on the connection's search_path.
	Table string `yaml:"table"`
	// SubjectColumns hold the subject id; a row whose column equals it is the subject's.
	SubjectColumns []string `yaml:"subject_columns"`
	// SessionColumns hold a session id (legacy rows, LangGraph's thread_id).
	SessionColumns []string `yaml:"session_columns"`
	// TenantColumn holds the tenant id in a table shared by tenants: every statement
	// requires it to equal the request's tenant. A table without one must be per tenant.
	TenantColumn string `yaml:"tenant_column"`
}

var tableFields = []string{"table", "subject_columns", "session_columns", "tenant_column"}

// UnmarshalYAML decodes a table strictly: a field Table does not declare is an error, as
// it is at the top level of the locators (a misspelt "subject_column" would otherwise
// leave the table without the column and erase nothing from it).
func (tb *Table) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i < len(n.Content); i += 2 {
			if k := n.Content[i].Value; !slices.Contains(tableFields, k) {
				return fmt.Errorf("unknown field %q (known: %s)", k, strings.Join(tableFields, ", "))
			}
		}
	}
	type plain Table
	return n.Decode((*plain)(tb))
}

// identRE is what a configured schema, table or column name may be: an SQL identifier that
// needs no quoting apart from its case, at most 63 bytes (PostgreSQL truncates longer ones).
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Validate checks the locators of st: at least one table; each table a one- or two-part
// name of identifiers (with {tenant} as the only placeholder), at least one subject or
// session column, columns that are identifiers named once, and a tenant column unless the
// table name holds {tenant}. It touches no database.
func Validate(st inventory.Entry) error {
	_, err := decode(st)
	return err
}

// Validate is the package's Validate; it implements deletion.Validator.
func (*Store) Validate(st inventory.Entry) error { return Validate(st) }

// decode decodes and validates st's locators; its errors name the store.
func decode(st inventory.Entry) (Locators, error) {
	l, err := decodeTables(st)
	if err != nil {
		err = fmt.Errorf("postgresstore: store %q: %w", st.Name, err)
	}
	return l, err
}

func decodeTables(st inventory.Entry) (Locators, error) {
	var l Locators
	if err := st.Locators.Decode(&l); err != nil {
		return l, err
	}
	if len(l.Tables) == 0 {
		return l, errors.New("locators: tables: at least one table is required")
	}
	var errs []error
	seen := map[string]bool{}
	for i, tb := range l.Tables {
		if err := tb.validate(); err != nil {
			errs = append(errs, fmt.Errorf("locators: tables[%d]: %w", i, err))
		}
		if seen[tb.Table] {
			errs = append(errs, fmt.Errorf("locators: tables[%d]: table %q is listed twice", i, tb.Table))
		}
		seen[tb.Table] = true
	}
	return l, errors.Join(errs...)
}

func (tb Table) validate() error {
	if err := inventory.CheckTemplate(tb.Table, inventory.Tenant); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	parts := strings.Split(tb.Table, ".")
	if len(parts) > 2 {
		return fmt.Errorf("table: %q: want table or schema.table", tb.Table)
	}
	for _, p := range parts {
		if !identRE.MatchString(strings.ReplaceAll(p, inventory.Tenant, "t")) {
			return fmt.Errorf("table: %q: each part must match %s ({tenant} allowed)", tb.Table, identRE)
		}
	}
	cols := slices.Concat(tb.SubjectColumns, tb.SessionColumns)
	if len(cols) == 0 {
		return errors.New("subject_columns, session_columns: name at least one column")
	}
	if tb.TenantColumn != "" {
		cols = append(cols, tb.TenantColumn)
	} else if !inventory.Uses(tb.Table, inventory.Tenant) {
		return fmt.Errorf("tenant_column: table %q is shared by tenants (its name has no {tenant}): name its tenant column, or one tenant's erasure would delete another's rows", tb.Table)
	}
	seen := map[string]bool{}
	for _, c := range cols {
		if !identRE.MatchString(c) {
			return fmt.Errorf("column %q: must match %s", c, identRE)
		}
		if seen[c] {
			return fmt.Errorf("column %q is named twice", c)
		}
		seen[c] = true
	}
	return nil
}

// name returns tb's table name for tenant: the quoted SQL identifier and its plain form,
// used as the location in reports (it holds the tenant, never a subject).
func (tb Table) name(tenant string) (quoted, plain string, err error) {
	if inventory.Uses(tb.Table, inventory.Tenant) {
		if err := subject.ValidateTenant(tenant); err != nil {
			return "", "", retry.Permanent(fmt.Errorf("postgresstore: table %q: %w", tb.Table, err))
		}
	}
	plain = inventory.Expand(tb.Table, inventory.Vars{Tenant: tenant}, nil)
	parts := strings.Split(plain, ".")
	for _, p := range parts {
		if len(p) > 63 {
			return "", "", retry.Permanent(fmt.Errorf("postgresstore: table %q: name longer than 63 bytes for this tenant", tb.Table))
		}
	}
	return pgx.Identifier(parts).Sanitize(), plain, nil
}
