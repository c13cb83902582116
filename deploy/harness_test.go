package deploy

// The harness of the contract tests: the service binaries built once, local stand-ins for
// the backing services a deployment names (a kfake broker, the Qdrant emulator,
// redis-server, moto's server for DynamoDB and S3), and processes run with exactly the environment a
// manifest gives them.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/lethe-erasure/lethe/pkg/auditlog/dynamo"
	"github.com/lethe-erasure/lethe/pkg/envelope/dynamokeys"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
	lethe "github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// binaries builds every service binary and lethectl once per test process into a
// directory any user can read and execute, and returns it.
func binaries(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "lethe-deploy-bin-"); binErr != nil {
			return
		}
		if binErr = os.Chmod(binDir, 0o755); binErr != nil {
			return
		}
		args := []string{"build", "-o", binDir + string(filepath.Separator)}
		for _, s := range services {
			args = append(args, "./services/"+s.name)
		}
		args = append(args, "./cmd/lethectl")
		cmd := exec.Command("go", args...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// standIns are the local components that play a deployment's backing services.
type standIns struct {
	kafka  []string // broker addresses
	qdrant string   // host:port (gRPC)
	redis  string   // host:port
	dynamo string   // endpoint URL
	s3     string   // endpoint URL
	// registry is a Schema Registry's URL: franz-go's srfake, since no registry installs
	// here (docs/real-components.md).
	registry string
}

// startStandIns starts a Kafka cluster of at least brokers brokers on which Lethe's topics
// do not exist yet (testenv.KafkaEmpty: Apache Kafka, or kfake), the Qdrant emulator, a
// redis-server with the extra arguments (ACL users), and DynamoDB and S3 (testenv: moto's
// server) with the versioned buckets.
func startStandIns(t *testing.T, brokers int, redisArgs []string, buckets ...string) *standIns {
	t.Helper()
	kafka := testenv.KafkaEmpty(t, brokers, lethe.Topics...)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	q := qdrantfake.New()
	go q.Serve(l)
	t.Cleanup(q.Close)
	s3 := testenv.S3(t, buckets...)
	reg := httptest.NewServer(srfake.NewRegistry().Handler())
	t.Cleanup(reg.Close)
	return &standIns{
		kafka:    kafka.Brokers,
		qdrant:   l.Addr().String(),
		redis:    testenv.RedisArgs(t, redisArgs...),
		dynamo:   testenv.DynamoDB(t),
		s3:       s3.URL,
		registry: reg.URL,
	}
}

// createTables creates the audit and data-key tables in region, as a platform team
// provisions them before a deployment that does not create its own. DynamoDB tables
// belong to a region: the services find them only in the region they are configured with.
func (s *standIns) createTables(t *testing.T, region, audit, keys string) {
	t.Helper()
	c := dynamodb.New(dynamodb.Options{Region: region, BaseEndpoint: aws.String(s.dynamo),
		Credentials: credentials.NewStaticCredentialsProvider("contract", "contract", "")})
	if err := dynamo.New(c, audit).CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	if keys == "" {
		return // no shared key table configured: nothing to provision
	}
	if err := dynamokeys.New(c, keys).CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// checkTables fails t unless the audit table (keys pk, sk) and the data-key table (key pk)
// exist in region, as the tables Job must have created them.
func (s *standIns) checkTables(t *testing.T, region, audit, keys string) {
	t.Helper()
	c := dynamodb.New(dynamodb.Options{Region: region, BaseEndpoint: aws.String(s.dynamo),
		Credentials: credentials.NewStaticCredentialsProvider("contract", "contract", "")})
	for table, want := range map[string]string{audit: "pk sk", keys: "pk"} {
		out, err := c.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatalf("table %s in %s after the tables Job: %v", table, region, err)
		}
		var got []string
		for _, k := range out.Table.KeySchema {
			got = append(got, aws.ToString(k.AttributeName))
		}
		if strings.Join(got, " ") != want {
			t.Errorf("table %s: key schema %v, want %s", table, got, want)
		}
	}
}

// rewriter rewrites a manifest's environment for processes that share one host (one per
// process: its listen ports are its own): the host:port (or URL) of each backing service,
// as a whole value or one of a comma-separated list, becomes its stand-in's, a listen address becomes a
// free loopback port, and a path under a volume's mount point becomes the same path under
// the directory that plays the volume. Every rewrite is logged; values it does not match
// pass unchanged.
type rewriter struct {
	t      *testing.T
	hosts  map[string]string // "kafka:9092" -> "127.0.0.1:41234", "http://dynamodb:8000" -> URL
	mounts map[string]string // container path -> host directory or file
	ports  map[int]int       // container port -> host port, filled by listen rewrites
}

func (r *rewriter) env(name string, kv map[string]string) []string {
	out := make([]string, 0, len(kv))
	for _, k := range sortedKeys(kv) {
		v := r.value(name, k, kv[k])
		out = append(out, k+"="+v)
	}
	return out
}

func (r *rewriter) value(name, k, v string) string {
	orig := v
	if host, port, err := net.SplitHostPort(v); err == nil && (host == "0.0.0.0" || host == "") {
		cp, _ := strconv.Atoi(port)
		hp := r.ports[cp]
		if hp == 0 {
			hp = testenv.FreePort(r.t)
			r.ports[cp] = hp
		}
		v = fmt.Sprintf("127.0.0.1:%d", hp)
	} else {
		parts := strings.Split(v, ",")
		for i, part := range parts {
			if to, ok := r.hosts[part]; ok {
				parts[i] = to
			}
		}
		v = strings.Join(parts, ",")
		mounts := sortedKeys(r.mounts)
		slices.SortStableFunc(mounts, func(a, b string) int { return len(b) - len(a) }) // the deepest mount first
		for _, from := range mounts {
			if v == from || strings.HasPrefix(v, from+"/") {
				v = r.mounts[from] + strings.TrimPrefix(v, from)
				break
			}
		}
	}
	if v != orig {
		r.t.Logf("%s: %s=%s rewritten to %s", name, k, orig, v)
	}
	return v
}

// proc is one service process.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	mu   *sync.Mutex
	done chan struct{}
}

