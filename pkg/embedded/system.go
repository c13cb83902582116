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
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/discovery"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/event"
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
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// Options configure Start. Key is required; the rest have defaults.
type Options struct {
	Key      subject.Key
	DataDir  string // audit store, redis files and datasets; default a new temporary directory, removed by Stop
	HTTPAddr string // intake listen address; default 127.0.0.1:0; loopback only without Auth
	// AllowedHosts and AllowedOrigins: see intake.Service.
	AllowedHosts, AllowedOrigins []string
	Inventory                    *inventory.Inventory // default the reference inventory
	Policy                       intake.Policy        // default intake.DefaultPolicy()
	Log                          *zap.Logger          // default no logging
	Instances                    int                  // consumer instances per deleter group; default 1
	Auth                         *auth.Authenticator  // intake authentication; nil: none
	Limiter                      *auth.Limiter        // per-tenant submission rate; nil: unlimited
	KEK                          *envelope.KEK        // seals identifiers on erasure.requested (keys under DataDir/keys); nil: a throwaway one
	// MAC authenticates the records the services hand one another (package integrity);
	// nil: a throwaway one, so records left unconsumed at a stop are refused after a
	// restart. ChainKey MACs the receipt chain; nil: receipts are chained by SHA-256
	// alone, since a key nobody keeps could verify nothing.
	MAC      *integrity.Ring
	ChainKey *integrity.Ring
	Addrs    Addrs    // where the embedded components listen; empty: free ports
	External External // running components to use instead of embedded ones
	// Framings says how the records Lethe writes are framed (default single-object
	// encoding everywhere); every consumer reads both framings whatever it says.
	Framings schemareg.Framings
	// Deleters run beside the built-in ones (qdrant, redis, dataset, audit_log), for kinds
	// those do not serve. Each is given the system's stack only through its Store.
	Deleters []Deleter
	// Sweeps and Retain are the aggregator's re-verification delays and key retention
	// (aggregator.Aggregator); none: the key is destroyed at the receipt. SweepEvery is how
	// often the schedule is read (default 10s); Now is the aggregator's clock (default the
	// system's).
	Sweeps     []time.Duration
	Retain     time.Duration
	SweepEvery time.Duration
	Now        func() time.Time
	// Windows are the cancellation windows before execution; RequireApproval makes TENANT
	// requests wait for a second principal with the approver role. The workflow's records
	// and legal holds are kept in DataDir/workflow.json (a write-ahead log directory).
	Windows         intake.Windows
	RequireApproval bool
	// Discovery configures the inventory discovery of every deleter whose store discovers
	// (served on the intake address as GET and POST /discovery); zero: on request only.
	Discovery discovery.Options
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

	cancel  context.CancelFunc
	group   *errgroup.Group
	closers []func()
}

