package postgresstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/postgresstore"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// TestPool: the DSN comes from the variable or its file, the pool reaches the
// server, and neither the log nor an error shows the password.
func TestPool(t *testing.T) {
	dsn := strings.Replace(testenv.Postgres(t), "lethe@", "lethe:s3cret-pw@", 1) // trust ignores it
	core, logs := observer.New(zap.InfoLevel)

	if _, err := (postgresstore.Settings{}).Pool(nil); err == nil || !strings.Contains(err.Error(), "LETHE_POSTGRES_DSN") {
		t.Errorf("without a DSN: %v, want an error naming LETHE_POSTGRES_DSN", err)
	}
	if _, err := (postgresstore.Settings{DSN: "postgres://lethe:s3cret-pw@host:notaport/db"}).Pool(nil); err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("a DSN that does not parse: %v, want an error without the password", err)
	}
	file := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(file, []byte(dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pool, err := postgresstore.Settings{DSNFile: file}.Pool(zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	inv := &inventory.Inventory{Version: "1", Stores: []inventory.Entry{{Name: "chat", Kind: postgresstore.Kind}}}
	checks := postgresstore.Checks(pool, inv)
	if len(checks) != 1 {
		t.Fatalf("%d checks for an inventory with a postgres store, want 1", len(checks))
	}
	if err := checks[0].Fn(context.Background()); err != nil {
		t.Errorf("readiness check: %v", err)
	}
	if n := len(postgresstore.Checks(pool, &inventory.Inventory{Version: "1"})); n != 0 {
		t.Errorf("%d checks without a postgres store, want none", n)
	}
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			if strings.Contains(e.Message+" "+k+" "+strings.TrimSpace(toString(v)), "s3cret-pw") {
				t.Errorf("log %q shows the password", e.Message)
			}
		}
	}
	if logs.Len() == 0 {
		t.Error("nothing logged about the pool")
	}
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}