// start runs bin with exactly env (nothing of the test's own environment), in dir, as
// cred when not nil, and kills it when t ends.
func start(t *testing.T, name, bin string, args, env []string, dir string, cred *syscall.Credential) *proc {
	t.Helper()
	p := &proc{name: name, out: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env, p.cmd.Dir = env, dir
	w := lockedWriter{p}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: start: %v", name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		// Stopped as Kubernetes stops a pod (a service leaves its consumer groups), killed
		// after 5 s.
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.output())
		}
	})
	return p
}

type lockedWriter struct{ p *proc }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// wait waits for a one-shot process to exit and fails t unless it exits 0.
func (p *proc) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s did not finish within %s", p.name, d)
	}
	if !p.cmd.ProcessState.Success() {
		t.Fatalf("%s: %v\n%s", p.name, p.cmd.ProcessState, p.output())
	}
}

// waitHTTP polls url until it answers 200, failing t if the process exits first or 60 s
// pass.
func (p *proc) waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before %s answered:\n%s", p.name, p.cmd.ProcessState, url, p.output())
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: %s never answered 200 (last: %s)\n%s", p.name, url, last, p.output())
}

// awaitOutcome polls the status of a request with the bearer token until it is COMPLETE,
// or FAILED with every store reported (60 s at most), and returns it.
func awaitOutcome(t *testing.T, baseURL, token, requestID string) intake.Status {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var st intake.Status
	for time.Now().Before(deadline) {
		st = intake.Status{}
		code := getJSON(t, baseURL+"/v1/erasures/"+requestID, token, &st)
		reported := !slices.ContainsFunc(st.Stores, func(s intake.StoreState) bool { return s.Status == intake.Pending })
		if code == http.StatusOK && (st.State == intake.StateComplete || st.State == intake.StateFailed && reported) {
			return st
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("request %s: no outcome within 60 s; last status %+v", requestID, st)
	return st
}

func getJSON(t *testing.T, url, token string, v any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
	}
	return resp.StatusCode
}

// submit POSTs body (JSON) to baseURL's /v1/erasures with token and idempotency key idem
// (none when empty), and returns the status code and the decoded answer.
func submit(t *testing.T, baseURL, token, idem, body string) (int, intake.Accepted) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, baseURL+"/v1/erasures", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var acc intake.Accepted
	if resp.StatusCode == http.StatusAccepted {
		if err := json.NewDecoder(resp.Body).Decode(&acc); err != nil {
			t.Fatalf("POST %s/v1/erasures: %v", baseURL, err)
		}
	}
	return resp.StatusCode, acc
}

// readOnlyDir returns a directory that the service processes cannot write: owned by root
// with mode 0555 when they run as another user, else the test's own made read-only.
func readOnlyDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "lethe-ro-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(d, 0o755); os.RemoveAll(d) })
	return d
}

// volumeDir returns a directory that plays a writable volume for a process running as
// uid:gid (-1: the test's own user).
func volumeDir(t *testing.T, uid, gid int) string {
	t.Helper()
	d, err := os.MkdirTemp("", "lethe-vol-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if uid >= 0 {
		if err := os.Chown(d, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// writableDir returns a directory the processes may write (a container's own writable
// filesystem).
func writableDir(t *testing.T) string {
	t.Helper()
	return volumeDir(t, -1, -1)
}
