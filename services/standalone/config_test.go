package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"go.uber.org/zap/zapcore"

	"github.com/lethe-erasure/lethe/pkg/catalog"
	"github.com/lethe-erasure/lethe/pkg/config"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/envelope/kmskek"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// root is the repository, from this package's directory.
const root = "../.."

// environmentReader matches a direct read of the process environment.
var environmentReader = regexp.MustCompile(`\bos\.(Getenv|LookupEnv|Environ)\(|\bsyscall\.Getenv\(`)

// Outside package envconf no service code reads the environment: every LETHE_ variable a
// service reads is a declared setting. The packages that set up tests (testenv and the
// conformance suites) read their own LETHE_TEST_* switches, and a webhook store reads the
// variable its inventory entry names (its secret_env), which is no Lethe setting.
func TestNoEnvironmentReadsOutsideTheLoader(t *testing.T) {
	allowed := []string{"pkg/envconf/", "pkg/testenv/", "pkg/qdrantfake/qdranttest/", "pkg/qdrantfake/edgediff/", "pkg/deletion/deletiontest/", "pkg/webhookstore/locators.go"}
	files := 0
	for _, dir := range []string{"pkg", "services"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			if slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(rel, a) }) {
				return nil
			}
			files++
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(b), "\n") {
				if environmentReader.MatchString(line) {
					t.Errorf("%s:%d reads the environment: declare the setting and load it with envconf\n\t%s", rel, i+1, strings.TrimSpace(line))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 100 {
		t.Fatalf("read %d files: is the tree there?", files)
	}
}

// replaced are the variables the services read that the standalone does not, by what
// replaces them there.
var replaced = map[string]string{
	"broker.Settings":           "the embedded Kafka (kfake)",
	"config.Stores":             "the directory stores under the data directory",
	"config.Metrics":            "the intake's address, which serves /metrics, /healthz and /readyz",
	"qdrantstore.Settings":      "the Qdrant emulator",
	"redisstore.Settings":       "redis-server or miniredis",
	"s3env.Settings":            "the embedded S3 (gofakes3)",
	"postgresstore.Settings":    "nothing: the standalone runs no postgres deleter",
	"webhookstore.Settings":     "nothing: the standalone runs no webhook deleter",
	"LETHE_SCHEMA_REGISTRY_URL": "the embedded Schema Registry (srfake)",
}

// separate are the services that run as binaries of their own.
func separate() []catalog.Service {
	return slices.DeleteFunc(slices.Clone(catalog.Services), func(s catalog.Service) bool { return s.Name == "standalone" })
}

// standaloneReads reports whether the standalone reads the variable name.
func standaloneReads(name string) bool {
	return catalog.Reads(catalog.Service{Config: embedded.StandaloneConfig{}}, name)
}

// samples set each variable the standalone reads to a value other than its default, with
// the variables it needs beside it. A file's sample is written by the test.
func samples(t *testing.T) map[string]map[string]string {
	t.Helper()
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ref, err := os.ReadFile(filepath.Join(root, "pkg", "inventory", "reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	inv := regexp.MustCompile(`(?m)^version: .*$`).ReplaceAll(ref, []byte(`version: "sample-1"`))
	kek := func(b byte) string {
		k := sha256.Sum256([]byte{b})
		return base64.StdEncoding.EncodeToString(k[:])
	}
	secret := func(b byte) string { return string(rune(b)) + "-sample-secret-0123456789abcdefghijklmnop" }
	one := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	kms, cur, old := kmsKEKs(t)
	out := map[string]map[string]string{
		"LETHE_KEK_KMS_CIPHERTEXT": one("LETHE_KEK_KMS_CIPHERTEXT", cur, "LETHE_KMS_ENDPOINT", kms),
		"LETHE_KEK_KMS_OLD":        one("LETHE_KEK", kek('k'), "LETHE_KEK_KMS_OLD", "kek0:"+old, "LETHE_KMS_ENDPOINT", kms),
		"LETHE_KMS_ENDPOINT":       one("LETHE_KEK_KMS_CIPHERTEXT", cur, "LETHE_KMS_ENDPOINT", kms),
		"LETHE_INVENTORY":          one("LETHE_INVENTORY", file("inventory.yaml", string(inv))),
		"LETHE_LOG_LEVEL":          one("LETHE_LOG_LEVEL", "debug"),
		"LETHE_PPROF":              one("LETHE_PPROF", "true"),
		"LETHE_HMAC_KEY":           one("LETHE_HMAC_KEY", secret('h')),
		"LETHE_HMAC_KEY_FILE":      one("LETHE_HMAC_KEY_FILE", file("hmac", secret('f')+"\n")),
		"LETHE_HMAC_KEY_ID":        one("LETHE_HMAC_KEY", secret('h'), "LETHE_HMAC_KEY_ID", "k9"),
		"LETHE_KEK":                one("LETHE_KEK", kek('k')),
		"LETHE_KEK_FILE":           one("LETHE_KEK_FILE", file("kek", kek('f'))),
		"LETHE_KEK_ID":             one("LETHE_KEK", kek('k'), "LETHE_KEK_ID", "kek9"),
		"LETHE_KEK_OLD":            one("LETHE_KEK", kek('k'), "LETHE_KEK_OLD", "kek0:"+kek('o')),
		"LETHE_MAC_KEY":            one("LETHE_MAC_KEY", secret('m')),
		"LETHE_MAC_KEY_FILE":       one("LETHE_MAC_KEY_FILE", file("mac", secret('n'))),
		"LETHE_MAC_KEY_ID":         one("LETHE_MAC_KEY", secret('m'), "LETHE_MAC_KEY_ID", "mac9"),
		"LETHE_MAC_KEY_OLD":        one("LETHE_MAC_KEY", secret('m'), "LETHE_MAC_KEY_OLD", "mac0:"+secret('o')),
		"LETHE_CHAIN_KEY":          one("LETHE_CHAIN_KEY", secret('c')),
		"LETHE_CHAIN_KEY_FILE":     one("LETHE_CHAIN_KEY_FILE", file("chain", secret('d'))),
		"LETHE_CHAIN_KEY_ID":       one("LETHE_CHAIN_KEY", secret('c'), "LETHE_CHAIN_KEY_ID", "chain9"),
		"LETHE_CHAIN_KEY_OLD":      one("LETHE_CHAIN_KEY", secret('c'), "LETHE_CHAIN_KEY_OLD", "chain0:"+secret('p')),
		// LETHE_FRAMING names the registry: the separate services then need its URL.
		"LETHE_FRAMING": one("LETHE_FRAMING", "registry,erasure.completed=single-object", "LETHE_SCHEMA_REGISTRY_URL", "http://127.0.0.1:8081"),
	}
	for name, v := range map[string]string{
		"LETHE_HTTP_ADDR": "127.0.0.1:18080", "LETHE_SLA": "GDPR=24h,APPI=1h", "LETHE_CANCEL_WINDOW": "GDPR=1h,tenant:acme=0s",
		"LETHE_RATE_LIMIT": "5/s,burst=7", "LETHE_ALLOWED_HOSTS": "lethe.example", "LETHE_ALLOWED_ORIGINS": "https://app.example",
		"LETHE_WORKFLOW_FILE": filepath.Join(dir, "workflow"), "LETHE_TOKENS_FILE": filepath.Join(dir, "tokens.yaml"),
		"LETHE_TOKENS": "ops:" + strings.Repeat("ab", 32) + ":*", "LETHE_JWKS_FILE": filepath.Join(dir, "jwks.json"),
		"LETHE_JWKS_URL": "https://idp.example/jwks", "LETHE_JWKS_REFRESH": "5m", "LETHE_JWT_HS256_SECRET": secret('s'),
		"LETHE_JWT_HS256_SECRET_FILE": filepath.Join(dir, "hs256"), "LETHE_JWT_ISSUER": "https://idp.example",
		"LETHE_JWT_AUDIENCE": "lethe", "LETHE_JWT_TENANT_CLAIM": "orgs", "LETHE_AUTH_DISABLED": "true",
		"LETHE_SLA_TARGET": "5m", "LETHE_SWEEPS": "1h,2d", "LETHE_RETAIN": "10d", "LETHE_INFLIGHT": "7", "LETHE_INFLIGHT_MAX": "96",
		"LETHE_ALLOW_UNSEALED": "true", "LETHE_BATCH_MAX": "16", "LETHE_BATCH_WAIT": "5ms", "LETHE_BATCH_RUNNING": "2",
		"LETHE_DISCOVERY_INTERVAL": "2h", "LETHE_DISCOVERY_FIELDS": "kunde,email", "LETHE_DISCOVERY_SAMPLE": "50",
		"LETHE_DISCOVERY_TENANTS": "acme,globex", "LETHE_DATASET_DIR": filepath.Join(dir, "datasets"), "LETHE_DATASET_SUMMARIES": "off",
		"LETHE_DATASET_MAX_RECORD": "8MiB", "LETHE_DATASET_MAX_DECOMPRESSED": "1GiB", "LETHE_DATASET_MAX_PARQUET": "32MiB",
		"LETHE_STANDALONE_KAFKA_ADDR": "127.0.0.1:19092", "LETHE_STANDALONE_REGISTRY_ADDR": "127.0.0.1:18081",
		"LETHE_STANDALONE_QDRANT_ADDR": "127.0.0.1:16334", "LETHE_STANDALONE_REDIS_ADDR": "127.0.0.1:16379",
		"LETHE_STANDALONE_S3_ADDR": "127.0.0.1:19000",
	} {
		out[name] = one(name, v)
	}
	return out
}

// setenv sets every variable the catalog declares to env's value, or empty.
func setenv(t *testing.T, all []envconf.Var, env map[string]string) {
	t.Helper()
	for _, v := range all {
		t.Setenv(v.Name, env[v.Name])
	}
}

// field is the value of the variable name in the configuration cfg (a pointer to a
// struct), found by its declared field path.
func field(t *testing.T, cfg any, name string) any {
	t.Helper()
	for _, v := range envconf.Vars(cfg) {
		if v.Name == name {
			rv := reflect.ValueOf(cfg).Elem()
			for _, f := range strings.Split(v.Field, ".") {
				rv = rv.FieldByName(f)
			}
			return rv.Interface()
		}
	}
	t.Fatalf("%T declares no %s", cfg, name)
	return nil
}

// load is svc's configuration loaded from the environment, as its binary loads it.
func load(t *testing.T, svc catalog.Service) any {
	t.Helper()
	cfg := reflect.New(reflect.TypeOf(svc.Config)).Interface()
	if err := envconf.FromEnv(cfg); err != nil {
		t.Fatalf("%s: %v", svc.Name, err)
	}
	return cfg
}

// resolved is what the standalone resolves from the environment when serving: the
// options of its embedded system and the services' configuration that system runs with.
func resolved(t *testing.T) (embedded.Options, embedded.Config) {
	t.Helper()
	o := options{dataDir: t.TempDir()}
	cfg, err := loadConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := systemOptions(o, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return opts, opts.ServiceConfig()
}

// TestStandaloneHonoursEveryVariable enumerates every LETHE_ variable any service reads,
// from the declared settings. Each one the standalone does not read is replaced there by an
// embedded component (replaced). Each one it reads is set alone (with what it needs beside
// it) to a value other than its default, and then means the same to the standalone as to
// every separate service that reads it: a service's setting reaches the configuration the
// embedded system runs its constructor with, equal to what that service loads; a key, the
// inventory and the log level resolve to what the services resolve; the components'
// addresses reach the system's options.
func TestStandaloneHonoursEveryVariable(t *testing.T) {
	all, err := catalog.Vars()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 80 {
		t.Fatalf("the catalog declares %d variables: are the services listed?", len(all))
	}
	samples := samples(t)
	used := map[string]bool{}
	for _, v := range all {
		if !standaloneReads(v.Name) {
			why := replaced[v.Owner] + replaced[v.Name]
			if why == "" {
				t.Errorf("%s (%s) is read by a service but not by the standalone, and nothing says what replaces it there", v.Name, v.Owner)
			}
			used[v.Owner], used[v.Name] = true, true
			continue
		}
		env, ok := samples[v.Name]
		if !ok {
			t.Errorf("%s: no sample value: add one to prove the standalone honours it", v.Name)
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			setenv(t, all, nil)
			_, defaults := resolved(t)
			setenv(t, all, env)
			opts, services := resolved(t)
			readers := 0
			for _, svc := range separate() {
				if !catalog.Reads(svc, v.Name) {
					continue
				}
				readers++
				sv := load(t, svc)
				if slices.ContainsFunc(envconf.Vars(&services), func(x envconf.Var) bool { return x.Name == v.Name }) {
					got, want := field(t, &services, v.Name), field(t, sv, v.Name)
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s: the standalone runs with %#v, %s with %#v", v.Name, got, svc.Name, want)
					}
					if reflect.DeepEqual(got, field(t, &defaults, v.Name)) {
						t.Errorf("%s: the sample left the default: choose another", v.Name)
					}
					continue
				}
				sameResolved(t, svc.Name, opts, reflect.ValueOf(sv).Elem().FieldByName("Settings").Interface().(config.Settings))
			}
			if standaloneOnly := strings.HasPrefix(v.Name, "LETHE_STANDALONE_"); standaloneOnly {
				if got := field(t, &opts.Addrs, v.Name); got != env[v.Name] {
					t.Errorf("%s: the system listens at %v, want %s", v.Name, got, env[v.Name])
				}
			} else if readers == 0 {
				t.Errorf("%s: the standalone reads it, no separate service does", v.Name)
			}
		})
	}
	for k := range replaced {
		if !used[k] {
			t.Errorf("replaced names %s, which is no longer a setting the standalone leaves out", k)
		}
	}
}

// sameResolved checks that the keys, the inventory and the log level the standalone
// resolved are what the service resolves from its settings s.
func sameResolved(t *testing.T, name string, opts embedded.Options, s config.Settings) {
	t.Helper()
	if s.Keys.HMAC.Set() {
		key, err := s.Keys.HMAC.Key()
		if err != nil || key.ID() != opts.Key.ID() || key.Pseudonym("acme", "alice") != opts.Key.Pseudonym("acme", "alice") {
			t.Errorf("%s: pseudonym key %s, the standalone's %s (%v)", name, key, opts.Key, err)
		}
	}
	if s.Keys.KEK.Set() {
		kek, err := kmskek.Ring(context.Background(), s.Keys.KEK)
		if err != nil || opts.KEK == nil || kek.CurrentID() != opts.KEK.CurrentID() || !slices.Equal(kek.IDs(), opts.KEK.IDs()) {
			t.Errorf("%s: KEK %v, the standalone's %v (%v)", name, kek, opts.KEK, err)
		}
	}
	sameRing(t, name+": record MAC key", s.Keys.MAC.Ring, opts.MAC)
	sameRing(t, name+": chain key", s.Keys.Chain.Ring, opts.ChainKey)
	inv, err := config.LoadInventory(s.Process.Inventory)
	if err != nil || inv.Version != opts.Inventory.Version {
		t.Errorf("%s: inventory %v, the standalone's %s (%v)", name, inv, opts.Inventory.Version, err)
	}
	lvl, err := zapcore.ParseLevel(s.Process.LogLevel)
	if err != nil || !opts.Log.Core().Enabled(lvl) || lvl > zapcore.DebugLevel && opts.Log.Core().Enabled(lvl-1) {
		t.Errorf("%s: log level %s, not the standalone's (%v)", name, s.Process.LogLevel, err)
	}
}

// sameRing checks that the standalone's ring has the ring's ids and secrets.
func sameRing(t *testing.T, what string, ring func() (*integrity.Ring, error), got *integrity.Ring) {
	t.Helper()
	want, err := ring()
	if err != nil || want == nil {
		return // unset: the standalone's is a throwaway one or none
	}
	id, mac := want.Sum("sample", []byte("x"))
	if got == nil || !slices.Equal(want.IDs(), got.IDs()) || got.Check("sample", id, []byte("x"), mac) != nil {
		t.Errorf("%s: %v, the standalone's %v", what, want, got)
	}
}

// The standalone runs what it resolves: started with the settings the old wiring dropped,
// its services' constructors got them, and its defaults are the separate services'.
func TestStandaloneRunsItsConfiguration(t *testing.T) {
	all, err := catalog.Vars()
	if err != nil {
		t.Fatal(err)
	}
	setenv(t, all, map[string]string{"LETHE_SWEEPS": "1h,2d", "LETHE_RETAIN": "10d", "LETHE_SLA_TARGET": "5m", "LETHE_INFLIGHT": "7",
		"LETHE_INFLIGHT_MAX": "96", "LETHE_BATCH_MAX": "16", "LETHE_BATCH_WAIT": "5ms", "LETHE_ALLOW_UNSEALED": "true",
		"LETHE_DATASET_SUMMARIES": "off", "LETHE_RATE_LIMIT": "off", "LETHE_LOG_LEVEL": "error"})
	o := options{demo: true, verbose: true, dataDir: t.TempDir()}
	cfg, err := loadConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	a, err := start(t.Context(), o, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	if got := a.Config.Aggregator; !slices.Equal(got.Sweeps, []time.Duration{time.Hour, 48 * time.Hour}) || time.Duration(got.Retain) != 240*time.Hour ||
		got.SLATarget != 5*time.Minute || got.SweepEvery != 0 || got.WatchdogEvery != 0 {
		t.Errorf("aggregator configuration %+v", got)
	}
	if !slices.Equal(a.Aggregator.Sweeps, []time.Duration{time.Hour, 48 * time.Hour}) || a.Aggregator.Retain != 240*time.Hour {
		t.Errorf("aggregator sweeps %v, retain %v", a.Aggregator.Sweeps, a.Aggregator.Retain)
	}
	if a.Specs.Aggregator.Groups[0].InFlight != 7 || len(a.Specs.Deleters) != 4 {
		t.Errorf("aggregator in flight %d, %d deleters", a.Specs.Aggregator.Groups[0].InFlight, len(a.Specs.Deleters))
	}
	for _, d := range a.Specs.Deleters {
		if d.Groups[0].InFlight != 7 {
			t.Errorf("%s: in flight %d", d.Groups[0].Name, d.Groups[0].InFlight)
		}
	}
	if c := a.Config.Deleter; c.Batch.Max != 16 || c.Batch.Wait != 5*time.Millisecond || !c.AllowUnsealed || a.Config.Consumers.MaxInFlight != 96 ||
		a.Config.Dataset.Summaries != "off" || a.Intake.Limiter != nil {
		t.Errorf("services' configuration %+v", a.Config)
	}
	// Without settings, the standalone runs every service at the separate services' defaults.
	setenv(t, all, nil)
	if cfg, err = loadConfig(o); err != nil {
		t.Fatal(err)
	}
	if got, want := servicesConfig(options{}, cfg), embedded.DefaultConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("the standalone's defaults\n%+v\nthe services'\n%+v", got, want)
	}
	for _, svc := range separate() {
		sv := load(t, svc)
		for _, v := range envconf.Vars(sv) {
			if standaloneReads(v.Name) && slices.ContainsFunc(envconf.Vars(&cfg.Services), func(x envconf.Var) bool { return x.Name == v.Name }) &&
				!reflect.DeepEqual(field(t, sv, v.Name), field(t, &cfg.Services, v.Name)) {
				t.Errorf("%s: default %v in %s, %v in the standalone", v.Name, field(t, sv, v.Name), svc.Name, field(t, &cfg.Services, v.Name))
			}
		}
	}
}

// kmsKEKs returns moto's endpoint and the ciphertexts of two key-encryption keys that its
// KMS generated, for kek1 (the default id) and kek0, with AWS credentials for moto set.
func kmsKEKs(t *testing.T) (endpoint, kek1, kek0 string) {
	t.Helper()
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	endpoint = testenv.Moto(t)
	ctx := context.Background()
	cl, err := kmskek.Client(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	k, err := cl.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	gen := func(id string) string {
		b, err := kmskek.Generate(ctx, cl, *k.KeyMetadata.KeyId, id)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	return endpoint, gen("kek1"), gen("kek0")
}
