package embedded

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/config"
	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/discovery"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/wal"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// Config is the declared configuration of the services run in one process: each service's
// own settings, which mean what they mean to the separate services.
type Config struct {
	Intake     intake.Config
	Aggregator aggregator.Config
	Deleter    service.DeleterConfig
	Dataset    datasetstore.Settings
	Framing    schemareg.FramingSettings
	Consumers  service.Consumers
}

// DefaultConfig is Config at its declared defaults: what the separate services resolve
// from an empty environment.
func DefaultConfig() Config {
	var c Config
	if err := envconf.Defaults(&c); err != nil {
		panic(err) // the declared defaults parse: a test proves it
	}
	return c
}

// Options configure Start. Key is required; the rest have defaults.
type Options struct {
	Key      subject.Key
	DataDir  string // audit store, redis files, datasets and the workflow; default a new temporary directory, removed by Stop
	HTTPAddr string // intake listen address, in place of Config.Intake.HTTPAddr; default 127.0.0.1:0; loopback only without Auth
	// Config is the services' configuration; nil: DefaultConfig(). Config.Intake's
	// workflow file defaults to DataDir/workflow.json (a JSON file of earlier versions there
	// is migrated) and Config.Dataset's directory to DataDir/datasets.
	Config    *Config
	Inventory *inventory.Inventory // default the reference inventory
	Log       *zap.Logger          // default no logging
	Instances int                  // consumer instances per deleter group; default 1
	Auth      *auth.Authenticator  // intake authentication; nil: none
	KEK       *envelope.KEK        // seals identifiers on erasure.requested (keys under DataDir/keys); nil: a throwaway one
	// MAC authenticates the records the services hand one another (package integrity);
	// nil: a throwaway one, so records left unconsumed at a stop are refused after a
	// restart. ChainKey MACs the receipt chain; nil: receipts are chained by SHA-256
	// alone, since a key nobody keeps could verify nothing.
	MAC      *integrity.Ring
	ChainKey *integrity.Ring
	Addrs    Addrs    // where the embedded components listen; empty: free ports
	External External // running components to use instead of embedded ones
	// Stack is a running stack to use instead of starting one (Restart passes its
	// system's); the System then releases it on Stop.
	Stack *Stack
	// Deleters run beside the built-in ones (qdrant, redis, dataset, audit_log), for kinds
	// those do not serve. Each is given the system's stack only through its Store.
	Deleters []Deleter
	// Now is the aggregator's clock (default the system's).
	Now func() time.Time
}

// Deleter is one deleter service run in process: its name (its consumer group is
// "lethe-"+Name), the inventory kind it serves, and its store.
type Deleter struct {
	Name, Kind string
	Store      deletion.Store
}

// System is a running Lethe: the components and every service.
type System struct {
	Stack     *Stack
	Inventory *inventory.Inventory
	Key       subject.Key
	Intake    *intake.Service
	Stores    map[string]deletion.Store // by inventory kind
	BaseURL   string                    // of the intake HTTP API, which also serves /metrics, /readyz and /discovery
	DataDir   string
	Metrics   *metrics.Metrics
	Sealer    *envelope.Sealer
	// MAC signs and checks the records between the services; ChainKey MACs the receipt
	// chain (nil without Options.ChainKey).
	MAC      *integrity.Ring
	ChainKey *integrity.Ring
	// Aggregator joins the reports and runs the schedule (sweeps, shredding, physical erasure).
	Aggregator *aggregator.Aggregator
	Discovery  discovery.Set // one runner per kind whose store discovers
	// Config is the configuration the services run with, Options' defaults applied.
	Config Config
	// Specs are what each service's constructor returned: the groups and loops running.
	Specs Specs

	opts    Options
	cancel  context.CancelFunc
	group   *errgroup.Group
	closers []func()
	owned   []func() // the stack and a temporary data directory: Restart hands them on
}

// ServiceConfig is the configuration Start runs the services with: Config (DefaultConfig
// when nil) with the intake listening on HTTPAddr (default 127.0.0.1:0), its workflow file
// defaulting to DataDir/workflow.json and the dataset directory to DataDir/datasets.
func (o Options) ServiceConfig() Config {
	cfg := DefaultConfig()
	if o.Config != nil {
		cfg = *o.Config
	}
	cfg.Intake.HTTPAddr = cmp.Or(o.HTTPAddr, "127.0.0.1:0")
	if o.DataDir != "" {
		cfg.Intake.WorkflowFile = cmp.Or(cfg.Intake.WorkflowFile, filepath.Join(o.DataDir, "workflow.json"))
		cfg.Dataset.Dir = cmp.Or(cfg.Dataset.Dir, filepath.Join(o.DataDir, "datasets"))
	}
	return cfg
}

