package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/calls"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/tlsenv"
)

// Settings declare the Redis a deleter connects to.
type Settings struct {
	Addrs     []string `env:"LETHE_REDIS_ADDRS" default:"127.0.0.1:6379" doc:"Redis addresses, comma separated; several mean a cluster."`
	Username  string   `env:"LETHE_REDIS_USERNAME" doc:"Redis ACL user, allowed only SCAN, UNLINK, SMEMBERS, SREM, EXISTS, MULTI, EXEC and @connection; record families also need HMGET and GET, and discovery TYPE, GETRANGE and HGETALL."`
	Password  string   `env:"LETHE_REDIS_PASSWORD" secret:"true" doc:"Redis password."`
	TLS       bool     `env:"LETHE_REDIS_TLS" doc:"true: connect to Redis with TLS, trusting the system roots."`
	TLSCAFile string   `env:"LETHE_REDIS_TLS_CA_FILE" doc:"A PEM bundle to trust instead of the system roots; implies TLS."`
}

// Client returns a client of the Redis s names — a cluster client for several addresses,
// else a single-node one — and logs where (never the password) on log, which may be nil.
func (s Settings) Client(log *zap.Logger) (redis.UniversalClient, error) {
	opts := &redis.UniversalOptions{Addrs: s.Addrs, Username: s.Username, Password: s.Password}
	opts.IsClusterMode = len(opts.Addrs) > 1
	tc, err := tlsenv.Config(s.TLS, s.TLSCAFile, "LETHE_REDIS_TLS_CA_FILE")
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	opts.TLSConfig = tc
	if log != nil {
		log.Info("redis client", zap.String("redis", strings.Join(s.Addrs, ",")), zap.String("redis_username", opts.Username),
			zap.Bool("redis_password", opts.Password != ""), zap.Bool("redis_tls", opts.TLSConfig != nil))
	}
	c := redis.NewUniversalClient(opts)
	c.AddHook(callCounter{})
	return c, nil
}

// ClientFromEnv loads the Settings from the environment and returns their Client.
func ClientFromEnv(log *zap.Logger) (redis.UniversalClient, error) {
	var s Settings
	if err := envconf.FromEnv(&s); err != nil {
		return nil, err
	}
	return s.Client(log)
}

// Check is the readiness check of client: PING must answer.
func Check(client redis.UniversalClient) metrics.Check {
	return metrics.Check{Name: "redis", Fn: func(ctx context.Context) error { return client.Ping(ctx).Err() }}
}

// callCounter counts each Redis command, and each pipeline or transaction as one call.
type callCounter struct{}

var _ redis.Hook = callCounter{}

// DialHook counts nothing: a connection is not a call.
func (callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts a command by its name.
func (callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		calls.Count(calls.Redis, "", cmd.Name())
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline or transaction once.
func (callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		calls.Count(calls.Redis, "", "pipeline")
		return next(ctx, cmds)
	}
}
