package chaos

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCPULimitConfinesAProcess: a process spinning on the CPU for a second uses about the
// share of a core its limit allows, against a whole core unlimited, and its group is gone
// once it stopped.
func TestCPULimitConfinesAProcess(t *testing.T) {
	l, err := newCPULimiter(0.1)
	if err != nil {
		t.Fatalf("no per-instance CPU limits on this machine: %v", err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Errorf("limiter's group left behind: %v", err)
		}
	}()
	weight, want := "cpu.shares", "262144"
	if l.v2 {
		weight, want = "cpu.weight", "10000"
	}
	if b, err := os.ReadFile(l.root + "/" + weight); err != nil || strings.TrimSpace(string(b)) != want {
		t.Errorf("the limiter's group %s = %q, %v; want %s, so that limited processes get their shares first", weight, b, err, want)
	}
	spin := func(limited bool) time.Duration {
		p := &Proc{Name: "spin", Path: "/bin/sh", Args: []string{"-c", "while :; do :; done"}, Dir: t.TempDir()}
		if limited {
			p.Limit = func(pid int) (func(), error) { return l.limit(p.Name, pid) }
		}
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		used, err := p.CPU()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
		return used
	}
	unlimited, limited := spin(false), spin(true)
	t.Logf("CPU time in 1 s of spinning: %s unlimited, %s limited to 100m", unlimited, limited)
	if limited > 300*time.Millisecond || limited*2 > unlimited {
		t.Errorf("limited to 100m the spinner used %s of CPU in 1 s (unlimited: %s)", limited, unlimited)
	}
	if _, err := os.Stat(l.root + "/spin"); !os.IsNotExist(err) {
		t.Errorf("the process's group is still there after it stopped: %v", err)
	}
}

func TestParseAndFormatCPU(t *testing.T) {
	for in, want := range map[string]float64{"50m": 0.05, "0.05": 0.05, "1": 1, "1500m": 1.5} {
		got, err := ParseCPU(in)
		if err != nil || got != want {
			t.Errorf("ParseCPU(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "m"} {
		if _, err := ParseCPU(bad); err == nil {
			t.Errorf("ParseCPU(%q) succeeded", bad)
		}
	}
	if got := FormatCPU(0.05); got != "50m" {
		t.Errorf("FormatCPU(0.05) = %q", got)
	}
	if got := FormatCPU(1.5); got != "1.5" {
		t.Errorf("FormatCPU(1.5) = %q", got)
	}
}
