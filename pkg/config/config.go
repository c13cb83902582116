// Package config declares the settings every Lethe service reads (Settings) and builds the
// clients and keys they name (Config). Each service's own settings are declared in the
// package that owns the service; docs/configuration.md lists them all. Secrets are never
// printed.
//
// AWS credentials and region come from the AWS default chain (AWS_REGION, AWS_PROFILE,
// web identity, instance roles).
package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/dynamo"
	"github.com/lethe-erasure/lethe/pkg/awsclient"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/envelope/dynamokeys"
	"github.com/lethe-erasure/lethe/pkg/envelope/kmskek"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/pii"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/wal"
	"github.com/lethe-erasure/lethe/pkg/workflow"
	wfdynamo "github.com/lethe-erasure/lethe/pkg/workflow/dynamo"
)

// Settings are the declared settings every service reads.
type Settings struct {
	Process  Process
	Kafka    broker.Settings
	Registry schemareg.Settings
	Keys     Keys
	Stores   Stores
	Metrics  Metrics
}

// Process declare what a service process reads besides its clients.
type Process struct {
	Inventory string `env:"LETHE_INVENTORY" doc:"Inventory YAML file; empty: the embedded reference inventory."`
	LogLevel  string `env:"LETHE_LOG_LEVEL" default:"info" doc:"Log level: debug, info, warn or error."`
}

// Validate checks the log level.
func (p Process) Validate() error {
	if _, err := zapcore.ParseLevel(p.LogLevel); err != nil {
		return fmt.Errorf("config: LETHE_LOG_LEVEL %q: want debug, info, warn or error", p.LogLevel)
	}
	return nil
}

// Keys declare the keys of a service.
type Keys struct {
	HMAC  subject.KeySettings
	KEK   envelope.KEKSettings
	MAC   integrity.MACSettings
	Chain integrity.ChainSettings
}

// Validate refuses a record MAC key or chain key set both as a value and as a file.
func (k Keys) Validate() error {
	return errors.Join(integrity.NotBoth("LETHE_MAC_KEY", k.MAC.Secret, k.MAC.File), integrity.NotBoth("LETHE_CHAIN_KEY", k.Chain.Secret, k.Chain.File))
}

// Stores declare the audit table and the data-key store.
type Stores struct {
	AuditTable       string `env:"LETHE_AUDIT_TABLE" doc:"DynamoDB audit table of requests, reports and receipts (the intake also keeps its workflow there); empty: the directory store of LETHE_AUDIT_DIR."`
	AuditDir         string `env:"LETHE_AUDIT_DIR" default:"data/audit" doc:"Embedded audit store directory when no table is set (one process only)."`
	AuditCreateTable bool   `env:"LETHE_AUDIT_CREATE_TABLE" doc:"true: create the DynamoDB audit and data-key tables if missing."`
	KeysTable        string `env:"LETHE_KEYS_TABLE" doc:"DynamoDB table of per-request data keys; empty: the directory store of LETHE_KEYS_DIR."`
	KeysDir          string `env:"LETHE_KEYS_DIR" default:"data/keys" doc:"Embedded data-key store directory when no table is set (one process only)."`
	DynamoDBEndpoint string `env:"LETHE_DYNAMODB_ENDPOINT" doc:"DynamoDB endpoint (DynamoDB Local, tests); empty: AWS."`
}

// Metrics declare where a service serves its metrics and health.
type Metrics struct {
	Addr  string `env:"LETHE_METRICS_ADDR" default:"127.0.0.1:9090" doc:"Listen address of /metrics, /healthz and /readyz."`
	Pprof bool   `env:"LETHE_PPROF" doc:"true: also serve Go's profiles under /debug/pprof/ on the metrics address (keep that address private)."`
}

// Config is a service's resolved configuration: its settings and the keys, inventory and
// cluster configuration they name.
type Config struct {
	Service          string
	Broker           broker.Config
	InventoryFile    string
	Inventory        *inventory.Inventory
	Key              subject.Key
	KEK              *envelope.KEK
	KeysTable        string
	KeysDir          string
	MetricsAddr      string
	Pprof            bool // serve /debug/pprof/ beside the metrics
	AuditTable       string
	AuditDir         string
	AuditCreateTable bool
	DynamoDBEndpoint string
	LogLevel         string

	// MAC authenticates the records the services hand one another: erasure.requested,
	// erasure.store.done and erasure.store.found (package integrity).
	MAC *integrity.Ring
	// ChainKey MACs the receipt chain (auditlog.Chain); nil when LETHE_CHAIN_KEY is unset.
	ChainKey *integrity.Ring

	opened []io.Closer // stores opened by AuditStore, Sealer and WorkflowStore, closed by Close
}

