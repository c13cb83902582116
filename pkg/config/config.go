// Package config loads a Lethe service's configuration from the environment and builds
// the clients it names. Every setting has a default for a local stack; secrets are read
// from the environment or files and never printed (String masks them).
//
//	LETHE_KAFKA_BROKERS      seed brokers, comma separated           127.0.0.1:9092
//	LETHE_KAFKA_PARTITIONS   partitions of topics a service creates  6
//	LETHE_KAFKA_TLS, LETHE_KAFKA_TLS_CA_FILE, LETHE_KAFKA_SASL_MECHANISM,
//	LETHE_KAFKA_SASL_USERNAME, LETHE_KAFKA_SASL_PASSWORD[_FILE]   see broker.FromEnv
//	LETHE_CREATE_TOPICS      "false": wait for provisioned topics     true (create missing ones)
//	LETHE_INVENTORY          inventory YAML file                      the embedded reference inventory
//	LETHE_HMAC_KEY[_FILE]    pseudonym key (>= 32 bytes)              required
//	LETHE_HMAC_KEY_ID        its id                                   k1
//	LETHE_KEK[_FILE]         key-encryption key, base64 of 32 bytes  required
//	LETHE_KEK_ID             its id                                   kek1
//	LETHE_KEK_OLD            retired KEKs kept to unwrap: id:b64,...  none
//	LETHE_MAC_KEY[_FILE]     record MAC key (>= 32 bytes)              required
//	LETHE_MAC_KEY_ID         its id                                   mac1
//	LETHE_MAC_KEY_OLD        retired MAC keys kept to verify: id:key,...  none
//	LETHE_CHAIN_KEY[_FILE]   receipt chain key (>= 32 bytes)          required by the aggregator
//	LETHE_CHAIN_KEY_ID       its id                                   chain1
//	LETHE_CHAIN_KEY_OLD      retired chain keys kept to verify        none
//	LETHE_ALLOW_UNSEALED     "true": deleters erase requests whose identifiers are in the clear (development only)  false
//	LETHE_KEYS_TABLE         DynamoDB table of per-request data keys  none (then LETHE_KEYS_DIR)
//	LETHE_KEYS_DIR           embedded data-key store directory        ./data/keys
//	LETHE_HTTP_ADDR          intake listen address                    127.0.0.1:8080
//	LETHE_METRICS_ADDR       /metrics, /healthz, /readyz              127.0.0.1:9090
//	LETHE_SLA                due-date windows, e.g. GDPR=720h         GDPR 30d, LGPD 15d, PDPA 30d, CCPA 45d
//	LETHE_SLA_TARGET         internal target beside them (aggregator) none, e.g. 5m
//	LETHE_SWEEPS             re-verification delays after the receipt (aggregator.SweepsFromEnv)  1m,1h,24h,7d; off for none
//	LETHE_RETAIN             data keys kept after the last sweep (aggregator)  35d
//	LETHE_AUDIT_TABLE        DynamoDB audit table                     none (then LETHE_AUDIT_DIR)
//	LETHE_AUDIT_DIR          embedded audit store directory           ./data/audit
//	LETHE_AUDIT_CREATE_TABLE create the DynamoDB table if missing     false
//	LETHE_DYNAMODB_ENDPOINT  DynamoDB endpoint (DynamoDB Local, tests) none
//	LETHE_WORKFLOW_FILE      workflow log directory, one intake only  none (then the audit table's, if DynamoDB)
//	LETHE_LOG_LEVEL          debug, info, warn, error                 info
//
// The intake's credentials are read by auth.ConfigFromEnv: LETHE_TOKENS[_FILE] and, for
// JWTs, LETHE_JWKS_FILE or LETHE_JWKS_URL (refreshed every LETHE_JWKS_REFRESH, 10m) or
// LETHE_JWT_HS256_SECRET[_FILE], with LETHE_JWT_ISSUER and LETHE_JWT_AUDIENCE, both
// required whenever JWT is enabled (the intake refuses to start without them), and
// LETHE_JWT_TENANT_CLAIM.
//
// AWS credentials and region come from the AWS default chain (AWS_REGION, AWS_PROFILE,
// web identity, instance roles).
//
// Each store's client reads its own settings, in the package that owns the client, so a
// deleter links and documents only its own backend's SDK: qdrantstore.ClientFromEnv
// (LETHE_QDRANT_*), redisstore.ClientFromEnv (LETHE_REDIS_*), s3env.Client
// (LETHE_S3_ENDPOINT) and datasetstore.DirFromEnv (LETHE_DATASET_DIR).
package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/dynamo"
	"github.com/lethe-erasure/lethe/pkg/awsclient"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/envelope/dynamokeys"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/pii"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/wal"
	"github.com/lethe-erasure/lethe/pkg/workflow"
	wfdynamo "github.com/lethe-erasure/lethe/pkg/workflow/dynamo"
)

