package postgresstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lethe-erasure/lethe/pkg/retry"
)

// transientClasses are the SQLSTATE classes that repeating the statement may get past:
// connection exceptions (08), transaction rollbacks such as serialization failures and
// deadlocks (40), insufficient resources (53), objects in use such as lock timeouts (55),
// operator intervention such as a shutdown or a cancelled statement (57), system errors
// (58) and internal errors (XX).
var transientClasses = []string{"08", "40", "53", "55", "57", "58", "XX"}

// pgError is a server error as this package reports it: the operation, SQLSTATE and the
// server's message, but never its detail (which quotes row values) nor, for data
// exceptions (class 22), the message, which quotes the input.
type pgError struct {
	op string
	pg *pgconn.PgError
}

func (e *pgError) Error() string {
	msg := e.pg.Message
	if strings.HasPrefix(e.pg.Code, "22") {
		msg = "data exception"
	}
	return fmt.Sprintf("postgresstore: %s: %s (SQLSTATE %s)", e.op, msg, e.pg.Code)
}

func (e *pgError) Unwrap() error { return e.pg }

// classify wraps err with op and marks it retry.Permanent when repeating cannot fix it: a
// server error outside transientClasses (an unknown table or column, missing privileges,
// failed authentication, a foreign key that refuses the delete). Network errors, timeouts,
// cancellations and the server errors of transientClasses stay transient.
func classify(op string, err error) error {
	if err == nil || retry.IsPermanent(err) {
		return err
	}
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return fmt.Errorf("postgresstore: %s: %w", op, err)
	}
	e := &pgError{op: op, pg: pg}
	for _, c := range transientClasses {
		if strings.HasPrefix(pg.Code, c) {
			return e
		}
	}
	return retry.Permanent(e)
}
