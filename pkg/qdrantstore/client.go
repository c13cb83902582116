package qdrantstore

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/qdrant/go-client/qdrant"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/lethe-erasure/lethe/pkg/calls"
	"github.com/lethe-erasure/lethe/pkg/metrics"
)

// Settings declare the Qdrant a deleter connects to.
type Settings struct {
	Addr   string `env:"LETHE_QDRANT_ADDR" default:"127.0.0.1:6334" doc:"Qdrant gRPC host:port."`
	APIKey string `env:"LETHE_QDRANT_API_KEY" secret:"true" doc:"Qdrant API key; empty: none."`
}

// Client connects to the Qdrant s names and logs where (never the API key) on log, which
// may be nil.
func (s Settings) Client(log *zap.Logger) (*qdrant.Client, error) {
	if log != nil {
		log.Info("qdrant client", zap.String("qdrant", s.Addr), zap.Bool("qdrant_api_key", s.APIKey != ""))
	}
	return Dial(s.Addr, s.APIKey)
}

// Dial connects to Qdrant at addr (host:port) over gRPC. Reconnects back off at most 1 s,
// less than a deleter's retry budget: with gRPC's default (up to 120 s) a Qdrant back after
// a long outage stayed unreachable for the whole budget of a re-driven request.
func Dial(addr, apiKey string) (*qdrant.Client, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("qdrant: LETHE_QDRANT_ADDR: %w", err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("qdrant: LETHE_QDRANT_ADDR port: %w", err)
	}
	reconnect := grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
		MinConnectTimeout: 5 * time.Second,
	})
	return qdrant.NewClient(&qdrant.Config{
		Host:                   host,
		Port:                   p,
		APIKey:                 apiKey,
		SkipCompatibilityCheck: true,
		GrpcOptions:            []grpc.DialOption{reconnect, grpc.WithChainUnaryInterceptor(countCalls)},
	})
}

// Check is the readiness check of client: Qdrant's health check must answer.
func Check(client *qdrant.Client) metrics.Check {
	return metrics.Check{Name: "qdrant", Fn: func(ctx context.Context) error {
		_, err := client.HealthCheck(ctx)
		return err
	}}
}

// countCalls is a unary client interceptor that counts each Qdrant RPC by method.
func countCalls(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	calls.Count(calls.Qdrant, "", method[strings.LastIndexByte(method, '/')+1:])
	return invoker(ctx, method, req, reply, cc, opts...)
}
