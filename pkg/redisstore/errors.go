package redisstore

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/retry"
)

// permanentPrefixes are Redis error replies that repeating the same command cannot fix:
// missing ACL permissions or credentials, a key of the wrong type (an index that is not a
// set), a command the server does not know.
var permanentPrefixes = []string{
	"NOPERM", "NOAUTH", "WRONGPASS", "WRONGTYPE",
	"unknown command", "syntax error", "wrong number of arguments",
}

// classify wraps err with op and marks it retry.Permanent when retrying cannot fix it.
// Network errors, timeouts, cancellations and every other server reply (LOADING,
// TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY, BUSY, OOM, ...) stay transient.
func classify(op string, err error) error {
	if err == nil || retry.IsPermanent(err) {
		return err
	}
	wrapped := opError(op, err)
	if isPermanent(err) {
		return retry.Permanent(wrapped)
	}
	return wrapped
}

func isPermanent(err error) bool {
	if errors.Is(err, redis.ErrCrossSlot) {
		return true // a template whose keys span slots inside one transaction
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := strings.TrimPrefix(re.Error(), "ERR ")
	for _, p := range permanentPrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// isWrongType reports whether err is Redis's WRONGTYPE reply: the key holds another type.
func isWrongType(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "WRONGTYPE")
}

// cause returns the error of a failed pipeline that says most about why: the first
// permanent error of a command (a MULTI reports only EXECABORT for a command refused when
// queued), else err.
func cause(cmds []redis.Cmder, err error) error {
	for _, c := range cmds {
		if e := c.Err(); e != nil && isPermanent(e) {
			return e
		}
	}
	return err
}
