package chaos

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/qdrant/go-client/qdrant"
	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/dynamo"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/envelope/dynamokeys"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// Services are the six service binaries, by the name of their directory under services/.
var Services = []string{"intake", "qdrant-deleter", "redis-deleter", "dataset-deleter", "audit-verifier", "aggregator"}

// Stores are the components behind a Proxy, which Outage takes down.
var Stores = []string{"redis", "qdrant", "s3", "dynamodb"}

const (
	auditTable = "lethe-audit"
	keysTable  = "lethe-keys"
	bucket     = "lethe-datasets"
)

var (
	buildMu   sync.Mutex
	buildDirs = map[string]string{}
)

// Build builds the six service binaries and the kafka (kfake), qdrant and s3 (gofakes3) component binaries of
// the repository at root into a temporary directory, once per process, and returns it.
func Build(ctx context.Context, root string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if d, ok := buildDirs[root]; ok {
		return d, nil
	}
	dir, err := os.MkdirTemp("", "lethe-chaos-bin-")
	if err != nil {
		return "", err
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, s := range Services {
		args = append(args, "./services/"+s)
	}
	args = append(args, "./chaos/cmd/kafka", "./chaos/cmd/qdrant", "./chaos/cmd/s3")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("chaos: go build: %w\n%s", err, out)
	}
	buildDirs[root] = dir
	return dir, nil
}

// RemoveBuilds removes the directories Build made in this process. Call it once the
// systems using them are stopped.
func RemoveBuilds() {
	buildMu.Lock()
	defer buildMu.Unlock()
	for root, dir := range buildDirs {
		os.RemoveAll(dir)
		delete(buildDirs, root)
	}
}

// Root finds the repository root (the directory holding go.work) from the working
// directory upwards.
func Root() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for ; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("chaos: no go.work above the working directory")
		}
	}
}

// System is Lethe running as separate processes: Kafka (Brokers), the Qdrant emulator,
// redis-server, moto's server or gofakes3 for S3, and dynalite for DynamoDB (moto serves
// too few DynamoDB calls a second for a run: docs/real-components.md), each store behind a
// Proxy, and
// instances of the six services. The harness's own clients reach the stores directly, so
// its seeding and checks are unaffected by outages.
type System struct {
	Dir       string
	Bin       string
	Kafka     *Brokers
	Broker    broker.Config
	Stores    map[string]*Proc  // redis, qdrant, s3 (moto), dynamodb (dynalite)
	Proxies   map[string]*Proxy // the services' way to each store
	IntakeURL string
	Key       subject.Key
	Inventory *inventory.Inventory

	Qdrant *qdrant.Client
	Redis  *redis.Client
	S3     *s3.Client
	Audit  auditlog.Table

	mu         sync.Mutex
	services   map[string][]*Proc
	env        []string
	next       int
	deleterCPU *cpuLimiter // limits each deleter instance started from now on; nil: none
}

// Start starts the components, on three Kafka nodes, and one instance of each service.
// dir holds the logs and the kfake broker's data.
func Start(ctx context.Context, root, dir string) (*System, error) {
	return start(ctx, root, dir, 3, 6, S3Moto, nil)
}

// The S3 servers a System can run on.
const (
	S3Moto     = "moto"     // moto's server
	S3Gofakes3 = "gofakes3" // gofakes3 in a process of its own (chaos/cmd/s3)
)

