// Command standalone runs all of Lethe in one process on embedded components: a kfake
// Kafka cluster, the Qdrant emulator, redis-server (or miniredis), gofakes3 with a
// versioned bucket and the directory audit store, with the intake, the four deleters and
// the aggregator wired exactly as the separate services are.
//
// With -demo it seeds a demo tenant whose customer has data in all five stores (legacy
// session-only chunks included) beside other customers, submits an erasure over HTTP,
// shows per-store progress, re-checks every store, and prints the receipt as one JSON
// line on stdout. It exits 0 only if the receipt is COMPLETE, the customer is gone from
// every store and every other customer's data is intact. Without -demo it serves the
// intake API until interrupted.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	demo     bool
	dataDir  string
	httpAddr string
	verbose  bool
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("standalone", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.BoolVar(&o.demo, "demo", false, "seed a demo tenant, erase one customer, print the receipt and exit")
	fs.StringVar(&o.dataDir, "data", "", "directory for the audit store, redis and logs (default: a new temporary directory)")
	fs.StringVar(&o.httpAddr, "http", "", "intake listen address (default $LETHE_HTTP_ADDR or 127.0.0.1:8080; -demo: a free port)")
	fs.BoolVar(&o.verbose, "v", false, "write service logs to stderr instead of the data directory")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := standalone(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "lethe standalone: %v\n", err)
		return 1
	}
	return 0
}

// app is the running standalone process.
type app struct {
	stack     *stack
	inventory *inventory.Inventory
	key       subject.Key
	intake    *intake.Service
	stores    map[string]deletion.Store // by kind
	baseURL   string
	dataDir   string
	log       *zap.Logger
	cancel    context.CancelFunc
	group     *errgroup.Group
	closers   []func()
}

func standalone(ctx context.Context, o options, stdout, stderr io.Writer) error {
	a, err := start(ctx, o, stderr)
	if err != nil {
		return err
	}
	if !o.demo {
		<-ctx.Done()
		return a.stop()
	}
	err = a.demo(ctx, stdout, stderr)
	return errors.Join(err, a.stop())
}

// start starts the embedded components and every service.
func start(ctx context.Context, o options, stderr io.Writer) (_ *app, err error) {
	a := &app{}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	if o.dataDir == "" {
		dir, err := os.MkdirTemp("", "lethe-standalone-")
		if err != nil {
			return nil, err
		}
		o.dataDir = dir
		if o.demo {
			a.closers = append(a.closers, func() { os.RemoveAll(dir) })
		}
	}
	a.dataDir = o.dataDir
	if o.httpAddr == "" {
		o.httpAddr = os.Getenv("LETHE_HTTP_ADDR")
		if o.demo {
			o.httpAddr = "127.0.0.1:0"
		} else if o.httpAddr == "" {
			o.httpAddr = "127.0.0.1:8080"
		}
	}
	if a.key, err = loadKey(stderr); err != nil {
		return nil, err
	}
	if a.log, err = newLogger(o, stderr); err != nil {
		return nil, err
	}
	a.inventory = inventory.Reference()
	if f := os.Getenv("LETHE_INVENTORY"); f != "" {
		if a.inventory, err = inventory.Load(f); err != nil {
			return nil, err
		}
	}
	policy, err := intake.PolicyFromEnv()
	if err != nil {
		return nil, err
	}
	st, err := startStack(ctx, o.dataDir)
	if err != nil {
		return nil, err
	}
	a.stack = st
	a.closers = append(a.closers, st.Close)
	prod, err := st.Broker.NewProducer()
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, prod.Close)

	log, inv := a.log, a.inventory
	a.intake = &intake.Service{Key: a.key, Inventory: inv, Producer: prod, Store: st.Audit, Policy: policy, Log: log.With(zap.String("service", "intake"))}
	a.stores = map[string]deletion.Store{
		inventory.KindQdrant:   qdrantstore.New(st.Qdrant),
		inventory.KindRedis:    redisstore.New(st.Redis),
		inventory.KindDataset:  datasetstore.New(st.S3, filepath.Join(o.dataDir, "datasets")),
		inventory.KindAuditLog: auditlog.NewVerifier(st.Audit),
	}
	groups := []service.Group{
		{Name: "lethe-intake", Topics: []string{event.TopicIntake}, Handler: a.intake.HandleIntake},
		{Name: "lethe-aggregator", Topics: []string{event.TopicRequested, event.TopicStoreDone},
			Handler: (&aggregator.Aggregator{Store: st.Audit, Producer: prod, Log: log.With(zap.String("service", "aggregator"))}).Handle},
	}
	for _, d := range []struct{ kind, name string }{
		{inventory.KindQdrant, "qdrant-deleter"}, {inventory.KindRedis, "redis-deleter"},
		{inventory.KindDataset, "dataset-deleter"}, {inventory.KindAuditLog, "audit-verifier"},
	} {
		w := &worker.Worker{Inventory: inv, Stores: map[string]deletion.Store{d.kind: a.stores[d.kind]}, Producer: prod, Log: log.With(zap.String("service", d.name))}
		groups = append(groups, service.Group{Name: "lethe-" + d.name, Topics: []string{event.TopicRequested}, Handler: w.Handle})
	}

	l, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		return nil, fmt.Errorf("intake listener: %w", err)
	}
	a.baseURL = "http://" + l.Addr().String()
	srv := &http.Server{Handler: a.intake.Handler(), ReadHeaderTimeout: 5 * time.Second}

	runCtx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	g, gctx := errgroup.WithContext(runCtx)
	a.group = g
	for _, grp := range groups {
		g.Go(func() error {
			return consumer.Run(gctx, consumer.Config{Broker: st.Broker, Group: grp.Name, Topics: grp.Topics, Log: log.With(zap.String("group", grp.Name))}, grp.Handler)
		})
	}
	g.Go(func() error {
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		return srv.Close()
	})
	fmt.Fprintf(stderr, "lethe standalone: intake on %s, kafka %v, qdrant emulator, %s, gofakes3 (versioned bucket %s), audit store in %s\n",
		a.baseURL, st.Broker.Brokers, st.RedisKind, DatasetBucket, filepath.Join(o.dataDir, "audit"))
	return a, nil
}

// stop stops every service, waits for them and releases the components.
func (a *app) stop() error {
	a.cancel()
	err := a.group.Wait()
	a.close()
	return err
}

func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	if a.log != nil {
		a.log.Sync()
	}
}

// loadKey reads the pseudonym key from the environment, or generates a throwaway one when
// none is configured (and says so). A configured key that is too short is an error.
func loadKey(stderr io.Writer) (subject.Key, error) {
	if os.Getenv("LETHE_HMAC_KEY") != "" || os.Getenv("LETHE_HMAC_KEY_FILE") != "" {
		return subject.KeyFromEnv()
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	id := fmt.Sprintf("ephemeral-%x", secret[:4])
	fmt.Fprintf(stderr, "lethe standalone: no LETHE_HMAC_KEY set; generated a throwaway pseudonym key %q (pseudonyms will not match after a restart)\n", id)
	return subject.NewKey(id, secret)
}

func newLogger(o options, stderr io.Writer) (*zap.Logger, error) {
	var w zapcore.WriteSyncer = zapcore.AddSync(stderr)
	if !o.verbose && o.demo {
		f, err := os.OpenFile(filepath.Join(o.dataDir, "lethe.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		w = zapcore.AddSync(f)
	}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, w, zap.InfoLevel)), nil
}