// Close closes the stores AuditStore, Sealer and WorkflowStore opened (the directory
// stores hold a lock and flush their log).
func (c *Config) Close() error {
	var errs []error
	for _, o := range c.opened {
		errs = append(errs, o.Close())
	}
	c.opened = nil
	return errors.Join(errs...)
}

func (c *Config) track(v any) {
	if cl, ok := v.(io.Closer); ok {
		c.opened = append(c.opened, cl)
	}
}

// New resolves the settings s of service. It fails without a valid pseudonym key, KEK or
// record MAC key, or with an invalid inventory.
func New(service string, s Settings) (*Config, error) {
	c := &Config{Service: service, InventoryFile: s.Process.Inventory, MetricsAddr: s.Metrics.Addr, Pprof: s.Metrics.Pprof, LogLevel: s.Process.LogLevel}
	c.setStores(s.Stores)
	var err error
	if c.Broker, err = s.Kafka.Config("lethe-" + service); err != nil {
		return nil, err
	}
	if c.Key, err = s.Keys.HMAC.Key(); err != nil {
		return nil, err
	}
	kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c.KEK, err = kmskek.Ring(kctx, s.Keys.KEK); err != nil {
		return nil, err
	}
	if c.MAC, err = s.Keys.MAC.Ring(); err != nil {
		return nil, err
	}
	if c.MAC == nil {
		return nil, errors.New("config: no record MAC key: set LETHE_MAC_KEY (at least 32 bytes, e.g. head -c 32 /dev/urandom | base64) or LETHE_MAC_KEY_FILE, the same on every service")
	}
	if c.ChainKey, err = s.Keys.Chain.Ring(); err != nil {
		return nil, err
	}
	if c.Inventory, err = LoadInventory(c.InventoryFile); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadInventory loads the inventory file, or the embedded reference inventory when file is
// empty.
func LoadInventory(file string) (*inventory.Inventory, error) {
	if file == "" {
		return inventory.Reference(), nil
	}
	return inventory.Load(file)
}

func (c *Config) setStores(s Stores) {
	c.AuditTable, c.AuditDir, c.AuditCreateTable = s.AuditTable, s.AuditDir, s.AuditCreateTable
	c.KeysTable, c.KeysDir, c.DynamoDBEndpoint = s.KeysTable, s.KeysDir, s.DynamoDBEndpoint
}

// KeysFromEnv loads only what Sealer reads, with the defaults New uses: the KEK ring
// (LETHE_KEK[_FILE], LETHE_KEK_ID, LETHE_KEK_OLD), LETHE_KEYS_TABLE, LETHE_KEYS_DIR,
// LETHE_DYNAMODB_ENDPOINT and LETHE_LOG_LEVEL, for tools that work on the data-key store
// without running a service (lethectl keys rewrap). Its Sealer never creates a table.
func KeysFromEnv(service string) (*Config, error) {
	var s struct {
		Process Process
		KEK     envelope.KEKSettings
		Stores  Stores
	}
	if err := envconf.FromEnv(&s); err != nil {
		return nil, err
	}
	kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kek, err := kmskek.Ring(kctx, s.KEK)
	if err != nil {
		return nil, err
	}
	c := &Config{Service: service, KEK: kek, LogLevel: s.Process.LogLevel}
	c.setStores(s.Stores)
	c.AuditCreateTable = false
	return c, nil
}

// String prints the configuration with secrets masked.
func (c *Config) String() string {
	inv := c.InventoryFile
	if inv == "" {
		inv = "embedded reference"
	}
	return fmt.Sprintf("service=%s kafka=%s inventory=%s (version %s, %d stores) key=%s kek=%s mac=%s chain=%s keys=%s metrics=%s audit=%s",
		c.Service, c.Broker, inv, c.Inventory.Version, len(c.Inventory.Stores), c.Key, c.KEK, c.MAC, c.ChainKey, c.keysName(),
		c.MetricsAddr, c.auditName())
}

func (c *Config) keysName() string {
	if c.KeysTable != "" {
		return "dynamodb:" + c.KeysTable
	}
	return "dir:" + c.KeysDir
}

// Sealer returns the sealer of identifiers: the KEK with the data-key store (DynamoDB when
// KeysTable is set, else the embedded directory store, for a single process only).
func (c *Config) Sealer(ctx context.Context) (*envelope.Sealer, error) {
	if c.KeysTable == "" {
		keys, err := envelope.NewDirKeyStore(c.KeysDir)
		if err != nil {
			return nil, err
		}
		c.track(keys)
		c.logRepairs("keys", keys.Repairs())
		return &envelope.Sealer{KEK: c.KEK, Keys: keys}, nil
	}
	client, err := c.dynamo(ctx)
	if err != nil {
		return nil, err
	}
	keys := dynamokeys.New(client, c.KeysTable)
	if c.AuditCreateTable {
		if err := keys.CreateTable(ctx); err != nil {
			return nil, err
		}
	}
	return &envelope.Sealer{KEK: c.KEK, Keys: keys}, nil
}

func (c *Config) dynamo(ctx context.Context) (*dynamodb.Client, error) {
	ac, err := c.aws(ctx)
	if err != nil {
		return nil, fmt.Errorf("config: aws: %w", err)
	}
	return dynamodb.NewFromConfig(ac, func(o *dynamodb.Options) {
		if c.DynamoDBEndpoint != "" {
			o.BaseEndpoint = aws.String(c.DynamoDBEndpoint)
		}
	}), nil
}

func (c *Config) auditName() string {
	if c.AuditTable != "" {
		return "dynamodb:" + c.AuditTable
	}
	return "dir:" + c.AuditDir
}

// logRepairs logs what opening a directory store cut off or removed.
func (c *Config) logRepairs(store string, repairs []wal.Repair) {
	if len(repairs) == 0 {
		return
	}
	if l, err := c.Logger(); err == nil {
		wal.LogRepairs(l, store, repairs)
		l.Sync()
	}
}

// Logger returns a JSON logger at LogLevel, tagged with the service name, that masks
// personal data in every message and text field (pii.Core).
func (c *Config) Logger() (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(c.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("config: LETHE_LOG_LEVEL: %w", err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Sampling = nil
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	l, err := zc.Build(zap.WrapCore(pii.Core))
	if err != nil {
		return nil, err
	}
	return l.With(zap.String("service", c.Service)), nil
}

func (c *Config) aws(ctx context.Context) (aws.Config, error) {
	return awsclient.LoadConfig(ctx)
}

// AuditStore opens the audit table: DynamoDB when AuditTable is set, else the embedded
// directory store.
func (c *Config) AuditStore(ctx context.Context) (auditlog.Table, error) {
	if c.AuditTable == "" {
		s, err := auditlog.OpenDir(c.AuditDir)
		if err != nil {
			return nil, err
		}
		c.track(s)
		c.logRepairs("audit", s.Repairs())
		return s, nil
	}
	client, err := c.dynamo(ctx)
	if err != nil {
		return nil, err
	}
	store := dynamo.New(client, c.AuditTable)
	if c.AuditCreateTable {
		if err := store.CreateTable(ctx); err != nil {
			return nil, err
		}
	}
	return store, nil
}

// WorkflowStore opens the store of the privacy team's workflow (gated requests and legal
// holds): the log directory file when it is set (one process owns it), else the DynamoDB
// audit table when AuditTable is set (every intake replica shares it). Without either it
// returns nil: no workflow. Call it after AuditStore, which creates the table.
func (c *Config) WorkflowStore(ctx context.Context, file string) (workflow.Store, error) {
	switch {
	case file != "":
		s, err := workflow.OpenFile(file)
		if err != nil {
			return nil, err
		}
		c.track(s)
		c.logRepairs("workflow", s.Repairs())
		return s, nil
	case c.AuditTable != "":
		client, err := c.dynamo(ctx)
		if err != nil {
			return nil, err
		}
		return wfdynamo.New(client, c.AuditTable), nil
	}
	return nil, nil
}

// WorkflowName names the store WorkflowStore opens for file: "dir:<path>",
// "dynamodb:<table>" or "none".
func (c *Config) WorkflowName(file string) string {
	switch {
	case file != "":
		return "dir:" + file
	case c.AuditTable != "":
		return "dynamodb:" + c.AuditTable
	}
	return "none"
}
