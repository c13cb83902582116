// Package service is the shared skeleton of Lethe's service binaries: load the
// configuration, print it masked, connect a producer, create the topics or (with
// LETHE_CREATE_TOPICS=false) wait for them to be provisioned, and run consumer groups until
// SIGINT or SIGTERM.
package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/config"
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
)

// Topics are every topic Lethe uses, dead-letter topics included.
var Topics = []string{
	event.TopicIntake, event.TopicRequested, event.TopicStoreDone, event.TopicCompleted, event.TopicOverdue,
	event.TopicSuppressions, event.TopicReappeared, event.TopicStoreFound,
	event.DLQ(event.TopicIntake), event.DLQ(event.TopicRequested), event.DLQ(event.TopicStoreDone), event.DLQ(event.TopicStoreFound),
}

// topicWait is how long a service with topic creation off waits for its topics: the
// provisioning job runs beside it.
const topicWait = 2 * time.Minute

// Env is what a service's build function gets.
type Env struct {
	Config   *config.Config
	Log      *zap.Logger
	Producer *kgo.Client
	Metrics  *metrics.Metrics
	Sealer   *envelope.Sealer // seals and opens the identifiers on erasure.requested
	// Registry is the Schema Registry ($LETHE_SCHEMA_REGISTRY_URL) with the framings of
	// $LETHE_FRAMING; nil without one.
	Registry *schemareg.Codec
}

// Spec is what a service runs: its consumer groups, other work (such as an HTTP server)
// and the readiness checks of its stores. The broker check is always included.
type Spec struct {
	Groups []Group
	Run    func(ctx context.Context) error
	Checks []metrics.Check
}

// Group is one consumer group a service runs.
type Group struct {
	Name    string // consumer group id
	Topics  []string
	Handler consumer.Handler
	Redact  func(*kgo.Record) ([]byte, bool) // the dead-letter value of a record and whether it is redacted (consumer.Config.Redact); nil: the record's own
	// InFlight is how many records of one partition the group handles at once
	// (consumer.Config.InFlight); 0 or 1: one at a time, in order.
	InFlight int
}

// Main runs service: build its Spec with the Env, serve metrics and health on
// LETHE_METRICS_ADDR, run everything until SIGINT or SIGTERM, and exit non-zero on error.
// It is the whole of a service's main function.
func Main(service string, build func(ctx context.Context, env Env) (Spec, error)) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, service, build); err != nil {
		fmt.Fprintf(os.Stderr, "lethe %s: %v\n", service, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, service string, build func(ctx context.Context, env Env) (Spec, error)) error {
	cfg, err := config.FromEnv(service)
	if err != nil {
		return err
	}
	maxInFlight, err := MaxInFlightFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	log, err := cfg.Logger()
	if err != nil {
		return err
	}
	defer log.Sync()
	log.Info("starting", zap.Stringer("config", cfg))

	prod, err := cfg.Broker.NewProducer()
	if err != nil {
		return err
	}
	defer prod.Close()
	if err := cfg.Broker.PrepareTopics(ctx, prod, topicWait, Topics...); err != nil {
		return err
	}
	defer cfg.Close()
	sealer, err := cfg.Sealer(ctx)
	if err != nil {
		return err
	}
	registry, err := schemareg.FromEnv(ctx, os.Getenv)
	if err != nil {
		return err
	}
	env := Env{Config: cfg, Log: log, Producer: prod, Metrics: metrics.New(), Sealer: sealer, Registry: registry}
	spec, err := build(ctx, env)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, grp := range spec.Groups {
		h := registry.Reframe(schemareg.OwnTopics(), grp.Handler)
		g.Go(func() error {
			return consumer.Run(gctx, consumer.Config{Broker: cfg.Broker, Group: grp.Name, Topics: grp.Topics, Log: log, Metrics: env.Metrics, Redact: grp.Redact, InFlight: grp.InFlight, MaxInFlight: maxInFlight}, h)
		})
	}
	if spec.Run != nil {
		g.Go(func() error { return spec.Run(gctx) })
	}
	checks := append([]metrics.Check{{Name: "kafka", Fn: prod.Ping}}, spec.Checks...)
	g.Go(func() error { return env.Metrics.Serve(gctx, cfg.MetricsAddr, checks...) })
	log.Info("serving metrics and health", zap.String("addr", cfg.MetricsAddr))
	err = g.Wait()
	log.Info("stopped", zap.Error(err))
	return err
}

// AuditCheck is the readiness check of the audit table: a read that must answer.
func AuditCheck(s auditlog.Store) metrics.Check {
	return metrics.Check{Name: "audit", Fn: func(ctx context.Context) error {
		_, err := s.GetRequest(ctx, "readiness-probe")
		if errors.Is(err, auditlog.ErrNotFound) {
			return nil
		}
		return err
	}}
}