// start is Start on Kafka of nodes nodes (with Apache Kafka), topics of partitions
// partitions and the S3 server s3, with env (KEY=value) added to every service's
// environment.
func start(ctx context.Context, root, dir string, nodes int, partitions int32, s3srv string, env []string) (_ *System, err error) {
	bin, err := Build(ctx, root)
	if err != nil {
		return nil, err
	}
	s := &System{Dir: dir, Bin: bin, Stores: map[string]*Proc{}, Proxies: map[string]*Proxy{}, services: map[string][]*Proc{}, Inventory: indexOnly(inventory.Reference())}
	invFile := filepath.Join(dir, "inventory.yaml")
	if err := writeInventory(invFile, s.Inventory); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	ports := map[string]int{}
	for _, n := range []string{"redis", "qdrant", "s3", "dynamodb"} {
		if ports[n], err = freePort(); err != nil {
			return nil, err
		}
	}
	cli := filepath.Join(root, ".tools", "node_modules", "dynalite", "cli.js")
	if d := os.Getenv("LETHE_DYNALITE_DIR"); d != "" {
		cli = filepath.Join(d, "node_modules", "dynalite", "cli.js")
	}
	if _, err := os.Stat(cli); err != nil {
		return nil, fmt.Errorf("chaos: dynalite: %w (run: make tools)", err)
	}
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("chaos: redis-server not on PATH: %w", err)
	}
	motoBin, err := testenv.MotoBinary()
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	if s.Kafka, err = startBrokers(ctx, bin, dir, nodes, partitions); err != nil {
		return nil, err
	}
	p := func(n string) string { return strconv.Itoa(ports[n]) }
	s.Stores["redis"] = &Proc{Name: "redis", Path: redisBin, Args: []string{"--port", p("redis"), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--protected-mode", "no"}, Port: ports["redis"], Dir: dir}
	s.Stores["qdrant"] = &Proc{Name: "qdrant", Path: filepath.Join(bin, "qdrant"), Args: []string{"-port", p("qdrant")}, Port: ports["qdrant"], Dir: dir}
	switch s3srv {
	case S3Moto:
		s.Stores["s3"] = &Proc{Name: "s3", Path: motoBin, Args: []string{"-H", "127.0.0.1", "-p", p("s3")}, Port: ports["s3"], Dir: dir}
	case S3Gofakes3:
		s.Stores["s3"] = &Proc{Name: "s3", Path: filepath.Join(bin, "s3"), Args: []string{"-port", p("s3"), "-buckets", ""}, Port: ports["s3"], Dir: dir}
	default:
		return nil, fmt.Errorf("chaos: unknown S3 server %q (%s or %s)", s3srv, S3Moto, S3Gofakes3)
	}
	// dynalite keeps its tables on disk (--path) because it dies when a client it is
	// answering is killed mid-request (an unhandled ECONNRESET); superviseStore restarts it.
	s.Stores["dynamodb"] = &Proc{Name: "dynamodb", Path: "node", Args: []string{cli, "--port", p("dynamodb"), "--path", filepath.Join(dir, "dynamodb-data"),
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"}, Port: ports["dynamodb"], Dir: dir}
	for _, c := range []*Proc{s.Stores["redis"], s.Stores["qdrant"], s.Stores["s3"], s.Stores["dynamodb"]} {
		if err := c.Start(ctx); err != nil {
			return nil, err
		}
	}
	go superviseStore(s.Stores["dynamodb"])
	for _, n := range Stores {
		proxy := NewProxy
		if n == "s3" && s3srv == S3Moto {
			proxy = NewHTTPProxy
		}
		if s.Proxies[n], err = proxy("127.0.0.1:" + p(n)); err != nil {
			return nil, err
		}
	}
	s.Broker = broker.Config{Brokers: s.Kafka.Addrs, ClientID: "lethe-chaos", Partitions: partitions}
	if err := s.clients(ctx, ports); err != nil {
		return nil, err
	}
	intakePort, err := freePort()
	if err != nil {
		return nil, err
	}
	s.IntakeURL = fmt.Sprintf("http://127.0.0.1:%d", intakePort)
	secret, kek, mac, chain := make([]byte, 32), make([]byte, 32), make([]byte, 32), make([]byte, 32)
	rand.Read(secret)
	rand.Read(kek)
	rand.Read(mac)
	rand.Read(chain)
	hmacKey := base64.RawURLEncoding.EncodeToString(secret) // 43 bytes of key material
	if s.Key, err = subject.NewKey("k1", []byte(hmacKey)); err != nil {
		return nil, err
	}
	s.env = []string{
		"LETHE_KAFKA_BROKERS=" + strings.Join(s.Broker.Brokers, ","), "LETHE_KAFKA_PARTITIONS=" + strconv.Itoa(int(partitions)),
		"LETHE_HMAC_KEY=" + hmacKey, "LETHE_HMAC_KEY_ID=k1", "LETHE_KEK=" + base64.StdEncoding.EncodeToString(kek), "LETHE_KEK_ID=kek1",
		"LETHE_MAC_KEY=" + base64.StdEncoding.EncodeToString(mac), "LETHE_CHAIN_KEY=" + base64.StdEncoding.EncodeToString(chain),
		"LETHE_KEYS_TABLE=" + keysTable, "LETHE_AUDIT_TABLE=" + auditTable, "LETHE_AUDIT_CREATE_TABLE=false",
		"LETHE_DYNAMODB_ENDPOINT=http://" + s.Proxies["dynamodb"].Addr(), "LETHE_QDRANT_ADDR=" + s.Proxies["qdrant"].Addr(),
		"LETHE_REDIS_ADDRS=" + s.Proxies["redis"].Addr(), "LETHE_S3_ENDPOINT=http://" + s.Proxies["s3"].Addr(),
		"AWS_ACCESS_KEY_ID=lethe", "AWS_SECRET_ACCESS_KEY=lethe-local", "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true",
		"LETHE_INVENTORY=" + invFile, "LETHE_AUTH_DISABLED=true", "LETHE_HTTP_ADDR=127.0.0.1:" + strconv.Itoa(intakePort), "LETHE_LOG_LEVEL=info",
	}
	s.env = append(s.env, env...)
	for _, name := range Services {
		if _, err := s.AddInstance(ctx, name); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// clients connects the harness's own clients to the stores directly and creates the
// audit and data-key tables.
func (s *System) clients(ctx context.Context, ports map[string]int) error {
	var err error
	if s.Qdrant, err = qdrant.NewClient(&qdrant.Config{Host: "127.0.0.1", Port: ports["qdrant"], SkipCompatibilityCheck: true}); err != nil {
		return err
	}
	s.Redis = redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", ports["redis"])})
	creds := credentials.NewStaticCredentialsProvider("lethe", "lethe-local", "")
	s.S3 = s3.New(s3.Options{BaseEndpoint: aws.String(fmt.Sprintf("http://127.0.0.1:%d", ports["s3"])), Region: "us-east-1", Credentials: creds, UsePathStyle: true})
	ddb := dynamodb.New(dynamodb.Options{BaseEndpoint: aws.String(fmt.Sprintf("http://127.0.0.1:%d", ports["dynamodb"])), Region: "us-east-1", Credentials: creds})
	if _, err := s.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return fmt.Errorf("chaos: bucket: %w", err)
	}
	if _, err := s.S3.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		return fmt.Errorf("chaos: bucket versioning: %w", err)
	}
	audit := dynamo.New(ddb, auditTable)
	if err := audit.CreateTable(ctx); err != nil {
		return fmt.Errorf("chaos: audit table: %w", err)
	}
	if err := dynamokeys.New(ddb, keysTable).CreateTable(ctx); err != nil {
		return fmt.Errorf("chaos: keys table: %w", err)
	}
	s.Audit = audit
	return nil
}

// AddInstance starts one more instance of service and waits until its metrics port (and,
// for intake, its HTTP port) listens. Only one intake instance can run (they share the
// HTTP port).
func (s *System) AddInstance(ctx context.Context, service string) (*Proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.next++
	p := &Proc{Name: fmt.Sprintf("%s-%d", service, s.next), Path: filepath.Join(s.Bin, service), Dir: s.Dir,
		Env: append(append([]string{}, s.env...), fmt.Sprintf("LETHE_METRICS_ADDR=127.0.0.1:%d", port)), Port: port}
	if l := s.deleterCPU; l != nil && isDeleter(service) {
		p.Limit = func(pid int) (func(), error) { return l.limit(p.Name, pid) }
	}
	s.services[service] = append(s.services[service], p)
	s.mu.Unlock()
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	if service == "intake" {
		port, _ := strconv.Atoi(s.IntakeURL[len("http://127.0.0.1:"):])
		return p, waitPort(ctx, port, nil, 30e9)
	}
	return p, nil
}

// Setenv adds settings (KEY=value) to the environment of the service instances started
// from now on; a setting overrides an earlier one of the same key.
func (s *System) Setenv(kv ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.env = append(s.env, kv...)
}

// RemoveInstance stops the newest instance of service in an orderly way (SIGTERM).
func (s *System) RemoveInstance(service string) error {
	s.mu.Lock()
	ps := s.services[service]
	if len(ps) == 0 {
		s.mu.Unlock()
		return fmt.Errorf("chaos: no instance of %s", service)
	}
	p := ps[len(ps)-1]
	s.services[service] = ps[:len(ps)-1]
	s.mu.Unlock()
	return p.Retire()
}

// Instances returns the running instances of service.
func (s *System) Instances(service string) []*Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Proc(nil), s.services[service]...)
}

// Close stops every process (SIGKILL) and closes the harness's clients.
func (s *System) Close() {
	s.mu.Lock()
	var all []*Proc
	for _, ps := range s.services {
		all = append(all, ps...)
	}
	s.mu.Unlock()
	for _, p := range all {
		p.Kill()
	}
	if s.Kafka != nil {
		s.Kafka.Close()
	}
	for _, p := range s.Stores {
		p.Kill()
	}
	for _, p := range s.Proxies {
		p.Down()
	}
	if s.Qdrant != nil {
		s.Qdrant.Close()
	}
	if s.Redis != nil {
		s.Redis.Close()
	}
}

// superviseStore restarts p whenever it exits by itself, until it is retired.
func superviseStore(p *Proc) {
	for {
		p.mu.Lock()
		exited, retired := p.exited, p.retired
		p.mu.Unlock()
		if retired || exited == nil {
			return
		}
		<-exited
		p.mu.Lock()
		deliberate := p.retired || p.signaled
		if !deliberate {
			p.cmd, p.exited = nil, nil // it died on its own: clear it so it can start again
		}
		p.mu.Unlock()
		if deliberate {
			return
		}
		if err := p.Start(context.Background()); err != nil && !errors.Is(err, errRetired) {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// indexOnly makes inv's Redis stores trust their index, as an app that lists every key
// in it would configure them: the run's cost then follows the subjects, not a keyspace that
// grows with every seeded subject (the SCAN fallback has its own conformance tests).
func indexOnly(inv *inventory.Inventory) *inventory.Inventory {
	for i, st := range inv.Stores {
		if st.Kind == redisstore.Kind {
			inv.Stores[i].Locators = st.Locators.With("index_only", true)
		}
	}
	return inv
}

func writeInventory(path string, inv *inventory.Inventory) error {
	b, err := yaml.Marshal(inv)
	if err != nil {
		return err
	}
	if _, err := inventory.Parse(b); err != nil {
		return fmt.Errorf("chaos: inventory: %w", err)
	}
	return os.WriteFile(path, b, 0o644)
}
