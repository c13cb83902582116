package postgresstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
)

// Settings declare the database a deleter connects to.
type Settings struct {
	DSN     string `env:"LETHE_POSTGRES_DSN" secret:"true" doc:"A libpq connection string or URL, required, a secret never logged; it may set pool_max_conns and the other pgxpool settings, and the libpq environment (PGPASSWORD, PGSSLMODE, ...) fills what it leaves out. The role needs SELECT and DELETE on the inventory's tables only."`
	DSNFile string `env:"LETHE_POSTGRES_DSN_FILE" doc:"A file holding the connection string (a mounted secret), read when LETHE_POSTGRES_DSN is empty."`
}

// Pool returns a connection pool to the database s names and logs where (host, port,
// database and user; never the password or the DSN) on log, which may be nil. It does not
// connect: the first statement does, and Check reports whether it can.
func (s Settings) Pool(log *zap.Logger) (*pgxpool.Pool, error) {
	dsn := s.DSN
	if dsn == "" && s.DSNFile != "" {
		b, err := os.ReadFile(s.DSNFile)
		if err != nil {
			return nil, fmt.Errorf("postgresstore: LETHE_POSTGRES_DSN_FILE: %w", err)
		}
		dsn = strings.TrimSpace(string(b))
	}
	if dsn == "" {
		return nil, errors.New("postgresstore: LETHE_POSTGRES_DSN (or LETHE_POSTGRES_DSN_FILE) is not set")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors can quote the connection string, password included.
		return nil, errors.New("postgresstore: LETHE_POSTGRES_DSN does not parse as a connection string or URL")
	}
	if log != nil {
		c := cfg.ConnConfig
		log.Info("postgres pool", zap.String("postgres_host", c.Host), zap.Uint16("postgres_port", c.Port),
			zap.String("postgres_database", c.Database), zap.String("postgres_user", c.User),
			zap.Bool("postgres_password", c.Password != ""), zap.Bool("postgres_tls", c.TLSConfig != nil))
	}
	return pgxpool.NewWithConfig(context.Background(), cfg)
}

// Checks are the readiness checks of a deleter over pool for inv: a connection must answer
// a ping when inv names a store of kind "postgres". With none the deleter has no database
// to reach (it is deployed before its stores are added) and needs no check.
func Checks(pool *pgxpool.Pool, inv *inventory.Inventory) []metrics.Check {
	if inv == nil || len(inv.OfKinds(Kind)) == 0 {
		return nil
	}
	return []metrics.Check{{Name: "postgres", Fn: pool.Ping}}
}