// Specs are the Specs of the services a System runs.
type Specs struct {
	Intake, Aggregator service.Spec
	Deleters           []service.Spec // the built-in deleters', then Options.Deleters', in order
}

// Start starts the components and every service. Each service is built by the
// constructor its own binary uses (intake.New, service.NewDeleter, aggregator.New) with
// Config; Stop releases them.
func Start(ctx context.Context, o Options) (_ *System, err error) {
	sys := &System{Key: o.Key, Inventory: o.Inventory, Metrics: metrics.New(), MAC: o.MAC, ChainKey: o.ChainKey, opts: o}
	m := sys.Metrics
	defer func() {
		if err != nil {
			sys.close()
		}
	}()
	if o.DataDir == "" {
		if o.DataDir, err = os.MkdirTemp("", "lethe-"); err != nil {
			return nil, err
		}
		dir := o.DataDir
		sys.owned = append(sys.owned, func() { os.RemoveAll(dir) })
	}
	sys.DataDir = o.DataDir
	if sys.Inventory == nil {
		sys.Inventory = inventory.Reference()
	}
	cfg := o.ServiceConfig()
	sys.Config = cfg
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	st := o.Stack
	if st == nil {
		if st, err = StartStackUsing(ctx, o.DataDir, o.Addrs, o.External); err != nil {
			return nil, err
		}
		sys.owned = append(sys.owned, st.Close)
		if d, ok := st.Audit.(*auditlog.DirStore); ok {
			wal.LogRepairs(log, "audit", d.Repairs())
		}
	}
	sys.Stack = st
	st.Registry.Framings = cfg.Framing.Framings.With(true)
	prod, err := st.Broker.NewProducer()
	if err != nil {
		return nil, err
	}
	sys.closers = append(sys.closers, prod.Close)
	if sys.Sealer, err = newSealer(o.KEK, filepath.Join(o.DataDir, "keys")); err != nil {
		return nil, err
	}
	sys.closers = append(sys.closers, func() { sys.Sealer.Keys.(*envelope.DirKeyStore).Close() })
	wal.LogRepairs(log, "keys", sys.Sealer.Keys.(*envelope.DirKeyStore).Repairs())
	if sys.MAC == nil {
		if sys.MAC, err = throwawayRing("ephemeral"); err != nil {
			return nil, err
		}
	}
	// What each service's binary resolves from the settings every service reads, here from
	// the stack.
	resolved := &config.Config{Service: "standalone", Broker: st.Broker, Inventory: sys.Inventory, Key: o.Key, KEK: sys.Sealer.KEK,
		MAC: sys.MAC, ChainKey: sys.ChainKey}
	env := func(name string) service.Env {
		return service.Env{Config: resolved, Log: log.With(zap.String("service", name)), Producer: prod, Metrics: m, Sealer: sys.Sealer, Registry: st.Registry}
	}

	wf, err := workflow.OpenFile(cfg.Intake.WorkflowFile)
	if err != nil {
		return nil, err
	}
	wal.LogRepairs(log, "workflow", wf.Repairs())
	sys.closers = append(sys.closers, func() { wf.Close() })
	sys.Intake, sys.Specs.Intake, err = intake.New(cfg.Intake, env("intake"), intake.Deps{Store: st.Audit, Workflow: wf, Auth: o.Auth})
	if err != nil {
		return nil, err
	}

	deleters := append([]Deleter{
		{"qdrant-deleter", qdrantstore.Kind, qdrantstore.New(st.Qdrant)},
		{"redis-deleter", redisstore.Kind, redisstore.New(st.Redis)},
		{"dataset-deleter", datasetstore.Kind, cfg.Dataset.Store(st.S3, o.Key)},
		{"audit-verifier", auditlog.Kind, auditlog.NewVerifier(st.Audit)},
	}, o.Deleters...)
	if sys.Stores, err = checkDeleters(sys.Inventory, deleters); err != nil {
		return nil, err
	}
	for _, d := range deleters {
		spec, r, err := service.NewDeleter(d.Name, d.Kind, cfg.Deleter, env(d.Name), d.Store)
		if err != nil {
			return nil, fmt.Errorf("embedded: %w", err)
		}
		if r != nil {
			sys.Discovery = append(sys.Discovery, r)
		}
		sys.Specs.Deleters = append(sys.Specs.Deleters, spec)
	}
	sys.Aggregator, sys.Specs.Aggregator = aggregator.New(cfg.Aggregator, env("aggregator"), st.Audit)
	sys.Aggregator.Now = o.Now

	l, err := net.Listen("tcp", cfg.Intake.HTTPAddr)
	if err != nil {
		return nil, envconf.ListenError(fmt.Errorf("intake listener: %w", err), "LETHE_HTTP_ADDR")
	}
	sys.BaseURL = "http://" + l.Addr().String()
	sys.Intake.Discovery = sys.Discovery.Reports
	mux := http.NewServeMux()
	mux.Handle("/", sys.Intake.Handler())
	mux.Handle("/discovery", sys.Intake.Operator(sys.Discovery.Handler()))
	health := m.Handler(metrics.Check{Name: "kafka", Fn: prod.Ping},
		metrics.Check{Name: "redis", Fn: func(ctx context.Context) error { return st.Redis.Ping(ctx).Err() }},
		metrics.Check{Name: "qdrant", Fn: func(ctx context.Context) error { _, err := st.Qdrant.HealthCheck(ctx); return err }},
		service.AuditCheck(st.Audit))
	mux.Handle("GET /metrics", sys.Intake.Operator(health))
	for _, p := range []string{"GET /readyz", "GET /healthz"} {
		mux.Handle(p, health)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	runCtx, cancel := context.WithCancel(context.Background())
	sys.cancel = cancel
	g, gctx := errgroup.WithContext(runCtx)
	sys.group = g
	specs := append([]service.Spec{sys.Specs.Intake, sys.Specs.Aggregator}, sys.Specs.Deleters...)
	for i, spec := range specs {
		groups := spec.Groups
		if i >= 2 {
			for range max(o.Instances, 1) - 1 {
				groups = append(groups, spec.Groups...)
			}
		}
		service.RunGroups(gctx, g, groups, service.GroupRun{Broker: st.Broker, Log: log, Metrics: m, Registry: st.Registry, MaxInFlight: cfg.Consumers.MaxInFlight})
		if spec.Run != nil {
			g.Go(func() error { return spec.Run(gctx) })
		}
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
	return sys, nil
}

// newSealer returns the sealer of identifiers over a directory key store, with kek or a
// random throwaway KEK.
func newSealer(kek *envelope.KEK, dir string) (*envelope.Sealer, error) {
	if kek == nil {
		secret := make([]byte, envelope.KeySize)
		rand.Read(secret)
		var err error
		if kek, err = envelope.NewKEK("ephemeral", map[string][]byte{"ephemeral": secret}); err != nil {
			return nil, err
		}
	}
	keys, err := envelope.NewDirKeyStore(dir)
	if err != nil {
		return nil, err
	}
	return &envelope.Sealer{KEK: kek, Keys: keys}, nil
}

// throwawayRing returns a ring of one random secret under id.
func throwawayRing(id string) (*integrity.Ring, error) {
	secret := make([]byte, integrity.MinSecretLen)
	rand.Read(secret)
	return integrity.NewRing(id, map[string][]byte{id: secret})
}

// Stop stops every service, waits for them and releases the components.
func (s *System) Stop() error {
	s.cancel()
	err := s.group.Wait()
	s.close()
	return err
}

func (s *System) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	for i := len(s.owned) - 1; i >= 0; i-- {
		s.owned[i]()
	}
}

// Restart stops s's services and starts them again with inv over the same stack, data
// directory and keys (pseudonym key, KEK, record MAC, chain key), as an operator restarts
// the services after extending the inventory. The intake listens on a new address when
// its own was a free port. s must not be used afterwards.
func (s *System) Restart(ctx context.Context, inv *inventory.Inventory) (*System, error) {
	o := s.opts
	o.Stack, o.DataDir, o.Inventory = s.Stack, s.DataDir, inv
	o.KEK, o.MAC, o.ChainKey = s.Sealer.KEK, s.MAC, s.ChainKey
	owned := s.owned
	s.owned = nil
	if err := s.Stop(); err != nil {
		for _, f := range owned {
			f()
		}
		return nil, err
	}
	sys, err := Start(ctx, o)
	if err != nil {
		for _, f := range owned {
			f()
		}
		return nil, err
	}
	sys.owned = append(owned, sys.owned...)
	return sys, nil
}

// checkDeleters validates every inventory store through the deleter of its kind, as each
// deleter service does at start, and refuses an inventory naming a kind no deleter serves:
// in one process nothing else would ever report that store. It returns the stores by kind.
func checkDeleters(inv *inventory.Inventory, deleters []Deleter) (map[string]deletion.Store, error) {
	byKind := map[string]deletion.Store{}
	var errs []error
	for _, d := range deleters {
		if _, dup := byKind[d.Kind]; dup {
			errs = append(errs, fmt.Errorf("two deleters serve kind %q", d.Kind))
		}
		byKind[d.Kind] = d.Store
		if err := deletion.ValidateStores(inv, d.Kind, d.Store); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.Name, err))
		}
	}
	for _, st := range inv.Stores {
		if _, ok := byKind[st.Kind]; !ok {
			errs = append(errs, fmt.Errorf("inventory store %q has kind %q, which no deleter here serves (add one with Options.Deleters)", st.Name, st.Kind))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	return byKind, nil
}
