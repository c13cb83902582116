package postgresstore

import (
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// tenantColumn is the column among cols (text, varchar or char columns) that holds the
// tenant in a table shared by tenants, as far as its name tells: tenant_id, else tenant,
// else the first whose name has the word "tenant" (tenant_key, org_tenant), leaving out
// the identity-like columns named; "" when none does. A column of another type is never
// taken: whether it holds the tenant as the request names it cannot be told.
func tenantColumn(cols, named []string) string {
	var found []string
	for _, c := range cols {
		l := strings.ToLower(c)
		words := strings.FieldsFunc(l, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') })
		if (slices.Contains(words, "tenant") || l == "tenantid") && !slices.Contains(named, c) {
			found = append(found, c)
		}
	}
	for _, pref := range []string{"tenant_id", "tenant"} {
		if slices.Contains(found, pref) {
			return pref
		}
	}
	if len(found) > 0 {
		return found[0]
	}
	return ""
}

// sessionNames are the column names a suggestion lists as session columns.

var nonName = regexp.MustCompile(`[^a-z0-9_-]+`)

// suggestion writes the postgres store that covers the table shape loc (schema.table, as
// Discover writes it), as the inventory file writes one entry of its stores (a YAML
// mapping): its identity-like columns fields as subject_columns, the session-like ones
// (session_id, thread_id, conversation_id) as session_columns, and tenant as its
// tenant_column unless the shape names a table per tenant. Its name is "postgres-" and the
// table's name, one taken does not hold (it is then marked taken). A shape the kind cannot
// name (a part that is no plain identifier) gives "". The entry passes Validate unless the
// table is shared by tenants with no tenant column found, or no column is identity-like; a
// YAML comment then says what to do.
func suggestion(loc string, fields []string, tenant string, taken map[string]bool) string {
	parts := strings.Split(loc, ".")
	for _, p := range parts {
		if !identRE.MatchString(strings.ReplaceAll(p, inventory.Tenant, "t")) {
			return ""
		}
	}
	var subj, sess []string
	for _, f := range fields {
		switch {
		case !identRE.MatchString(f):
		case inventory.SessionLike(f):
			sess = append(sess, f)
		default:
			subj = append(subj, f)
		}
	}
	tb := &yaml.Node{Kind: yaml.MappingNode}
	tb.Content = append(tb.Content, inventory.YAMLString("table"), inventory.YAMLString(loc))
	var why []string // comments above the columns (one above the first key would follow "- ")
	perTenant := inventory.Uses(loc, inventory.Tenant)
	if !perTenant && tenant == "" {
		why = append(why, "Tenants share this table and no column looked like its tenant column: name the column\n"+
			"holding the tenant in tenant_column, or keep a table per tenant ({tenant} in its name).")
	}
	if len(subj) > 0 || len(sess) == 0 {
		if len(subj) == 0 {
			why = append(why, "No column looked identity-like by its name: name the columns holding the subject id\n"+
				"(or session_columns, a session id).")
		}
		tb.Content = append(tb.Content, inventory.YAMLString("subject_columns"), inventory.YAMLList(subj))
	}
	if len(sess) > 0 {
		tb.Content = append(tb.Content, inventory.YAMLString("session_columns"), inventory.YAMLList(sess))
	}
	tb.Content[2].HeadComment = strings.Join(why, "\n")
	if !perTenant && tenant != "" {
		tb.Content = append(tb.Content, inventory.YAMLString("tenant_column"), inventory.YAMLString(tenant))
	}
	locators := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		inventory.YAMLString("tables"), {Kind: yaml.SequenceNode, Content: []*yaml.Node{tb}},
	}}
	name := strings.Trim(nonName.ReplaceAllString(strings.ToLower(strings.ReplaceAll(parts[len(parts)-1], inventory.Tenant, "")), "-"), "-_")
	return inventory.EntryYAML(inventory.UniqueName(Kind+"-"+name, taken), Kind, locators)
}
