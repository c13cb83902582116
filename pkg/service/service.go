// Package service is the shared skeleton of Lethe's service binaries: load the declared
// configuration, print it masked, connect a producer, create the topics or (with
// LETHE_CREATE_TOPICS=false) wait for them to be provisioned, and run consumer groups until
// SIGINT or SIGTERM.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/config"
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
	"github.com/lethe-erasure/lethe/pkg/version"
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

// Config is the declared configuration of a service binary: what every service reads and
// the service's own settings C.
type Config[C any] struct {
	config.Settings
	Consumers Consumers
	Service   C
}

// Consumers declare how much work a service's consumer groups hold at once.
type Consumers struct {
	MaxInFlight int `env:"LETHE_INFLIGHT_MAX" default:"256" min:"1" max:"65536" doc:"Records a consumer group handles at once over all the partitions it owns (the others wait, not running)."`
}

// InFlight declares how many records of one partition a group handles at once.
type InFlight struct {
	PerPartition int `env:"LETHE_INFLIGHT" default:"64" min:"1" max:"1024" doc:"Records of one partition a deleter or the aggregator handles at once (one request's records still one at a time, in order)."`
}

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

// Build builds a service's Spec from its Env and its own settings.
type Build[C any] func(ctx context.Context, env Env, cfg C) (Spec, error)

// Main runs service: load its Config from the environment, build its Spec with the Env,
// serve metrics and health on LETHE_METRICS_ADDR, run everything until SIGINT or SIGTERM,
// and exit non-zero on error. With --print-config it prints the configuration, secrets
// masked, and exits 0. It is the whole of a service's main function.
func Main[C any](service string, build Build[C]) {
	os.Exit(Exec(service, os.Args[1:], os.Stdout, os.Stderr, build))
}

// Exec is Main with the arguments and outputs given; it returns the exit code: 0, 1 when
// the service fails, 2 on a bad argument or setting.
func Exec[C any](service string, args []string, stdout, stderr io.Writer, build Build[C]) int {
	fs := flag.NewFlagSet(service, flag.ContinueOnError)
	fs.SetOutput(stderr)
	printConfig := fs.Bool("print-config", false, "print the resolved configuration, secrets masked, and exit")
	printVersion := fs.Bool("version", false, "print the version and commit, and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *printVersion {
		fmt.Fprintln(stdout, version.Get())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lethe %s: unexpected arguments %q\n", service, fs.Args())
		return 2
	}
	var cfg Config[C]
	if err := envconf.FromEnv(&cfg); err != nil {
		fmt.Fprintf(stderr, "lethe %s: configuration: %v\n", service, err)
		return 2
	}
	if *printConfig {
		if err := envconf.Print(stdout, cfg); err != nil {
			return 1
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, service, cfg, build); err != nil {
		fmt.Fprintf(stderr, "lethe %s: %v\n", service, err)
		return 1
	}
	return 0
}

// Settings is a log field of every variable v declares, secrets masked.
func Settings(v any) zap.Field {
	return zap.Object("settings", zapcore.ObjectMarshalerFunc(func(enc zapcore.ObjectEncoder) error {
		seen := map[string]bool{}
		for _, x := range envconf.Vars(v) {
			if !seen[x.Name] {
				seen[x.Name] = true
				enc.AddString(x.Name, x.Value)
			}
		}
		return nil
	}))
}

func run[C any](ctx context.Context, service string, cfg Config[C], build Build[C]) error {
	c, err := config.New(service, cfg.Settings)
	if err != nil {
		return err
	}
	log, err := c.Logger()
	if err != nil {
		return err
	}
	defer log.Sync()
	log.Info("starting", zap.Stringer("config", c), Settings(cfg))
	prod, err := c.Broker.NewProducer()
	if err != nil {
		return err
	}
	defer prod.Close()
	if err := c.Broker.PrepareTopics(ctx, prod, topicWait, Topics...); err != nil {
		return err
	}
	defer c.Close()
	sealer, err := c.Sealer(ctx)
	if err != nil {
		return err
	}
	registry, err := cfg.Registry.Codec(ctx)
	if err != nil {
		return err
	}
	env := Env{Config: c, Log: log, Producer: prod, Metrics: metrics.New(), Sealer: sealer, Registry: registry}
	spec, err := build(ctx, env, cfg.Service)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	RunGroups(gctx, g, spec.Groups, GroupRun{Broker: c.Broker, Log: log, Metrics: env.Metrics, Registry: registry, MaxInFlight: cfg.Consumers.MaxInFlight})
	if spec.Run != nil {
		g.Go(func() error { return spec.Run(gctx) })
	}
	checks := append([]metrics.Check{{Name: "kafka", Fn: prod.Ping}}, spec.Checks...)
	if c.Pprof {
		env.Metrics.Handle("/debug/pprof/", http.HandlerFunc(pprof.Index))
		env.Metrics.Handle("/debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	}
	g.Go(func() error {
		return envconf.ListenError(env.Metrics.Serve(gctx, c.MetricsAddr, checks...), "LETHE_METRICS_ADDR")
	})
	log.Info("serving metrics and health", zap.String("addr", c.MetricsAddr))
	err = g.Wait()
	log.Info("stopped", zap.Error(err))
	return err
}

// GroupRun is how RunGroups runs consumer groups.
type GroupRun struct {
	Broker      broker.Config
	Log         *zap.Logger
	Metrics     *metrics.Metrics
	Registry    *schemareg.Codec // reframes the records of Lethe's own topics; nil: none
	MaxInFlight int              // consumer.Config.MaxInFlight of every group
}

// RunGroups runs each group in g until ctx ends. Records of Lethe's own topics reach the
// handlers in single-object encoding whatever their framing; the intake reads
// registry-framed intake records itself (resolving schemas it never released).
func RunGroups(ctx context.Context, g *errgroup.Group, groups []Group, r GroupRun) {
	for _, grp := range groups {
		h := r.Registry.Reframe(schemareg.OwnTopics(), grp.Handler)
		g.Go(func() error {
			return consumer.Run(ctx, consumer.Config{Broker: r.Broker, Group: grp.Name, Topics: grp.Topics, Log: r.Log,
				Metrics: r.Metrics, Redact: grp.Redact, InFlight: grp.InFlight, MaxInFlight: r.MaxInFlight}, h)
		})
	}
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
