package redisstore

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/tlsenv"
)

// ClientFromEnv returns a client of the Redis the environment names — a cluster client for
// several addresses, else a single-node one — and logs where (never the password) on log,
// which may be nil:
//
//	LETHE_REDIS_ADDRS        Redis addresses (several: a cluster)     127.0.0.1:6379
//	LETHE_REDIS_USERNAME, LETHE_REDIS_PASSWORD  an ACL user limited to SCAN, UNLINK, SMEMBERS, SREM, EXISTS
//	LETHE_REDIS_TLS          "true": TLS (system roots)               false
//	LETHE_REDIS_TLS_CA_FILE  a PEM bundle to trust instead (implies TLS) none
func ClientFromEnv(log *zap.Logger) (redis.UniversalClient, error) {
	addrs := os.Getenv("LETHE_REDIS_ADDRS")
	if addrs == "" {
		addrs = "127.0.0.1:6379"
	}
	opts := &redis.UniversalOptions{
		Addrs:    strings.Split(addrs, ","),
		Username: os.Getenv("LETHE_REDIS_USERNAME"),
		Password: os.Getenv("LETHE_REDIS_PASSWORD"),
	}
	opts.IsClusterMode = len(opts.Addrs) > 1
	tc, err := tlsenv.FromEnv("LETHE_REDIS_TLS", "LETHE_REDIS_TLS_CA_FILE")
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	opts.TLSConfig = tc
	if log != nil {
		log.Info("redis client", zap.String("redis", addrs), zap.String("redis_username", opts.Username),
			zap.Bool("redis_password", opts.Password != ""), zap.Bool("redis_tls", opts.TLSConfig != nil))
	}
	return redis.NewUniversalClient(opts), nil
}

// Check is the readiness check of client: PING must answer.
func Check(client redis.UniversalClient) metrics.Check {
	return metrics.Check{Name: "redis", Fn: func(ctx context.Context) error { return client.Ping(ctx).Err() }}
}
