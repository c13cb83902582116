package postgresstore_test

import (
	"os"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/postgresstore"
)

func table(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// TestValidate: every table a one- or two-part identifier with {tenant} only, a tenant
// condition or a per-tenant name, identifier columns named once; the error names the field.
func TestValidate(t *testing.T) {
	cols := []any{"user_id"}
	for _, tc := range []struct {
		name   string
		tables any
		want   string // substring of the error; "" = valid
	}{
		{"shared with tenant column", []any{table("table", "public.chat", "subject_columns", cols, "tenant_column", "tenant_id")}, ""},
		{"per-tenant schema", []any{table("table", "t_{tenant}.checkpoints", "session_columns", []any{"thread_id"})}, ""},
		{"per-tenant table", []any{table("table", "chat_{tenant}", "subject_columns", cols)}, ""},
		{"no tables", []any{}, "tables: at least one"},
		{"shared without tenant column", []any{table("table", "public.chat", "subject_columns", cols)}, `store "pg": locators: tables[0]: tenant_column: table "public.chat" is shared by tenants`},
		{"second shared without tenant column", []any{table("table", "chat_{tenant}", "subject_columns", cols), table("table", "lg.checkpoints", "session_columns", []any{"thread_id"})},
			`tables[1]: tenant_column: table "lg.checkpoints" is shared by tenants`},
		{"no columns", []any{table("table", "chat_{tenant}")}, "subject_columns, session_columns"},
		{"three parts", []any{table("table", "db.public.chat", "subject_columns", cols, "tenant_column", "t")}, "want table or schema.table"},
		{"quote in table", []any{table("table", `chat"; DROP TABLE x; --`, "subject_columns", cols, "tenant_column", "t")}, "tables[0]: table"},
		{"space in column", []any{table("table", "chat_{tenant}", "subject_columns", []any{"user id"})}, `column "user id"`},
		{"injection in column", []any{table("table", "chat_{tenant}", "session_columns", []any{"s = s OR 1=1 --"})}, "must match"},
		{"other placeholder", []any{table("table", "chat_{subject}", "subject_columns", cols)}, "placeholder {subject}"},
		{"misspelt placeholder", []any{table("table", "chat_{tennant}", "subject_columns", cols)}, "placeholder {tennant}"},
		{"column twice", []any{table("table", "chat_{tenant}", "subject_columns", cols, "session_columns", cols)}, `"user_id" is named twice`},
		{"tenant column among subjects", []any{table("table", "c", "subject_columns", cols, "tenant_column", "user_id")}, "named twice"},
		{"table twice", []any{table("table", "c_{tenant}", "subject_columns", cols), table("table", "c_{tenant}", "session_columns", []any{"s"})}, "tables[1]: table \"c_{tenant}\" is listed twice"},
		{"too long", []any{table("table", strings.Repeat("a", 64), "subject_columns", cols, "tenant_column", "t")}, "must match"},
		{"unknown field", []any{table("table", "c_{tenant}", "subject_column", cols)}, `unknown field "subject_column"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := inventory.Entry{Name: "pg", Kind: postgresstore.Kind, Locators: inventory.Locators{"tables": tc.tables}}
			err := (&postgresstore.Store{}).Validate(st)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestExampleInventory loads deploy/examples/inventory-postgres.yaml: it parses, and every
// store of kind postgres in it is valid.
func TestExampleInventory(t *testing.T) {
	inv, err := inventory.Load("../../deploy/examples/inventory-postgres.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stores := inv.OfKinds(postgresstore.Kind)
	if len(stores) != 2 {
		t.Fatalf("%d postgres stores, want the LangGraph checkpointer's and the chat history", len(stores))
	}
	if err := deletion.ValidateStores(inv, postgresstore.Kind, &postgresstore.Store{}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile("../../deploy/examples/inventory-postgres.yaml")
	for _, tb := range []string{"checkpoints", "checkpoint_writes", "checkpoint_blobs", "thread_id", "chat_history"} {
		if !strings.Contains(string(b), tb) {
			t.Errorf("the example names no %s", tb)
		}
	}
}
