package inventory_test

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/inventory"
)

func TestReference(t *testing.T) {
	inv := inventory.Reference()
	if inv.Version == "" {
		t.Error("reference inventory has no version")
	}
	want := []struct{ name, kind string }{
		{"qdrant", "qdrant"},
		{"redis", "redis"},
		{"langgraph", "redis"},
		{"dataset", "dataset"},
		{"audit_log", "audit_log"},
	}
	if len(inv.Stores) != len(want) {
		t.Fatalf("reference has %d stores %v, want %d", len(inv.Stores), inv.Names(), len(want))
	}
	for i, w := range want {
		if s := inv.Stores[i]; s.Name != w.name || s.Kind != w.kind {
			t.Errorf("stores[%d] = %s (%s), want %s (%s)", i, s.Name, s.Kind, w.name, w.kind)
		}
	}
	for _, s := range inv.Stores {
		if s.Physical == "" {
			t.Errorf("store %s says nothing about physical erasure", s.Name)
		}
	}
}

// TestDeployedInventoryIsReference keeps the shipped deploy/inventory.yaml from drifting
// from the reference the code embeds.
func TestDeployedInventoryIsReference(t *testing.T) {
	deployed, err := os.ReadFile("../../deploy/inventory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := os.ReadFile("reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(deployed, ref) {
		t.Fatal("deploy/inventory.yaml differs from pkg/inventory/reference.yaml; copy one onto the other")
	}
	inv, err := inventory.Load("../../deploy/inventory.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !reflect.DeepEqual(inv, inventory.Reference()) {
		t.Error("Load(deploy/inventory.yaml) differs from Reference()")
	}
}

// TestLangChainExample loads the example inventory for LangChain's Qdrant layout, whose
// locators are nested payload fields.
func TestLangChainExample(t *testing.T) {
	inv, err := inventory.Load("../../deploy/examples/inventory-langchain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var q struct {
		Collections   []string `yaml:"collections"`
		SubjectFields []string `yaml:"subject_fields"`
		HashFields    []string `yaml:"hash_fields"`
		SessionFields []string `yaml:"session_fields"`
	}
	st, ok := inv.Entry("qdrant")
	if err := st.Locators.Decode(&q); !ok || err != nil || !reflect.DeepEqual(q.SubjectFields, []string{"metadata.customer_id"}) ||
		!reflect.DeepEqual(q.SessionFields, []string{"metadata.session_id"}) {
		t.Errorf("qdrant locators %+v: %v", st.Locators, err)
	}
	var d struct {
		Prefixes       []string `yaml:"prefixes"`
		SubjectColumns []string `yaml:"subject_columns"`
		SessionColumns []string `yaml:"session_columns"`
		Exclude        []string `yaml:"exclude"`
	}
	st, ok = inv.Entry("dataset")
	if err := st.Locators.Decode(&d); !ok || err != nil || !reflect.DeepEqual(d.SubjectColumns, []string{"metadata.customer_id"}) || len(d.Exclude) == 0 {
		t.Errorf("dataset locators %+v: %v", st.Locators, err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := inventory.Load("testdata/does-not-exist.yaml"); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}

// valid is a custom inventory using the reference kinds and one no Lethe package defines.
const valid = `
version: "7"
stores:
  - name: vectors
    kind: qdrant
    locators:
      collections: ["kb_{tenant}"]
      hash_fields: [owner_hash]
  - name: sessions
    kind: redis
    locators:
      keys: ["s:{tenant}:{session}:*", "h:{tenant}:{subject_hash}"]
      index: "i:{tenant}:{subject}"
  - name: exports-2
    kind: dataset
    locators:
      prefixes: ["exports/{tenant}/"]
      session_columns: [sid]
    physical: versions deleted
  - name: audit
    kind: audit_log
  - name: tickets
    kind: helpdesk-v2
    locators:
      queue: "support-{tenant}"
      fields: {requester: email, opened_by: [agent, bot]}
      batch: 50
`

func TestParseValid(t *testing.T) {
	inv, err := inventory.Parse([]byte(valid))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got, want := inv.Names(), []string{"vectors", "sessions", "exports-2", "audit", "tickets"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	s, _ := inv.Entry("sessions")
	var keys struct {
		Keys  []string `yaml:"keys"`
		Index string   `yaml:"index"`
	}
	if err := s.Locators.Decode(&keys); err != nil {
		t.Fatal(err)
	}
	if want := []string{"s:{tenant}:{session}:*", "h:{tenant}:{subject_hash}"}; !reflect.DeepEqual(keys.Keys, want) {
		t.Errorf("sessions keys = %q, want %q", keys.Keys, want)
	}
	// A kind no package of Lethe defines keeps its locators as written, nested ones included.
	tk, _ := inv.Entry("tickets")
	var tickets struct {
		Queue  string         `yaml:"queue"`
		Fields map[string]any `yaml:"fields"`
		Batch  int            `yaml:"batch"`
	}
	if err := tk.Locators.Decode(&tickets); err != nil {
		t.Fatal(err)
	}
	if tickets.Queue != "support-{tenant}" || tickets.Batch != 50 || tickets.Fields["requester"] != "email" {
		t.Errorf("tickets locators = %+v", tickets)
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // substrings of the error
	}{
		{"empty version", `
version: ""
stores: [{name: a, kind: audit_log}]`, []string{"version is empty"}},
		{"no version", `
stores: [{name: a, kind: audit_log}]`, []string{"version is empty"}},
		{"no stores", `
version: "1"
stores: []`, []string{"no stores"}},
		{"duplicate names", `
version: "1"
stores: [{name: a, kind: audit_log}, {name: a, kind: audit_log}]`, []string{`stores[1] "a": duplicate name`}},
		{"upper-case name", `
version: "1"
stores: [{name: Audit, kind: audit_log}]`, []string{`"Audit": name must match`}},
		{"empty name", `
version: "1"
stores: [{kind: audit_log}]`, []string{`stores[0] "": name must match`}},
		{"name with a space", `
version: "1"
stores: [{name: "a b", kind: audit_log}]`, []string{`"a b": name must match`}},
		{"name starting with a digit", `
version: "1"
stores: [{name: 1a, kind: audit_log}]`, []string{`"1a": name must match`}},
		{"name too long", `
version: "1"
stores: [{name: ` + strings.Repeat("a", 64) + `, kind: audit_log}]`, []string{"name must match"}},
		{"empty kind", `
version: "1"
stores: [{name: pg}]`, []string{`stores[0] "pg": kind is empty`}},
		{"blank kind", `
version: "1"
stores: [{name: pg, kind: "  "}]`, []string{`stores[0] "pg": kind is empty`}},
		{"unknown top-level field", `
version: "1"
owner: me
stores: [{name: a, kind: audit_log}]`, []string{"field owner not found"}},
		{"locators that are no mapping", `
version: "1"
stores: [{name: r, kind: redis, locators: ["k:{subject}"]}]`, []string{"inventory:"}},
		{"every problem is reported", `
version: ""
stores: [{name: X, kind: nope}, {name: X}]`, []string{
			"version is empty", `"X": name must match`, "duplicate name", `stores[1] "X": kind is empty`}},
		{"not yaml", `{{{`, []string{"inventory:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := inventory.Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", inv)
			}
			if !strings.HasPrefix(err.Error(), "inventory: ") {
				t.Errorf("error %q does not start with the package name", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestExpand(t *testing.T) {
	v := inventory.Vars{Tenant: "acme", Subject: "c*42", SubjectHash: "9f86", Session: "s?1"}
	escape := func(s string) string { return "<" + s + ">" }
	tests := []struct {
		name   string
		tmpl   string
		vars   inventory.Vars
		escape func(string) string
		want   string
	}{
		{"all placeholders", "{tenant}/{subject}/{subject_hash}/{session}", v, nil, "acme/c*42/9f86/s?1"},
		{"all placeholders escaped", "{tenant}/{subject}/{subject_hash}/{session}", v, escape, "<acme>/<c*42>/<9f86>/<s?1>"},
		{"repeated placeholder", "{tenant}:{tenant}", v, escape, "<acme>:<acme>"},
		{"no placeholder", "static:*", v, escape, "static:*"},
		{"literal text is not escaped", "session:{tenant}:{subject}:*", v, escape, "session:<acme>:<c*42>:*"},
		{"unknown placeholder stays", "{user}:{tenant}", v, nil, "{user}:acme"},
		{"value that looks like a placeholder", "k:{subject}:{tenant}",
			inventory.Vars{Tenant: "acme", Subject: "{tenant}"}, nil, "k:{tenant}:acme"},
		{"value that looks like a placeholder, escaped", "k:{subject}:{session}",
			inventory.Vars{Subject: "{session}", Session: "{subject}"}, escape, "k:<{session}>:<{subject}>"},
		{"empty value", "k:{session}", inventory.Vars{}, nil, "k:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inventory.Expand(tt.tmpl, tt.vars, tt.escape); got != tt.want {
				t.Errorf("Expand(%q) = %q, want %q", tt.tmpl, got, tt.want)
			}
		})
	}
}

func TestUses(t *testing.T) {
	if !inventory.Uses("session:{tenant}:{subject}:*", inventory.Subject) {
		t.Error("Uses(subject) = false")
	}
	if inventory.Uses("session:{tenant}:{subject_hash}", inventory.Subject) {
		t.Error("Uses(subject) = true for a template with only {subject_hash}")
	}
}

func TestLookups(t *testing.T) {
	inv := inventory.Reference()

	if got, want := inv.Names(), []string{"qdrant", "redis", "langgraph", "dataset", "audit_log"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}

	s, ok := inv.Entry("langgraph")
	if !ok || s.Name != "langgraph" || s.Kind != "redis" {
		t.Errorf("Store(langgraph) = %+v, %v", s, ok)
	}
	if want := []string{"graph:{tenant}:{subject}:*"}; !reflect.DeepEqual(s.Locators["keys"], []any{want[0]}) {
		t.Errorf("langgraph keys = %q, want %q", s.Locators["keys"], want)
	}
	for _, name := range []string{"", "postgres", "Redis", "redi"} {
		if s, ok := inv.Entry(name); ok {
			t.Errorf("Store(%q) found %+v", name, s)
		}
	}

	kinds := []struct {
		kinds []string
		want  []string
	}{
		{[]string{"redis"}, []string{"redis", "langgraph"}},
		{[]string{"qdrant", "audit_log"}, []string{"qdrant", "audit_log"}},
		{[]string{"audit_log", "qdrant"}, []string{"qdrant", "audit_log"}}, // inventory order
		{[]string{"qdrant", "redis", "dataset", "audit_log"}, []string{"qdrant", "redis", "langgraph", "dataset", "audit_log"}},
		{[]string{"postgres"}, nil},
		{nil, nil},
	}
	for _, k := range kinds {
		var got []string
		for _, s := range inv.OfKinds(k.kinds...) {
			got = append(got, s.Name)
		}
		if !reflect.DeepEqual(got, k.want) {
			t.Errorf("OfKinds(%v) = %v, want %v", k.kinds, got, k.want)
		}
	}
}
