package storagecmp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/auditlogtest"
)

// crashChild is the environment variable that makes TestCrashDuringAppends the child
// process: it names the store kind and the directory, separated by a colon.
const crashChild = "STORAGECMP_CRASH_CHILD"

// acked is how many receipts the child must have acknowledged before it is killed.
const acked = 200

// TestCrashDuringAppends kills (SIGKILL) a process while 8 goroutines issue receipts into
// the store, then opens the store: it must open, hold every receipt the child reported as
// issued, and its chain must verify (a head one receipt ahead, an Issue cut between its two
// writes, is the one allowed state). A killed process loses nothing the kernel already
// has, so this checks what the store does with a crash mid-append, not a power loss.
func TestCrashDuringAppends(t *testing.T) {
	if spec := os.Getenv(crashChild); spec != "" {
		runCrashChild(t, spec)
		return
	}
	for _, k := range auditKinds {
		t.Run("store="+k.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDuringAppends$")
			cmd.Env = append(os.Environ(), crashChild+"="+k.name+":"+dir)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var ids []string
			sc := bufio.NewScanner(out)
			for len(ids) < acked && sc.Scan() {
				ids = append(ids, sc.Text())
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			for sc.Scan() { // lines written before the kill
				ids = append(ids, sc.Text())
			}
			_ = cmd.Wait()
			if len(ids) < acked {
				t.Fatalf("child acknowledged %d receipts before it ended, want %d", len(ids), acked)
			}

			s, err := k.open(dir)
			if err != nil {
				t.Fatalf("open after kill: %v", err)
			}
			defer s.Close()
			if ds, ok := s.(*auditlog.DirStore); ok {
				for _, r := range ds.Repairs() {
					t.Logf("repaired on open: %s", r)
				}
			}
			ctx := context.Background()
			for _, id := range ids {
				if _, err := s.GetReceipt(ctx, id); err != nil {
					t.Errorf("acknowledged receipt %s lost: %v", id, err)
				}
			}
			if err := auditlog.VerifyChain(ctx, s, "acme"); err != nil && !errors.Is(err, auditlog.ErrChainPending) {
				t.Errorf("chain after kill: %v", err)
			}
			t.Logf("%d acknowledged receipts, all present after kill -9", len(ids))
		})
	}
}

// runCrashChild issues receipts from 8 goroutines until it is killed, printing the request
// id of each issued one.
func runCrashChild(t *testing.T, spec string) {
	var k auditKind
	var dir string
	for _, c := range auditKinds {
		if p := c.name + ":"; len(spec) > len(p) && spec[:len(p)] == p {
			k, dir = c, spec[len(p):]
		}
	}
	if k.open == nil {
		t.Fatalf("bad %s %q", crashChild, spec)
	}
	s, err := k.open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				id := requestID()
				if _, err := auditlog.Issue(context.Background(), s, auditlogtest.Receipt("acme", id)); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintln(w, id)
				w.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
