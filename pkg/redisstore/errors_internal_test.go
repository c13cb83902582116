package redisstore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/retry"
)

// replyError is a Redis error reply, as go-redis reports one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err       error
		permanent bool
	}{
		{replyError("LOADING Redis is loading the dataset in memory"), false},
		{replyError("TRYAGAIN Multiple keys request during rehashing of slot"), false},
		{replyError("CLUSTERDOWN The cluster is down"), false},
		{replyError("MASTERDOWN Link with MASTER is down"), false},
		{replyError("READONLY You can't write against a read only replica."), false},
		{replyError("BUSY Redis is busy running a script."), false},
		{replyError("OOM command not allowed when used memory > 'maxmemory'."), false},
		{replyError("NOPERM User lethe has no permissions to run the 'unlink' command"), true},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), true},
		{replyError("NOAUTH Authentication required."), true},
		{replyError("WRONGPASS invalid username-password pair or user is disabled."), true},
		{replyError("ERR unknown command 'UNLINK', with args beginning with: "), true},
		{fmt.Errorf("pipeline: %w", replyError("NOPERM no")), true},
		{redis.ErrCrossSlot, true},
		{context.DeadlineExceeded, false},
		{context.Canceled, false},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false},
	} {
		err := classify("op", tc.err)
		if got := retry.IsPermanent(err); got != tc.permanent {
			t.Errorf("classify(%q): permanent = %v, want %v", tc.err, got, tc.permanent)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("classify(%q) does not wrap the cause", tc.err)
		}
	}
	if classify("op", nil) != nil {
		t.Error("classify(nil) != nil")
	}
}
