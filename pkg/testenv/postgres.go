package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres starts a PostgreSQL server (initdb, then postgres) in a temporary directory on a
// free loopback port and returns the DSN of its database "postgres" for the superuser
// "lethe" (trust authentication, UTF-8, C locale, no fsync). It is stopped and its
// directory removed when t ends. The binaries come from $PATH or /usr/lib/postgresql/*/bin
// (Debian's postgresql package), the newest version first. PostgreSQL refuses to run as
// root: under root the server runs as the system user "postgres", else "nobody". A server
// that cannot be started fails t.
func Postgres(t testing.TB) string {
	t.Helper()
	bin, err := postgresBin()
	if err != nil {
		t.Fatalf("testenv: %v (install the postgresql package)", err)
	}
	dir, err := os.MkdirTemp("", "lethe-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cred, err := unprivileged(dir)
	if err != nil {
		t.Fatalf("testenv: postgres: %v", err)
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "lethe", "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync")
	initdb.Dir, initdb.SysProcAttr = dir, &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("testenv: initdb: %v\n%s", err, out)
	}
	port := FreePort(t)
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=100", "-c", "shared_buffers=16MB")
	cmd.Dir, cmd.SysProcAttr = dir, &syscall.SysProcAttr{Credential: cred}
	start(t, cmd, port)
	t.Cleanup(func() { stopPostgres(cmd, data) }) // runs before start's kill
	dsn := fmt.Sprintf("postgres://lethe@127.0.0.1:%d/postgres?sslmode=disable", port)
	// The postmaster listens before it accepts sessions: wait until one connects.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		c, err := pgx.Connect(ctx, dsn)
		if err == nil {
			c.Close(ctx)
			return dsn
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: postgres on port %d accepts no session: %v", port, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// postgresBin returns the directory holding initdb and postgres.
func postgresBin() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(found, func(a, b string) int { return version(b) - version(a) })
	for _, p := range found {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no initdb with a postgres beside it on $PATH or in /usr/lib/postgresql/*/bin")
}

// version is the major version in /usr/lib/postgresql/<version>/bin/initdb.
func version(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// unprivileged returns the credential the server runs with — nil when the test does not
// run as root — and gives that user dir.
func unprivileged(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("running as root and no user postgres or nobody to run the server as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// stopPostgres asks the postmaster for a fast shutdown and waits up to 10 s for it to
// remove its pid file, so that no backend or shared memory outlives the test.
func stopPostgres(cmd *exec.Cmd, data string) {
	if cmd.Process == nil || cmd.Process.Signal(syscall.SIGINT) != nil {
		return
	}
	pid := filepath.Join(data, "postmaster.pid")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(pid); os.IsNotExist(err) {
			return
		}
	}
}