// Start starts the components and every service. Stop releases them.
func Start(ctx context.Context, o Options) (_ *System, err error) {
	sys := &System{Key: o.Key, Inventory: o.Inventory, Metrics: metrics.New(), MAC: o.MAC, ChainKey: o.ChainKey}
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
		sys.closers = append(sys.closers, func() { os.RemoveAll(dir) })
	}
	sys.DataDir = o.DataDir
	if sys.Inventory == nil {
		sys.Inventory = inventory.Reference()
	}
	if o.Policy == nil {
		o.Policy = intake.DefaultPolicy()
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = "127.0.0.1:0"
	}
	if err := intake.CheckBind(o.HTTPAddr, o.Auth); err != nil {
		return nil, err
	}
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	st, err := StartStackUsing(ctx, o.DataDir, o.Addrs, o.External)
	if err != nil {
		return nil, err
	}
	sys.Stack = st
	if d, ok := st.Audit.(*auditlog.DirStore); ok {
		wal.LogRepairs(log, "audit", d.Repairs())
	}
	sys.closers = append(sys.closers, st.Close)
	st.Registry.Framings = o.Framings
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
	signed := &integrity.Signer{Producer: prod, Ring: sys.MAC, Types: map[string]*event.Type{event.TopicRequested: event.Request}}
	sys.Intake = &intake.Service{Key: o.Key, Inventory: sys.Inventory, Producer: signed, Store: st.Audit, Policy: o.Policy, Log: log.With(zap.String("service", "intake")), Metrics: m, Auth: o.Auth, Limiter: o.Limiter, Sealer: sys.Sealer, Registry: st.Registry}
	wf, err := startWorkflow(sys.Intake, o, st, log)
	if err != nil {
		return nil, err
	}
	sys.closers = append(sys.closers, func() { wf.Close() })
	deleters := append([]Deleter{
		{"qdrant-deleter", qdrantstore.Kind, qdrantstore.New(st.Qdrant)},
		{"redis-deleter", redisstore.Kind, redisstore.New(st.Redis)},
		{"dataset-deleter", datasetstore.Kind, datasetstore.New(st.S3, filepath.Join(o.DataDir, "datasets"), datasetstore.WithSummaries(o.Key))},
		{"audit-verifier", auditlog.Kind, auditlog.NewVerifier(st.Audit)},
	}, o.Deleters...)
	if sys.Stores, err = checkDeleters(sys.Inventory, deleters); err != nil {
		return nil, err
	}
	sys.Aggregator = &aggregator.Aggregator{
		Store:     st.Audit,
		Producer:  prod,
		Log:       log.With(zap.String("service", "aggregator")),
		Metrics:   m,
		Sealer:    sys.Sealer,
		Registry:  st.Registry,
		Inventory: sys.Inventory,
		Sweeps:    o.Sweeps,
		Retain:    o.Retain,
		Now:       o.Now,
		MAC:       sys.MAC,
		ChainKey:  sys.ChainKey,
	}
	groups := []service.Group{
		{Name: "lethe-intake", Topics: []string{event.TopicIntake}, Handler: sys.Intake.HandleIntake, Redact: sys.Intake.Redact},
		{Name: "lethe-aggregator", Topics: []string{event.TopicRequested, event.TopicStoreDone, event.TopicStoreFound}, Handler: sys.Aggregator.Handle, InFlight: worker.DefaultInFlight},
	}
	for _, d := range deleters {
		if r := discovery.For(d.Kind, d.Store, sys.Inventory, o.Discovery, m, log.With(zap.String("service", d.Name))); r != nil {
			sys.Discovery = append(sys.Discovery, r)
		}
	}
	for _, d := range deleters {
		w := &worker.Worker{
			Inventory: sys.Inventory,
			Stores:    map[string]deletion.Store{d.Kind: d.Store},
			Producer:  prod,
			Log:       log.With(zap.String("service", d.Name)),
			Metrics:   m,
			Sealer:    sys.Sealer,
			MAC:       sys.MAC,
			Registry:  st.Registry,
			Discovery: sys.Discovery,
			Batching:  worker.DefaultBatching,
		}
		for range max(o.Instances, 1) {
			groups = append(groups, service.Group{Name: "lethe-" + d.Name, Topics: []string{event.TopicRequested}, Handler: w.Handle, InFlight: worker.DefaultInFlight})
		}
	}

	sys.Intake.AllowedHosts, sys.Intake.AllowedOrigins = o.AllowedHosts, o.AllowedOrigins
	l, err := net.Listen("tcp", o.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("intake listener: %w", err)
	}
	sys.BaseURL = "http://" + l.Addr().String()
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
	// Records of Lethe's own topics reach the handlers in single-object encoding whatever
	// their framing; intake reads registry-framed records itself (resolving schemas it
	// never released).
	for _, grp := range groups {
		h := st.Registry.Reframe(schemareg.OwnTopics(), grp.Handler)
		g.Go(func() error {
			return consumer.Run(gctx, consumer.Config{Broker: st.Broker, Group: grp.Name, Topics: grp.Topics, Log: log.With(zap.String("group", grp.Name)), Metrics: m, Redact: grp.Redact, InFlight: grp.InFlight}, h)
		})
	}
	watchdog := &aggregator.Watchdog{Store: st.Audit, Producer: prod, Interval: 5 * time.Second, Log: log.With(zap.String("service", "aggregator")), Metrics: m, Registry: st.Registry}
	g.Go(func() error { return watchdog.Run(gctx) })
	g.Go(func() error { return sys.Aggregator.Run(gctx, cmp.Or(o.SweepEvery, 10*time.Second)) })
	g.Go(func() error { sys.Intake.RunSchedule(gctx, time.Second); return nil })
	g.Go(func() error { return sys.Discovery.Run(gctx) })
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
