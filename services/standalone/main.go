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
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/discovery"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/pii"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	demo     bool
	seed     bool
	dataDir  string
	httpAddr string
	verbose  bool
	addrs    embedded.Addrs
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("standalone", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.BoolVar(&o.demo, "demo", false, "seed a demo tenant, erase one customer, print the receipt and exit")
	fs.BoolVar(&o.seed, "seed", false, "serve with the demo tenant seeded (its customers' ids are printed)")
	fs.StringVar(&o.dataDir, "data", "", "directory for the audit store, redis and logs (default: a new temporary directory)")
	fs.StringVar(&o.httpAddr, "http", "", "intake listen address (default $LETHE_HTTP_ADDR or 127.0.0.1:8080; -demo: a free port)")
	fs.BoolVar(&o.verbose, "v", false, "write service logs to stderr instead of the data directory")
	addrFlags(fs, &o.addrs)
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

// app is the running standalone process: the embedded system and the demo's view of it.
type app struct {
	*embedded.System
	log *zap.Logger
}

func standalone(ctx context.Context, o options, stdout, stderr io.Writer) error {
	a, err := start(ctx, o, stderr)
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

// start starts the embedded system with the process's configuration.
func start(ctx context.Context, o options, stderr io.Writer) (*app, error) {
	if o.dataDir == "" && !o.demo {
		dir, err := os.MkdirTemp("", "lethe-standalone-")
		if err != nil {
			return nil, err
		}
		o.dataDir = dir
	}
	if o.httpAddr == "" && !o.demo {
		o.httpAddr = os.Getenv("LETHE_HTTP_ADDR")
		if o.httpAddr == "" {
			o.httpAddr = "127.0.0.1:8080"
		}
	}
	resolveAddrs(&o.addrs, o.demo)
	framings, err := framingsFromEnv()
	if err != nil {
		return nil, err
	}
	key, err := loadKey(stderr)
	if err != nil {
		return nil, err
	}
	log, err := newLogger(o, stderr)
	if err != nil {
		return nil, err
	}
	inv := inventory.Reference()
	if f := os.Getenv("LETHE_INVENTORY"); f != "" {
		if inv, err = inventory.Load(f); err != nil {
			return nil, err
		}
	} else if o.demo || o.seed {
		inv = demoInventory(inv)
	}
	dopts, err := discovery.FromEnv()
	if err != nil {
		return nil, err
	}
	if o.demo || o.seed {
		dopts.Tenants = append(dopts.Tenants, demoTenant)
	}
	policy, err := intake.PolicyFromEnv()
	if err != nil {
		return nil, err
	}
	authn, err := loadAuth(stderr)
	if err != nil {
		return nil, err
	}
	limiter, err := auth.LimiterFromEnv()
	if err != nil {
		return nil, err
	}
	var kek *envelope.KEK // a throwaway one unless configured
	if os.Getenv("LETHE_KEK") != "" || os.Getenv("LETHE_KEK_FILE") != "" {
		if kek, err = envelope.KEKFromEnv(); err != nil {
			return nil, err
		}
	}
	mac, chainKey, err := loadIntegrity(stderr)
	if err != nil {
		return nil, err
	}
	windows, err := intake.WindowsFromEnv()
	if err != nil {
		return nil, err
	}
	// The demo erases and exits: nothing would run its sweeps, so its keys go at the receipt.
	var sweeps []time.Duration
	var retain time.Duration
	if !o.demo {
		if sweeps, retain, err = aggregator.SweepsFromEnv(os.Getenv); err != nil {
			return nil, err
		}
	}
	hosts, origins := intake.AccessFromEnv()
	sys, err := embedded.Start(ctx, embedded.Options{Key: key, DataDir: o.dataDir, HTTPAddr: o.httpAddr, Inventory: inv, Policy: policy, Log: log,
		Auth: authn, Limiter: limiter, KEK: kek, MAC: mac, ChainKey: chainKey, Sweeps: sweeps, Retain: retain, Windows: windows, RequireApproval: authn != nil && !authn.Disabled(),
		Discovery: dopts, Addrs: o.addrs, Framings: framings, AllowedHosts: hosts, AllowedOrigins: origins})
	if err != nil {
		return nil, err
	}
	printStack(stderr, sys, !o.demo)
	return &app{System: sys, log: log}, nil
}

// loadAuth configures authentication from the environment when credentials are
// configured there; otherwise the standalone intake accepts every caller and says so.
func loadAuth(stderr io.Writer) (*auth.Authenticator, error) {
	a, err := auth.FromEnvIfSet()
	if a == nil && err == nil {
		fmt.Fprintln(stderr, "lethe standalone: no LETHE_TOKENS or JWT settings; the intake accepts unauthenticated requests on loopback only")
	}
	return a, err
}

// loadIntegrity reads the record MAC key and the receipt chain key from the environment
// when they are set. Without LETHE_MAC_KEY the system signs its records with a throwaway
// key; without LETHE_CHAIN_KEY receipts are chained by SHA-256 alone. Both are said.
func loadIntegrity(stderr io.Writer) (mac, chain *integrity.Ring, err error) {
	if mac, err = integrity.FromEnv("LETHE_MAC_KEY", "mac1"); err != nil {
		return nil, nil, err
	}
	if mac == nil {
		fmt.Fprintln(stderr, "lethe standalone: no LETHE_MAC_KEY set; records between the services are signed with a throwaway key (records left unconsumed at a restart are refused)")
	}
	if chain, err = integrity.FromEnv("LETHE_CHAIN_KEY", "chain1"); err != nil {
		return nil, nil, err
	}
	if chain == nil {
		fmt.Fprintln(stderr, "lethe standalone: no LETHE_CHAIN_KEY set; receipts are chained without a keyed MAC (lethectl audit verify-chain --keyed cannot vouch for them)")
	}
	return mac, chain, nil
}

// loadKey reads the pseudonym key from the environment, or generates a throwaway one when
// none is configured (and says so). A configured key that is too short is an error.
func loadKey(stderr io.Writer) (subject.Key, error) {
	if os.Getenv("LETHE_HMAC_KEY") != "" || os.Getenv("LETHE_HMAC_KEY_FILE") != "" {
		return subject.KeyFromEnv()
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

func newLogger(o options, stderr io.Writer) (*zap.Logger, error) {
	var w zapcore.WriteSyncer = zapcore.AddSync(stderr)
	if !o.verbose && o.demo {
		f, err := os.CreateTemp("", "lethe-demo-*.log")
		if err != nil {
			return nil, err
		}
		w = zapcore.AddSync(f)
	}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(pii.Core(zapcore.NewCore(enc, w, zap.InfoLevel))), nil
}
