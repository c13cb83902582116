// Package embedded runs all of Lethe in one process on embedded stand-ins for each
// production component: a kfake Kafka cluster (the real wire protocol), the Qdrant
// emulator over gRPC, a redis-server child process (miniredis when none is installed),
// gofakes3 over HTTP with a versioned bucket, franz-go's srfake as the Schema Registry, and
// the directory audit store. The intake,
// the four deleters and the aggregator are wired exactly as the separate services are.
// It serves the standalone command, end-to-end tests, the CLI's tests and benchmarks.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/qdrant/go-client/qdrant"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
	"github.com/lethe-erasure/lethe/pkg/service"
)

// Partitions is the partition count of every embedded topic: the number of requests each
// consumer group works on at once.
const Partitions = 12

// DatasetBucket is the versioned bucket of the embedded S3.
const DatasetBucket = "lethe-datasets"

// Stack is the embedded stand-in for each production component: a kfake Kafka cluster,
// the Qdrant emulator, redis-server (miniredis when none is installed), gofakes3 over HTTP
// with versioning, and the directory audit store.
type Stack struct {
	Broker    broker.Config
	Registry  *schemareg.Codec // on the embedded Schema Registry (srfake), Lethe's schemas registered
	Addrs     Addrs            // where each component listens
	Qdrant    *qdrant.Client
	Redis     redis.UniversalClient
	RedisKind string
	S3        *s3.Client
	Audit     auditlog.Table
	closers   []func()
}

// Close stops every component.
func (s *Stack) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// Addrs are the listen addresses (host:port) of the embedded components. An empty one is
// a free port of 127.0.0.1.
type Addrs struct {
	Kafka    string `env:"LETHE_STANDALONE_KAFKA_ADDR" doc:"Listen address of the embedded Kafka broker (kfake); empty: 127.0.0.1:9092 when serving, a free port with -demo."`
	Registry string `env:"LETHE_STANDALONE_REGISTRY_ADDR" doc:"Listen address of the embedded Schema Registry (srfake), HTTP; empty: 127.0.0.1:8081 when serving, a free port with -demo."`
	Qdrant   string `env:"LETHE_STANDALONE_QDRANT_ADDR" doc:"Listen address of the Qdrant emulator, gRPC with server reflection; empty: 127.0.0.1:6334 when serving, a free port with -demo."`
	Redis    string `env:"LETHE_STANDALONE_REDIS_ADDR" doc:"Listen address of redis-server (miniredis without one); empty: 127.0.0.1:6379 when serving, a free port with -demo."`
	S3       string `env:"LETHE_STANDALONE_S3_ADDR" doc:"Listen address of the embedded S3 (gofakes3, path-style, bucket lethe-datasets); empty: 127.0.0.1:9000 when serving, a free port with -demo."`
}

// StartStack starts the components on free ports; redis-server keeps its files under
// dataDir.
func StartStack(ctx context.Context, dataDir string) (*Stack, error) {
	return StartStackAt(ctx, dataDir, Addrs{})
}

// StartStackAt starts the components listening on at; Stack.Addrs says where each one
// listens. Lethe's schemas are registered in the Schema Registry under the topic-name
// strategy.
func StartStackAt(ctx context.Context, dataDir string, at Addrs) (*Stack, error) {
	return StartStackUsing(ctx, dataDir, at, External{})
}

// External are running components a stack uses instead of starting its own, such as the
// real servers a test suite is pointed at; a zero field keeps the embedded one. The stack
// neither creates nor deletes anything on them, and does not close the clients.
type External struct {
	Kafka  []string       // seed brokers of a cluster where service.Topics exist
	Qdrant *qdrant.Client // a Qdrant's gRPC API
	S3     *s3.Client     // an S3, path-style, where DatasetBucket exists with versioning on
	// S3Endpoint is S3's endpoint URL, for Stack.Addrs.
	S3Endpoint string
}

