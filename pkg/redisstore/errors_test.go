package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

const secretID = "secret-id-4711"

// noIdentifier fails when err's message holds the raw subject id.
func noIdentifier(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), secretID) {
		t.Errorf("error %q holds the raw identifier", err)
	}
}

func TestNoPermissionIsPermanent(t *testing.T) {
	admin := realRedis(t)
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "lethe", "on", ">pw", "~*", "+@all", "-unlink").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, Username: "lethe", Password: "pw"})
	t.Cleanup(func() { c.Close() })
	st := refStore(t, "redis")
	for _, tc := range []struct {
		name  string
		index bool
	}{{"indexed", true}, {"legacy", false}} {
		t.Run(tc.name, func(t *testing.T) {
			admin.FlushAll(ctx)
			s := deletiontest.NewSubject("acme", secretID)
			seed(t, admin, s, 2, nil)
			if !tc.index {
				admin.Del(ctx, indexKey(s))
			}
			_, err := redisstore.New(c).Erase(ctx, st, s)
			if !retry.IsPermanent(err) {
				t.Errorf("Erase without UNLINK permission = %v, want a permanent error", err)
			}
			noIdentifier(t, err)
			if v, err := redisstore.New(c).Verify(ctx, st, s); err != nil || v.Remaining != 4 {
				t.Errorf("Verify = %+v, %v; want 4 remaining", v, err)
			}
		})
	}
}

func TestUnreachableIsTransient(t *testing.T) {
	c := redis.NewClient(&redis.Options{
		Addr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second,
	})
	t.Cleanup(func() { c.Close() })
	s := deletiontest.NewSubject("acme", secretID)
	_, err := redisstore.New(c).Erase(context.Background(), refStore(t, "redis"), s)
	if err == nil || retry.IsPermanent(err) {
		t.Errorf("Erase against a closed port = %v, want a transient error", err)
	}
	noIdentifier(t, err)
	_, err = redisstore.New(c).Verify(context.Background(), refStore(t, "langgraph"), s)
	if err == nil || retry.IsPermanent(err) {
		t.Errorf("Verify against a closed port = %v, want a transient error", err)
	}
}

func TestCanceledIsTransient(t *testing.T) {
	c := realRedis(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := redisstore.New(c).Erase(ctx, refStore(t, "redis"), deletiontest.NewSubject("acme", "a"))
	if err == nil || retry.IsPermanent(err) {
		t.Errorf("Erase with a canceled context = %v, want a transient error", err)
	}
}
