// Package service is the shared skeleton of Lethe's service binaries: load the
// configuration, print it masked, create the topics, connect a producer, and run consumer
// groups until SIGINT or SIGTERM.
package service

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/config"
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// Topics are every topic Lethe uses, dead-letter topics included.
var Topics = []string{
	event.TopicIntake, event.TopicRequested, event.TopicStoreDone, event.TopicCompleted,
	event.DLQ(event.TopicIntake), event.DLQ(event.TopicRequested), event.DLQ(event.TopicStoreDone),
}

// Env is what a service's run function gets.
type Env struct {
	Config   *config.Config
	Log      *zap.Logger
	Producer *kgo.Client
}

// Group is one consumer group a service runs.
type Group struct {
	Name    string // consumer group id
	Topics  []string
	Handler consumer.Handler
}

// Main runs service: build groups with the Env, run them (and extra, if any) until a
// signal, and exit non-zero on error. It is the whole of a service's main function.
func Main(service string, build func(ctx context.Context, env Env) ([]Group, func(ctx context.Context) error, error)) {
	if err := run(service, build); err != nil {
		fmt.Fprintf(os.Stderr, "lethe %s: %v\n", service, err)
		os.Exit(1)
	}
}

func run(service string, build func(ctx context.Context, env Env) ([]Group, func(ctx context.Context) error, error)) error {
	cfg, err := config.FromEnv(service)
	if err != nil {
		return err
	}
	log, err := cfg.Logger()
	if err != nil {
		return err
	}
	defer log.Sync()
	log.Info("starting", zap.Stringer("config", cfg))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	prod, err := cfg.Broker.NewProducer()
	if err != nil {
		return err
	}
	defer prod.Close()
	if err := broker.EnsureTopics(ctx, prod, cfg.Broker.Partitions, Topics...); err != nil {
		return err
	}
	env := Env{Config: cfg, Log: log, Producer: prod}
	groups, extra, err := build(ctx, env)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, grp := range groups {
		g.Go(func() error {
			return consumer.Run(gctx, consumer.Config{Broker: cfg.Broker, Group: grp.Name, Topics: grp.Topics, Log: log}, grp.Handler)
		})
	}
	if extra != nil {
		g.Go(func() error { return extra(gctx) })
	}
	err = g.Wait()
	log.Info("stopped", zap.Error(err))
	return err
}
