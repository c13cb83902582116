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
	"os"
	"os/signal"
	"slices"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/config"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/envelope/kmskek"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/pii"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	demo        bool
	seed        bool
	printConfig bool
	dataDir     string
	httpAddr    string
	verbose     bool
	addrs       embedded.Addrs
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("standalone", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.BoolVar(&o.demo, "demo", false, "seed a demo tenant, erase one customer, print the receipt and exit")
	fs.BoolVar(&o.seed, "seed", false, "serve with the demo tenant seeded (its customers' ids are printed)")
	fs.BoolVar(&o.printConfig, "print-config", false, "print the resolved configuration, secrets masked, and exit")
	fs.StringVar(&o.dataDir, "data", "", "directory for the audit store, redis and logs (default: a new temporary directory)")
	fs.StringVar(&o.httpAddr, "http", "", "intake listen address (default $LETHE_HTTP_ADDR or 127.0.0.1:8080; -demo: a free port)")
	fs.BoolVar(&o.verbose, "v", false, "write service logs to stderr instead of the data directory")
	addrFlags(fs, &o.addrs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := loadConfig(o)
	if err != nil {
		fmt.Fprintf(stderr, "lethe standalone: configuration: %v\n", err)
		return 2
	}
	if o.printConfig {
		if err := envconf.Print(stdout, cfg); err != nil {
			return 1
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := standalone(ctx, o, cfg, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "lethe standalone: %v\n", err)
		return 1
	}
	return 0
}

// app is the running standalone process: the embedded system and the demo's view of it.
type app struct {
	*embedded.System
	log     *zap.Logger
	outside []string // the inventory entries suggested for what the erasure found outside it
}

func standalone(ctx context.Context, o options, cfg embedded.StandaloneConfig, stdout, stderr io.Writer) error {
	a, err := start(ctx, o, cfg, stderr)
	if err != nil {
		return err
	}
	if !o.demo {
		if o.seed {
			if err := a.seed(ctx); err != nil {
				return errors.Join(err, a.Stop())
			}
			fmt.Fprintf(stderr, "lethe standalone: seeded tenant %q; erase a customer with\n  lethectl submit --server %s --tenant %s --subject %s --session %s --session %s --wait\n",
				demoTenant, a.BaseURL, demoTenant, target.id, target.sessions[0], target.sessions[1])
		}
		<-ctx.Done()
		return a.Stop()
	}
	err = a.demo(ctx, stdout, stderr)
	return errors.Join(err, a.Stop())
}

// loadConfig loads the standalone's declared configuration from the environment and
// applies the flags: -http and the component addresses win over their variables. Without
// -demo, unset component addresses take their real counterparts' ports (serveAddrs).
func loadConfig(o options) (embedded.StandaloneConfig, error) {
	var cfg embedded.StandaloneConfig
	if err := envconf.FromEnv(&cfg); err != nil {
		return cfg, err
	}
	if o.httpAddr != "" {
		cfg.Services.Intake.HTTPAddr = o.httpAddr
	}
	resolveAddrs(&cfg.Addrs, o.addrs, o.demo)
	return cfg, nil
}

// start starts the embedded system with the process's configuration.
func start(ctx context.Context, o options, cfg embedded.StandaloneConfig, stderr io.Writer) (*app, error) {
	opts, err := systemOptions(o, cfg, stderr)
	if err != nil {
		return nil, err
	}
	if opts.Auth, err = loadAuth(cfg.Services.Intake.Auth, stderr); err != nil {
		return nil, err
	}
	sys, err := embedded.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	printStack(stderr, sys, !o.demo)
	return &app{System: sys, log: opts.Log}, nil
}

// systemOptions resolves cfg into the embedded system's options: keys (throwaway ones
// where none is configured, said on stderr), the inventory, the logger and the services'
// Config (servicesConfig). Authentication is resolved apart (loadAuth).
func systemOptions(o options, cfg embedded.StandaloneConfig, stderr io.Writer) (embedded.Options, error) {
	if o.dataDir == "" && !o.demo {
		dir, err := os.MkdirTemp("", "lethe-standalone-")
		if err != nil {
			return embedded.Options{}, err
		}
		o.dataDir = dir
	}
	httpAddr := o.httpAddr
	if !o.demo {
		httpAddr = cfg.Services.Intake.HTTPAddr
	}
	key, err := loadKey(cfg.Keys.HMAC, stderr)
	if err != nil {
		return embedded.Options{}, err
	}
	log, err := newLogger(o, cfg.Process.LogLevel, stderr)
	if err != nil {
		return embedded.Options{}, err
	}
	inv := inventory.Reference()
	if f := cfg.Process.Inventory; f != "" {
		if inv, err = inventory.Load(f); err != nil {
			return embedded.Options{}, err
		}
	} else if o.demo || o.seed {
		inv = demoInventory(inv)
	}
	services := servicesConfig(o, cfg)
	var kek *envelope.KEK // a throwaway one unless configured
	if cfg.Keys.KEK.Set() {
		if kek, err = kmskek.Ring(context.Background(), cfg.Keys.KEK); err != nil {
			return embedded.Options{}, err
		}
	}
	mac, chainKey, err := loadIntegrity(cfg.Keys, stderr)
	if err != nil {
		return embedded.Options{}, err
	}
	return embedded.Options{Key: key, DataDir: o.dataDir, HTTPAddr: httpAddr, Inventory: inv, Log: log, KEK: kek,
		MAC: mac, ChainKey: chainKey, Addrs: cfg.Addrs, Config: &services}, nil
}

// servicesConfig is the services' configuration the standalone runs: cfg's, with the demo
// tenant among discovery's known tenants for -demo and -seed.
func servicesConfig(o options, cfg embedded.StandaloneConfig) embedded.Config {
	services := cfg.Services
	if o.demo || o.seed {
		services.Deleter.Discovery.Tenants = append(slices.Clone(services.Deleter.Discovery.Tenants), demoTenant)
	}
	return services
}

// loadAuth builds authentication when credentials are configured; otherwise the
// standalone intake accepts every caller and says so.
func loadAuth(s auth.Settings, stderr io.Writer) (*auth.Authenticator, error) {
	a, err := s.AuthenticatorIfSet()
	if a == nil && err == nil {
		fmt.Fprintln(stderr, "lethe standalone: no LETHE_TOKENS or JWT settings; the intake accepts unauthenticated requests on loopback only")
	}
	return a, err
}

// loadIntegrity builds the record MAC key and the receipt chain key when they are set.
// Without LETHE_MAC_KEY the system signs its records with a throwaway key; without
// LETHE_CHAIN_KEY receipts are chained by SHA-256 alone. Both are said.
func loadIntegrity(k config.Keys, stderr io.Writer) (mac, chain *integrity.Ring, err error) {
	if mac, err = k.MAC.Ring(); err != nil {
		return nil, nil, err
	}
	if mac == nil {
		fmt.Fprintln(stderr, "lethe standalone: no LETHE_MAC_KEY set; records between the services are signed with a throwaway key (records left unconsumed at a restart are refused)")
	}
	if chain, err = k.Chain.Ring(); err != nil {
		return nil, nil, err
	}
	if chain == nil {
		fmt.Fprintln(stderr, "lethe standalone: no LETHE_CHAIN_KEY set; receipts are chained without a keyed MAC (lethectl audit verify-chain --keyed cannot vouch for them)")
	}
	return mac, chain, nil
}

// loadKey builds the configured pseudonym key, or generates a throwaway one when none is
// configured (and says so). A configured key that is too short is an error.
func loadKey(s subject.KeySettings, stderr io.Writer) (subject.Key, error) {
	if s.Set() {
		return s.Key()
	}
	key, err := ephemeralKey(rand.Reader)
	if err == nil {
		fmt.Fprintf(stderr, "lethe standalone: no LETHE_HMAC_KEY set; generated a throwaway pseudonym key %q (pseudonyms will not match after a restart)\n", key.ID())
	}
	return key, err
}

// ephemeralKey draws a key's id and its secret separately from r: the id is printed and
// stored in receipts, so it holds nothing of the secret.
func ephemeralKey(r io.Reader) (subject.Key, error) {
	var id [4]byte
	secret := make([]byte, 32)
	if _, err := io.ReadFull(r, id[:]); err != nil {
		return subject.Key{}, err
	}
	if _, err := io.ReadFull(r, secret); err != nil {
		return subject.Key{}, err
	}
	return subject.NewKey(fmt.Sprintf("ephemeral-%x", id), secret)
}

// newLogger writes the services' logs at level: to stderr with -v or when serving, else
// (-demo) to a temporary file.
func newLogger(o options, level string, stderr io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("LETHE_LOG_LEVEL: %w", err)
	}
	var w zapcore.WriteSyncer = zapcore.AddSync(stderr)
	if !o.verbose && o.demo {
		f, err := os.CreateTemp("", "lethe-demo-*.log")
		if err != nil {
			return nil, err
		}
		w = zapcore.AddSync(f)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	enc := zapcore.NewJSONEncoder(ec)
	return zap.New(pii.Core(zapcore.NewCore(enc, w, lvl))), nil
}
