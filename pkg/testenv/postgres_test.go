package testenv_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// TestPostgres starts a server and runs a statement that needs UTF-8: the DSN works.
func TestPostgres(t *testing.T) {
	dsn := testenv.Postgres(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var enc string
	if err := c.QueryRow(ctx, "SHOW server_encoding").Scan(&enc); err != nil {
		t.Fatal(err)
	}
	if enc != "UTF8" {
		t.Errorf("server_encoding %q, want UTF8", enc)
	}
}
