package redisstore

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/calls"
)

func TestRedisPipelineIsOneCall(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer c.Close()
	c.AddHook(callCounter{})
	get := calls.Total.WithLabelValues(calls.Redis, "", "get")
	pipe := calls.Total.WithLabelValues(calls.Redis, "", "pipeline")
	g0, p0 := testutil.ToFloat64(get), testutil.ToFloat64(pipe)
	ctx := context.Background()
	c.Get(ctx, "k")
	c.Pipelined(ctx, func(p redis.Pipeliner) error { p.Get(ctx, "a"); p.Get(ctx, "b"); return nil })
	if d := testutil.ToFloat64(get) - g0; d != 1 {
		t.Errorf("get counted %v times, want 1 (the pipeline's gets are not commands of their own)", d)
	}
	if d := testutil.ToFloat64(pipe) - p0; d != 1 {
		t.Errorf("pipeline counted %v times, want 1", d)
	}
}
