package datasetstore

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// suggest fills in the Suggest of every location of out: a new dataset store, as the
// inventory file writes it (one entry of its stores, a YAML mapping), whose prefix
// (suggestPrefix) covers the location and whose subject_columns and session_columns are
// the location's Fields, a session-like name (sessionField) going to session_columns.
// Locations sharing a prefix share one entry naming the Fields of all of them. The entry's
// name is "dataset-" and the prefix's last named part, unused in inv and among the entries
// suggested. The entry passes Validate unless the location lies outside any {tenant} path
// part (a prefix shared by tenants, which the kind refuses) or no Fields were found; a YAML
// comment then says what to do.
func suggest(inv *inventory.Inventory, out []deletion.Uncovered) {
	var prefixes []string
	of := map[string][]int{}
	for i, u := range out {
		p := suggestPrefix(u.Location)
		if of[p] == nil {
			prefixes = append(prefixes, p)
		}
		of[p] = append(of[p], i)
	}
	taken := map[string]bool{}
	for _, n := range inv.Names() {
		taken[n] = true
	}
	for _, p := range prefixes {
		fields := map[string]bool{}
		for _, i := range of[p] {
			for _, f := range out[i].Fields {
				fields[f] = true
			}
		}
		name := uniqueName(Kind+"-"+prefixName(p), taken)
		y := suggestion(name, p, slices.Sorted(maps.Keys(fields)))
		for _, i := range of[p] {
			out[i].Suggest = y
		}
	}
}

// suggestPrefix is the prefix of a store covering the location shape loc (as Discover
// writes it): its root and the directories before the first that is a placeholder other
// than {tenant}.
func suggestPrefix(loc string) string {
	root, key := splitLocation(loc)
	parts := strings.Split(key, "/")
	parts = parts[:len(parts)-1] // the file name
	for i, p := range parts {
		if strings.Contains(p, "{") && p != inventory.Tenant {
			parts = parts[:i]
			break
		}
	}
	if len(parts) == 0 {
		return root
	}
	return root + strings.Join(parts, "/") + "/"
}

// splitLocation splits a location shape into its root ("s3://bucket/" or "file://") and
// the key shape below it.
func splitLocation(loc string) (root, key string) {
	if rest, ok := strings.CutPrefix(loc, "s3://"); ok {
		bucket, key, _ := strings.Cut(rest, "/")
		return "s3://" + bucket + "/", key
	}
	return "file://", strings.TrimPrefix(loc, "file://")
}

var nonName = regexp.MustCompile(`[^a-z0-9_-]+`)

// prefixName is the last part of prefix p that is no placeholder, made an inventory name.
func prefixName(p string) string {
	_, rest, _ := strings.Cut(p, "://")
	parts := strings.FieldsFunc(rest, func(r rune) bool { return r == '/' })
	for i := len(parts) - 1; i >= 0; i-- {
		n := strings.Trim(nonName.ReplaceAllString(strings.ToLower(strings.ReplaceAll(parts[i], inventory.Tenant, "")), "-"), "-_")
		if n != "" {
			return n
		}
	}
	return "datasets"
}

// uniqueName returns name, cut to an inventory name's length, or it with the first suffix
// -2, -3, ... that taken does not hold, and marks it taken.
func uniqueName(name string, taken map[string]bool) string {
	name = strings.TrimRight(name[:min(len(name), 56)], "-_")
	n := name
	for i := 2; taken[n]; i++ {
		n = fmt.Sprintf("%s-%d", name, i)
	}
	taken[n] = true
	return n
}

// sessionNames are the field names a suggestion lists as session columns.
var sessionNames = []string{"session_id", "thread_id", "conversation_id"}

// sessionField reports whether the last part of the field path f is session-like.
func sessionField(f string) bool {
	last := f[strings.LastIndexByte(f, '.')+1:]
	last = strings.NewReplacer("-", "_", " ", "_").Replace(strings.ToLower(strings.TrimSpace(last)))
	return slices.Contains(sessionNames, last)
}

// suggestion writes the dataset store name with the prefix p and the columns fields.
func suggestion(name, p string, fields []string) string {
	var subj, sess []string
	for _, f := range fields {
		if sessionField(f) {
			sess = append(sess, f)
		} else {
			subj = append(subj, f)
		}
	}
	loc := &yaml.Node{Kind: yaml.MappingNode}
	prefixes := yamlStr("prefixes")
	if !inventory.Uses(p, inventory.Tenant) {
		prefixes.HeadComment = fmt.Sprintf("Tenants share this prefix (it holds no {tenant}), which the kind refuses: keep\n"+
			"each tenant's datasets under a prefix of its own, such as\n%s{tenant}/, and list that.", p)
	}
	ps := yamlList([]string{p})
	ps.Content[0].Style = yaml.DoubleQuotedStyle
	loc.Content = append(loc.Content, prefixes, ps)
	if len(subj) > 0 || len(sess) == 0 {
		k := yamlStr("subject_columns")
		if len(subj) == 0 {
			k.HeadComment = "No column looked identity-like by its name: name the columns holding the subject id\n" +
				"(or session_columns, a session id)."
		}
		loc.Content = append(loc.Content, k, yamlList(subj))
	}
	if len(sess) > 0 {
		loc.Content = append(loc.Content, yamlStr("session_columns"), yamlList(sess))
	}
	return yamlEntry(name, Kind, loc)
}

// yamlEntry writes an inventory entry as the inventory file does: name, kind, locators.
func yamlEntry(name, kind string, locators *yaml.Node) string {
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		yamlStr("name"), yamlStr(name), yamlStr("kind"), yamlStr(kind), yamlStr("locators"), locators,
	}}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		panic(err) // a tree of strings always encodes
	}
	_ = enc.Close()
	return b.String()
}

func yamlStr(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }

// yamlList is a flow sequence of strings: [a, b].
func yamlList(vs []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, v := range vs {
		n.Content = append(n.Content, yamlStr(v))
	}
	return n
}
