package testenv

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// EnvStandIns set to 1 runs the S3 and DynamoDB tests on the stand-ins (gofakes3 in
// process, dynalite) instead of moto's server: a quicker local run that needs no Python.
// make test and CI leave it unset.
const EnvStandIns = "LETHE_TEST_STANDINS"

// StandIns reports whether EnvStandIns selects the stand-ins. Tests of behaviour only a
// real server has (Object Lock, checksums, "null" versions) skip under it.
func StandIns() bool { return os.Getenv(EnvStandIns) == "1" }

// SkipOnStandIns skips t when EnvStandIns selects the stand-ins: what it tests needs
// moto's server (or the S3 or DynamoDB of EnvS3 or EnvDynamoDB), such as Object Lock.
func SkipOnStandIns(t testing.TB, what string) {
	t.Helper()
	if StandIns() {
		t.Skipf("%s=1: the stand-ins lack %s", EnvStandIns, what)
	}
}

// motoServer is the one moto server of this test binary.
var motoServer struct {
	once sync.Once
	url  string
	err  error
}

// Moto returns the endpoint of moto's server (S3 and DynamoDB on one port). The server
// is started at the first call in a test binary and shared by all its tests; it is killed
// when the binary exits, however it exits. A server that cannot start fails t.
//
// Tests keep apart on it: S3 and S3With give every bucket a name of the test's own, and
// DynamoDB gives every test an account of its own. Nothing resets the server, so
// parallel tests cannot clear each other's state.
func Moto(t testing.TB) string {
	t.Helper()
	u, err := MotoServer()
	if err != nil {
		t.Fatalf("testenv: moto: %v", err)
	}
	return u
}

// MotoServer is Moto for a program that is not a test (a benchmark, say): the endpoint of
// this process's one moto server, started at the first call.
func MotoServer() (string, error) {
	motoServer.once.Do(func() { motoServer.url, motoServer.err = startMoto() })
	return motoServer.url, motoServer.err
}

// MotoBinary finds moto_server: $LETHE_MOTO_SERVER, or .tools/venv/bin/moto_server in
// the working directory or a parent (make tools installs it there).
func MotoBinary() (string, error) {
	return Tool("LETHE_MOTO_SERVER", "venv", "bin", "moto_server")
}

// Tool finds a file make tools installs under .tools: $env when set, else .tools/<rel> in
// the working directory or the nearest parent that has it.
func Tool(env string, rel ...string) (string, error) {
	if p := os.Getenv(env); env != "" && p != "" {
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	var tried []string
	for d := wd; ; d = filepath.Dir(d) {
		p := filepath.Join(append([]string{d, ".tools"}, rel...)...)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("%s not found (run make tools): tried %s", filepath.Join(rel...), strings.Join(tried, ", "))
}

// startMoto starts moto_server on a free loopback port and waits until it answers. A port
// taken between choosing and binding is retried with another.
func startMoto() (string, error) {
	bin, err := MotoBinary()
	if err != nil {
		return "", err
	}
	var errs []error
	for range 3 {
		u, err := startMotoOnce(bin)
		if err == nil {
			return u, nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

func startMotoOnce(bin string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	out := &tailBuffer{max: 40}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = out, out
	// A process group of its own, and SIGKILL when the test binary dies. The kernel sends
	// Pdeathsig when the thread that forked exits, so the server is started from a
	// goroutine locked to its thread for the server's whole life.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started, exited := make(chan error, 1), make(chan struct{})
	var waitErr error // set before exited closes
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waitErr = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return "", fmt.Errorf("start %s: %w", bin, err)
	}
	u := fmt.Sprintf("http://127.0.0.1:%d", port)
	// Importing moto takes seconds on a busy machine.
	deadline := time.Now().Add(90 * time.Second)
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := c.Get(u + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return u, nil
			}
		}
		select {
		case <-exited:
			return "", fmt.Errorf("moto_server on port %d exited (%v):\n%s", port, waitErr, out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			return "", fmt.Errorf("moto_server did not answer on port %d within 90 s:\n%s", port, out)
		}
	}
}

// freePort is FreePort without a test.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailBuffer keeps the first max lines a process writes (its start-up and any traceback
// that stopped it); later lines, one per request, are dropped.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	lines []string
	part  string
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.lines) >= b.max {
		return len(p), nil
	}
	s := b.part + string(p)
	for {
		line, rest, ok := strings.Cut(s, "\n")
		if !ok {
			b.part = s
			break
		}
		if len(b.lines) < b.max {
			b.lines = append(b.lines, line)
		}
		s = rest
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(append(b.lines, b.part), "\n")
}

// DynamoDB returns the endpoint a test's DynamoDB clients use:
//   - with EnvDynamoDB set, that server (failing t when nothing listens there); tables are
//     then named with DynamoTable so that tests stay apart and are deleted;
//   - with EnvStandIns, a dynalite of the test's own;
//   - otherwise moto's server through a loopback proxy that gives the test an AWS account
//     of its own (moto keeps tables per account), so fixed table names do not collide with
//     other tests'. The tables are deleted when t ends. moto serves requests on threads
//     with no lock around its tables, so two conditional writes of one item can both pass
//     their check, where DynamoDB makes each atomic: the proxy passes the test's requests
//     one at a time.
//
// Any credentials and region work on moto and dynalite.
func DynamoDB(t testing.TB) string {
	t.Helper()
	if ep := os.Getenv(EnvDynamoDB); ep != "" {
		reachable(t, EnvDynamoDB, ep)
		return ep
	}
	if StandIns() {
		return Dynalite(t)
	}
	return motoAccount(t, Moto(t))
}

// DynamoDBValidating returns the endpoint of a DynamoDB that rejects invalid table names
// (shorter than 3 characters, say) with a ValidationException, as DynamoDB does: the
// server of EnvDynamoDB, or a dynalite of t's own. moto answers such a name as a missing
// table.
func DynamoDBValidating(t testing.TB) string {
	t.Helper()
	if ep := os.Getenv(EnvDynamoDB); ep != "" {
		reachable(t, EnvDynamoDB, ep)
		return ep
	}
	return Dynalite(t)
}

// motoAccount serves a proxy of moto at base that stamps every request with a new
// account id, and deletes that account's tables when t ends.
func motoAccount(t testing.TB, base string) string {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	account := newAccountID()
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Header.Set("X-Moto-Account-Id", account)
	}}
	var one sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		one.Lock()
		defer one.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		dropTables(t, base, account)
	})
	return srv.URL
}

// newAccountID is a random 12-digit AWS account id.
func newAccountID() string {
	n, _ := rand.Int(rand.Reader, big.NewInt(9e11))
	return strconv.FormatInt(n.Int64()+1e11, 10)
}

// accountHeader adds moto's account header to every request.
type accountHeader struct {
	account string
	next    http.RoundTripper
}

func (a accountHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Moto-Account-Id", a.account)
	return a.next.RoundTrip(r)
}

// dropTables deletes every table of account on the moto at base, freeing its memory.
func dropTables(t testing.TB, base, account string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(base),
		HTTPClient:   &http.Client{Transport: accountHeader{account, http.DefaultTransport}},
	})
	var names []string
	p := dynamodb.NewListTablesPaginator(c, &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Errorf("testenv: list the tables of moto account %s: %v", account, err)
			return
		}
		names = append(names, page.TableNames...)
	}
	for _, name := range names {
		if _, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
			t.Errorf("testenv: delete table %s: %v", name, err)
		}
	}
}
