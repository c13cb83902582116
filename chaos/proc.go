package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one child process that can be killed and started again with the same command,
// environment and ports. Its output goes to <dir>/<name>.log, appended across restarts.
// Methods are safe for concurrent use.
type Proc struct {
	Name string
	Path string
	Args []string
	Env  []string // added to the harness's environment
	Port int      // a TCP port it listens on when ready; 0: no readiness wait
	Dir  string   // log directory
	// Limit, when set, is applied to each start's process id (a CPU limit, cpuLimiter);
	// release runs once that process has exited. A failed Limit fails the start.
	Limit func(pid int) (release func(), err error)

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	starts   int
	kills    int
	retired  bool
	signaled bool // the last exit was asked for (Kill, Stop)
}

// errRetired is returned by Start once Retire was called.
var errRetired = errors.New("chaos: process retired")

// Retire stops the process in an orderly way (SIGTERM) for good: Start refuses to start
// it again, so a concurrent kill-and-restart cannot resurrect a removed instance.
func (p *Proc) Retire() error {
	p.mu.Lock()
	p.retired = true
	p.mu.Unlock()
	return p.Stop()
}

// Start starts the process and waits until Port accepts connections (up to 30 s).
func (p *Proc) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.retired {
		p.mu.Unlock()
		return errRetired
	}
	if p.cmd != nil {
		p.mu.Unlock()
		return fmt.Errorf("chaos: %s already running", p.Name)
	}
	log, err := os.OpenFile(filepath.Join(p.Dir, p.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		p.mu.Unlock()
		return fmt.Errorf("chaos: start %s: %w", p.Name, err)
	}
	release := func() {}
	if p.Limit != nil {
		if release, err = p.Limit(cmd.Process.Pid); err != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			log.Close()
			p.mu.Unlock()
			return err
		}
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); release(); close(exited) }()
	p.cmd, p.exited, p.signaled = cmd, exited, false
	p.starts++
	p.mu.Unlock()
	if p.Port == 0 {
		return nil
	}
	return waitPort(ctx, p.Port, exited, 30*time.Second)
}

// waitPort waits until 127.0.0.1:port accepts a connection, the process exits, or d passes.
func waitPort(ctx context.Context, port int, exited <-chan struct{}, d time.Duration) error {
	deadline := time.Now().Add(d)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("chaos: process exited before listening on %s", addr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: nothing listens on %s after %s", addr, d)
		}
	}
}

// Kill sends SIGKILL to the process group and waits for the process to exit.
func (p *Proc) Kill() error { return p.signal(syscall.SIGKILL, true) }

// Stop sends SIGTERM and waits for an orderly exit (SIGKILL after 15 s).
func (p *Proc) Stop() error { return p.signal(syscall.SIGTERM, false) }

func (p *Proc) signal(sig syscall.Signal, kill bool) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	if cmd == nil {
		p.mu.Unlock()
		return nil
	}
	if kill {
		p.kills++
	}
	p.signaled = true
	p.mu.Unlock()
	err := syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	p.mu.Lock()
	p.cmd, p.exited = nil, nil
	p.mu.Unlock()
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Running reports whether the process was started and has not exited.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// clockTicks is the unit of utime and stime in /proc/<pid>/stat: USER_HZ, which Linux
// exposes as 100 on every architecture (sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// CPU returns the CPU time (user and system) the running process has used since it
// started, from /proc/<pid>/stat; an error when it is not running or not on Linux.
func (p *Proc) CPU() (time.Duration, error) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return 0, fmt.Errorf("chaos: %s is not running", p.Name)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("chaos: cpu of %s: %w", p.Name, err)
	}
	return statCPU(string(b))
}

// statCPU parses utime + stime out of a /proc/<pid>/stat line. The command name (field 2)
// is in parentheses and may hold spaces, so fields are counted after its closing one:
// state is field 3, utime 14 and stime 15.
func statCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("chaos: malformed /proc stat line")
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("chaos: short /proc stat line")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("chaos: /proc stat cpu field: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// Starts is how many times the process was started; Kills how many times it was killed.
func (p *Proc) Starts() int { p.mu.Lock(); defer p.mu.Unlock(); return p.starts }

// Kills is how many times the process was killed with SIGKILL.
func (p *Proc) Kills() int { p.mu.Lock(); defer p.mu.Unlock(); return p.kills }

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