// Config is a service's configuration.
type Config struct {
	Service          string
	Broker           broker.Config
	InventoryFile    string
	Inventory        *inventory.Inventory
	Key              subject.Key
	KEK              *envelope.KEK
	KeysTable        string
	KeysDir          string
	HTTPAddr         string
	MetricsAddr      string
	AuditTable       string
	AuditDir         string
	AuditCreateTable bool
	DynamoDBEndpoint string
	WorkflowFile     string
	LogLevel         string

	// MAC authenticates the records the services hand one another: erasure.requested,
	// erasure.store.done and erasure.store.found (package integrity).
	MAC *integrity.Ring
	// ChainKey MACs the receipt chain (auditlog.Chain); nil when LETHE_CHAIN_KEY is unset.
	ChainKey *integrity.Ring
	// AllowUnsealed lets deleters erase requests whose identifiers travel in the clear.
	AllowUnsealed bool

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

// FromEnv loads the configuration of service. It fails without a valid pseudonym key, KEK
// or record MAC key, or with an invalid inventory.
func FromEnv(service string) (*Config, error) {
	c := &Config{
		Service:          service,
		InventoryFile:    os.Getenv("LETHE_INVENTORY"),
		HTTPAddr:         env("LETHE_HTTP_ADDR", "127.0.0.1:8080"),
		MetricsAddr:      env("LETHE_METRICS_ADDR", "127.0.0.1:9090"),
		AuditTable:       os.Getenv("LETHE_AUDIT_TABLE"),
		AuditDir:         env("LETHE_AUDIT_DIR", "data/audit"),
		AuditCreateTable: os.Getenv("LETHE_AUDIT_CREATE_TABLE") == "true",
		KeysTable:        os.Getenv("LETHE_KEYS_TABLE"),
		KeysDir:          env("LETHE_KEYS_DIR", "data/keys"),
		DynamoDBEndpoint: os.Getenv("LETHE_DYNAMODB_ENDPOINT"),
		WorkflowFile:     os.Getenv("LETHE_WORKFLOW_FILE"),
		LogLevel:         env("LETHE_LOG_LEVEL", "info"),
		AllowUnsealed:    os.Getenv("LETHE_ALLOW_UNSEALED") == "true",
	}
	var err error
	if c.Broker, err = broker.FromEnv("lethe-" + service); err != nil {
		return nil, err
	}
	if c.Key, err = subject.KeyFromEnv(); err != nil {
		return nil, err
	}
	if c.KEK, err = envelope.KEKFromEnv(); err != nil {
		return nil, err
	}
	if c.MAC, err = integrity.FromEnv("LETHE_MAC_KEY", "mac1"); err != nil {
		return nil, err
	}
	if c.MAC == nil {
		return nil, errors.New("config: no record MAC key: set LETHE_MAC_KEY (at least 32 bytes, e.g. head -c 32 /dev/urandom | base64) or LETHE_MAC_KEY_FILE, the same on every service")
	}
	if c.ChainKey, err = integrity.FromEnv("LETHE_CHAIN_KEY", "chain1"); err != nil {
		return nil, err
	}
	if c.InventoryFile == "" {
		c.Inventory = inventory.Reference()
	} else if c.Inventory, err = inventory.Load(c.InventoryFile); err != nil {
		return nil, err
	}
	return c, nil
}

// KeysFromEnv loads only what Sealer reads, with the defaults FromEnv uses: the KEK ring
// (LETHE_KEK[_FILE], LETHE_KEK_ID, LETHE_KEK_OLD), LETHE_KEYS_TABLE, LETHE_KEYS_DIR,
// LETHE_DYNAMODB_ENDPOINT and LETHE_LOG_LEVEL, for tools that work on the data-key store
// without running a service (lethectl keys rewrap). Its Sealer never creates a table.
func KeysFromEnv(service string) (*Config, error) {
	kek, err := envelope.KEKFromEnv()
	if err != nil {
		return nil, err
	}
	return &Config{
		Service:          service,
		KEK:              kek,
		KeysTable:        os.Getenv("LETHE_KEYS_TABLE"),
		KeysDir:          env("LETHE_KEYS_DIR", "data/keys"),
		DynamoDBEndpoint: os.Getenv("LETHE_DYNAMODB_ENDPOINT"),
		LogLevel:         env("LETHE_LOG_LEVEL", "info"),
	}, nil
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// String prints the configuration with secrets masked.
func (c *Config) String() string {
	inv := c.InventoryFile
	if inv == "" {
		inv = "embedded reference"
	}
	return fmt.Sprintf("service=%s kafka=%s inventory=%s (version %s, %d stores) key=%s kek=%s mac=%s chain=%s allow_unsealed=%t keys=%s http=%s metrics=%s audit=%s",
		c.Service, c.Broker, inv, c.Inventory.Version, len(c.Inventory.Stores), c.Key, c.KEK, c.MAC, c.ChainKey, c.AllowUnsealed, c.keysName(),
		c.HTTPAddr, c.MetricsAddr, c.auditName())
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
	l, err := zc.Build(zap.WrapCore(pii.Core))
	if err != nil {
		return nil, err
	}
	return l.With(zap.String("service", c.Service)), nil
}

func (c *Config) aws(ctx context.Context) (aws.Config, error) {
	return awsconfig.LoadDefaultConfig(ctx, awsconfig.WithHTTPClient(awsclient.HTTPClient()))
}

// AuditStore opens the audit table: DynamoDB when AuditTable is set, else the embedded
// directory store.
func (c *Config) AuditStore(ctx context.Context) (auditlog.Store, error) {
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
// holds): the log directory WorkflowFile when it is set (one process owns it), else the
// DynamoDB audit table when AuditTable is set (every intake replica shares it). Without
// either it returns nil: no workflow. Call it after AuditStore, which creates the table.
func (c *Config) WorkflowStore(ctx context.Context) (workflow.Store, error) {
	switch {
	case c.WorkflowFile != "":
		s, err := workflow.OpenFile(c.WorkflowFile)
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

// WorkflowName names the store WorkflowStore opens: "dir:<path>", "dynamodb:<table>" or
// "none".
func (c *Config) WorkflowName() string {
	switch {
	case c.WorkflowFile != "":
		return "dir:" + c.WorkflowFile
	case c.AuditTable != "":
		return "dynamodb:" + c.AuditTable
	}
	return "none"
}
