// Package testenv starts the real components that integration tests run against: a
// redis-server and a PostgreSQL server on free loopback ports, Apache Kafka brokers as
// processes (kfake in process with EnvBroker=kfake), and moto's server for S3 and
// DynamoDB (one per test binary, each test on buckets and an account of its own). A
// component that cannot be started fails the test; it is never skipped, so a missing
// prerequisite cannot pass unnoticed in CI.
//
// EnvKafka, EnvS3 and EnvDynamoDB switch Kafka, S3 and DynamoDB to servers started apart
// (AWS itself, or a docker compose of Kafka, MinIO and DynamoDB Local): the tests then
// isolate themselves on the shared server and delete what they created there.
// EnvStandIns runs S3 and DynamoDB on gofakes3 and dynalite instead of moto.
package testenv

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Redis starts a redis-server (from $PATH) with no persistence and returns its address.
// It is stopped when t ends.
func Redis(t testing.TB) string {
	t.Helper()
	return RedisArgs(t)
}

// RedisArgs is Redis with extra redis-server arguments after Lethe's (they may override
// them), such as ACL users: "--user", "lethe", "on", ">password", "~*", "+@all".
func RedisArgs(t testing.TB, extra ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("testenv: redis-server not on PATH (install the redis-server package): %v", err)
	}
	port := FreePort(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--protected-mode", "no")
	cmd.Args = append(cmd.Args, extra...)
	start(t, cmd, port)
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// Dynalite starts a dynalite server of t's own (the stand-in of EnvStandIns; tests call
// DynamoDB) and returns its endpoint URL. It looks for node_modules/dynalite/cli.js under
// $LETHE_DYNALITE_DIR or the repository's .tools folder.
func Dynalite(t testing.TB) string {
	t.Helper()
	cli, err := dynaliteCLI()
	if err != nil {
		t.Fatalf("testenv: %v (run: npm install --prefix .tools dynalite@4.0.0)", err)
	}
	port := FreePort(t)
	cmd := exec.Command("node", cli, "--port", strconv.Itoa(port), "--createTableMs", "0",
		"--deleteTableMs", "0", "--updateTableMs", "0")
	start(t, cmd, port)
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

func dynaliteCLI() (string, error) {
	var dirs []string
	if d := os.Getenv("LETHE_DYNALITE_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			dirs = append(dirs, filepath.Join(d, ".tools"))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, "node_modules", "dynalite", "cli.js")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("dynalite not found in %s", strings.Join(dirs, ", "))
}

// start runs cmd, waits until port accepts connections and stops cmd when t ends.
func start(t testing.TB, cmd *exec.Cmd, port int) {
	t.Helper()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", cmd.Path, err)
	}
	var tail []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if len(tail) < 20 {
				tail = append(tail, sc.Text())
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-ctx.Done():
			cmd.Process.Kill()
			<-done
			t.Fatalf("testenv: %s did not listen on %s: %v\n%s", filepath.Base(cmd.Path), addr, err, strings.Join(tail, "\n"))
		case <-time.After(20 * time.Millisecond):
		}
	}
}
