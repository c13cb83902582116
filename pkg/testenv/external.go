package testenv

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The variables that choose the components under test. EnvBroker chooses between Apache
// Kafka and kfake. The others name a server started apart from the tests (or, for Kafka,
// in place of the broker testenv starts); unset, the tests run as CI runs them (Kafka
// started by testenv, S3 and DynamoDB on moto's server); set, the tests talk to the
// server named and clean up what they created on it. LETHE_TEST_QDRANT_ADDR, the fifth,
// is read by pkg/qdrantfake/qdranttest.
const (
	// EnvBroker chooses the Kafka under test: "kafka" (the default) is Apache Kafka, the
	// cluster of EnvKafka or else one testenv starts (StartKafka) once per test process;
	// "kfake" is franz-go's in-process kfake, a cluster per call.
	EnvBroker = "LETHE_TEST_BROKER"
	// EnvKafka holds the seed brokers of a running Kafka, comma-separated host:port.
	EnvKafka = "LETHE_TEST_KAFKA_BROKERS"
	// EnvKafkaSASL holds the SASL_PLAINTEXT (SCRAM) listeners of EnvKafka's cluster, on
	// which an authorizer applies while EnvKafka's clients are super users; kafkabroker
	// sets it. Without it the SASL tests start a cluster of their own.
	EnvKafkaSASL = "LETHE_TEST_KAFKA_SASL_BROKERS"
	// EnvS3 holds the endpoint URL of an S3 (AWS, MinIO, say), addressed path-style with
	// the credentials and region of AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION
	// (or AWS_DEFAULT_REGION; default us-east-1).
	EnvS3 = "LETHE_TEST_S3_ENDPOINT"
	// EnvDynamoDB holds the endpoint URL of a DynamoDB (AWS, DynamoDB Local, say).
	EnvDynamoDB = "LETHE_TEST_DYNAMODB_ENDPOINT"
)

// ExternalKafka reports whether Kafka tests run against Apache Kafka (EnvBroker is not
// kfake): the brokers of EnvKafka or those testenv starts, outside the test's process.
func ExternalKafka() bool { return os.Getenv(EnvBroker) != "kfake" }

// ExternalS3 reports whether S3 tests run against the endpoint of EnvS3.
func ExternalS3() bool { return os.Getenv(EnvS3) != "" }

// ExternalDynamoDB reports whether DynamoDB tests run against the endpoint of EnvDynamoDB.
func ExternalDynamoDB() bool { return os.Getenv(EnvDynamoDB) != "" }

// uniqueSuffix returns 12 random lower-case hex digits, for names a test creates on a
// shared server.
func uniqueSuffix() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// reachable fails t unless endpoint (host:port or a URL) accepts TCP connections within
// 5 s: a real backend named but down fails the test, never skips it.
func reachable(t testing.TB, env, endpoint string) {
	t.Helper()
	addr := endpoint
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		addr = u.Host
		if u.Port() == "" {
			port := "80"
			if u.Scheme == "https" {
				port = "443"
			}
			addr = net.JoinHostPort(u.Hostname(), port)
		}
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("testenv: %s=%s is not reachable: %v", env, endpoint, err)
	}
	c.Close()
}

// exclusive serialises the tests, of this process and of every other on the machine, that
// use the server named by key: Lethe's topic and consumer-group names are fixed, so two
// tests on one cluster would read each other's records. The lock is held until t ends; a
// subtest of the holder (or the holder again) passes through.
type exclusive struct {
	sem    chan struct{}
	mu     sync.Mutex
	holder string
}

var kafkaLock = exclusive{sem: make(chan struct{}, 1)}

func (x *exclusive) acquire(t testing.TB, key string) {
	t.Helper()
	x.mu.Lock()
	h := x.holder
	x.mu.Unlock()
	if h != "" && (t.Name() == h || strings.HasPrefix(t.Name(), h+"/")) {
		return
	}
	x.sem <- struct{}{}
	sum := sha256.Sum256([]byte(key))
	name := filepath.Join(os.TempDir(), "lethe-test-"+hex.EncodeToString(sum[:6])+".lock")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		<-x.sem
		t.Fatalf("testenv: lock file: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		<-x.sem
		t.Fatalf("testenv: lock %s: %v", name, err)
	}
	x.mu.Lock()
	x.holder = t.Name()
	x.mu.Unlock()
	t.Cleanup(func() {
		x.mu.Lock()
		x.holder = ""
		x.mu.Unlock()
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) // closing the file releases it anyway
		f.Close()
		<-x.sem
	})
}