// StartStackUsing is StartStackAt with the components of ext in place of embedded ones.
func StartStackUsing(ctx context.Context, dataDir string, at Addrs, ext External) (_ *Stack, err error) {
	s := &Stack{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.startKafka(at.Kafka, ext.Kafka); err != nil {
		return nil, envconf.ListenError(err, "LETHE_STANDALONE_KAFKA_ADDR")
	}
	if err := s.startRegistry(ctx, at.Registry); err != nil {
		return nil, envconf.ListenError(fmt.Errorf("schema registry: %w", err), "LETHE_STANDALONE_REGISTRY_ADDR")
	}
	if ext.Qdrant != nil {
		s.Qdrant = ext.Qdrant
	} else if err := s.startQdrant(ctx, at.Qdrant); err != nil {
		return nil, envconf.ListenError(err, "LETHE_STANDALONE_QDRANT_ADDR")
	}

	addr, stop, err := startRedis(dataDir, at.Redis)
	if err != nil {
		return nil, envconf.ListenError(err, "LETHE_STANDALONE_REDIS_ADDR")
	}
	s.closers = append(s.closers, stop)
	s.Addrs.Redis = addr
	s.Redis = redis.NewClient(&redis.Options{Addr: addr})
	s.closers = append(s.closers, func() { s.Redis.Close() })
	s.RedisKind = "redis-server"
	if _, err := exec.LookPath("redis-server"); err != nil {
		s.RedisKind = "miniredis (no redis-server on PATH)"
	}

	if ext.S3 != nil {
		s.S3, s.Addrs.S3 = ext.S3, ext.S3Endpoint
	} else if s.S3, err = startS3(ctx, s, at.S3); err != nil {
		return nil, envconf.ListenError(fmt.Errorf("s3: %w", err), "LETHE_STANDALONE_S3_ADDR")
	}
	audit, err := auditlog.OpenDir(filepath.Join(dataDir, "audit"))
	if err != nil {
		return nil, fmt.Errorf("audit store: %w", err)
	}
	s.Audit = audit
	s.closers = append(s.closers, func() { audit.Close() })
	return s, nil
}

// startKafka starts the kfake cluster on at, or uses the brokers of ext.
func (s *Stack) startKafka(at string, ext []string) error {
	if len(ext) > 0 {
		s.Broker = broker.Config{Brokers: ext, ClientID: "lethe-standalone", Partitions: Partitions}
		s.Addrs.Kafka = ext[0]
		return nil
	}
	kopts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(Partitions, service.Topics...)}
	if at != "" {
		kopts = append(kopts, kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, at) }))
	}
	kc, err := kfake.NewCluster(kopts...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	s.closers = append(s.closers, kc.Close)
	s.Broker = broker.Config{Brokers: kc.ListenAddrs(), ClientID: "lethe-standalone", Partitions: Partitions}
	s.Addrs.Kafka = kc.ListenAddrs()[0]
	return nil
}

// startQdrant starts the Qdrant emulator on at and a client of it.
func (s *Stack) startQdrant(ctx context.Context, at string) error {
	if at == "" {
		at = "127.0.0.1:0"
	}
	qs, err := qdrantfake.StartAt(ctx, at)
	if err != nil {
		return fmt.Errorf("qdrant emulator: %w", err)
	}
	s.closers = append(s.closers, qs.Close)
	s.Addrs.Qdrant = qs.Addr()
	if s.Qdrant, err = qdrant.NewClient(qs.Config()); err != nil {
		return fmt.Errorf("qdrant client: %w", err)
	}
	s.closers = append(s.closers, func() { s.Qdrant.Close() })
	return nil
}

// listen listens on addr, or on a free port of 127.0.0.1 when addr is empty.
func listen(addr string) (net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	return net.Listen("tcp", addr)
}

// startRegistry serves srfake on addr and registers Lethe's schemas in it.
func (s *Stack) startRegistry(ctx context.Context, addr string) error {
	l, err := listen(addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: srfake.NewRegistry().Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	s.closers = append(s.closers, func() { srv.Close() })
	s.Addrs.Registry = l.Addr().String()
	if s.Registry, err = schemareg.Dial("http://" + s.Addrs.Registry); err != nil {
		return err
	}
	return s.Registry.RegisterAll(ctx)
}

// startRedis starts redis-server on a free port, or miniredis when it is not installed.
func startRedis(dataDir, at string) (addr string, stop func(), err error) {
	bin, lookErr := exec.LookPath("redis-server")
	if lookErr != nil {
		m := miniredis.NewMiniRedis()
		if at == "" {
			at = "127.0.0.1:0"
		}
		if err := m.StartAddr(at); err != nil {
			return "", nil, fmt.Errorf("miniredis: %w", err)
		}
		return m.Addr(), m.Close, nil
	}
	l, err := listen(at)
	if err != nil {
		return "", nil, err
	}
	host, _, _ := net.SplitHostPort(l.Addr().String())
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := filepath.Join(dataDir, "redis")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", host, "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("redis-server: %w", err)
	}
	stop = func() { cmd.Process.Kill(); cmd.Wait() }
	addr = net.JoinHostPort(host, strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("redis-server did not start listening")
		}
	}
}

// startS3 serves gofakes3 over HTTP on a loopback port and creates the versioned bucket.
func startS3(ctx context.Context, s *Stack, at string) (*s3.Client, error) {
	l, err := listen(at)
	if err != nil {
		return nil, err
	}
	s.Addrs.S3 = l.Addr().String()
	srv := &http.Server{Handler: gofakes3.New(s3mem.New()).Server(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	s.closers = append(s.closers, func() { srv.Close() })
	client := s3.New(s3.Options{
		BaseEndpoint: aws.String("http://" + l.Addr().String()),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("lethe", "lethe-local", ""),
		UsePathStyle: true,
	})
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(DatasetBucket)}); err != nil {
		return nil, err
	}
	_, err = client.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(DatasetBucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	return client, err
}
