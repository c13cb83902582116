package chaos

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuLimiter confines processes to a share of one CPU each, as a container's CPU limit
// does (Kubernetes resources.limits.cpu): every process gets a cgroup of its own with a
// CFS quota of cores × period, under a group the limiter made and removes on Close. That
// group has the largest CPU weight, so that its processes get their shares first when
// the machine is busy, as a pod whose CPU request equals its limit does on its node: the
// stores' stand-ins, which in a deployment run on machines of their own, only get what
// the limited processes leave (without it, four 50m instances used 75% of their quota in
// a phase where dynalite and the aggregator kept the two cores busy, and one used 96%).
// It uses the cgroup v2 cpu controller when the unified hierarchy offers it, else the v1
// cpu controller.
type cpuLimiter struct {
	root  string // the limiter's own group
	v2    bool
	cores float64
}

// cfsPeriod is the quota period: 100 ms, the kernel's default.
const cfsPeriod = 100_000 // µs

// newCPULimiter makes the limiter's group, or fails naming why processes cannot be limited
// here (no cpu controller, or no permission to make groups).
func newCPULimiter(cores float64) (*cpuLimiter, error) {
	if cores <= 0 || cores > 64 {
		return nil, fmt.Errorf("chaos: CPU limit %g: want a share of a core above 0", cores)
	}
	name := fmt.Sprintf("lethe-scaling-%d", os.Getpid())
	l := &cpuLimiter{cores: cores}
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(" "+string(b)+" ", " cpu ") {
		l.root, l.v2 = filepath.Join("/sys/fs/cgroup", name), true
	} else if fi, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); err == nil && !fi.IsDir() {
		l.root = filepath.Join("/sys/fs/cgroup/cpu", name)
	} else {
		return nil, errors.New("chaos: per-instance CPU limits need a cgroup cpu controller (v2 cpu.max or v1 cpu.cfs_quota_us), and this machine offers neither")
	}
	if err := os.Mkdir(l.root, 0o755); err != nil {
		return nil, fmt.Errorf("chaos: per-instance CPU limits: %w", err)
	}
	if l.v2 { // children get the cpu controller
		if err := os.WriteFile(filepath.Join(l.root, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
			os.Remove(l.root)
			return nil, fmt.Errorf("chaos: per-instance CPU limits: %w", err)
		}
	}
	weight := [2]string{"cpu.shares", "262144"}
	if l.v2 {
		weight = [2]string{"cpu.weight", "10000"}
	}
	if err := os.WriteFile(filepath.Join(l.root, weight[0]), []byte(weight[1]), 0); err != nil {
		os.Remove(l.root)
		return nil, fmt.Errorf("chaos: per-instance CPU limits: %s: %w", weight[0], err)
	}
	return l, nil
}

// limit moves process pid into a group of its own named name with the limiter's quota. The
// returned release removes the group once the process has exited.
func (l *cpuLimiter) limit(name string, pid int) (release func(), err error) {
	dir := filepath.Join(l.root, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	release = func() {
		for range 50 { // the kernel refuses while the exiting process is still counted
			if err := os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	quota := strconv.Itoa(int(l.cores * cfsPeriod))
	writes := [][2]string{{"cpu.cfs_period_us", strconv.Itoa(cfsPeriod)}, {"cpu.cfs_quota_us", quota}}
	if l.v2 {
		writes = [][2]string{{"cpu.max", quota + " " + strconv.Itoa(cfsPeriod)}}
	}
	writes = append(writes, [2]string{"cgroup.procs", strconv.Itoa(pid)})
	for _, w := range writes {
		if err := os.WriteFile(filepath.Join(dir, w[0]), []byte(w[1]), 0); err != nil {
			release()
			return nil, fmt.Errorf("chaos: limit %s to %g CPU: %s: %w", name, l.cores, w[0], err)
		}
	}
	return release, nil
}

// Close removes the limiter's group; the processes' groups must be released first.
func (l *cpuLimiter) Close() error { return os.Remove(l.root) }

// FormatCPU writes a share of a core as Kubernetes does: 50m, 1.5.
func FormatCPU(cores float64) string {
	if m := cores * 1000; m == float64(int64(m)) && cores < 1 {
		return strconv.FormatInt(int64(m), 10) + "m"
	}
	return strconv.FormatFloat(cores, 'f', -1, 64)
}

// ParseCPU reads a share of a core written as Kubernetes writes it (50m, 0.05, 1).
func ParseCPU(s string) (float64, error) {
	var v float64
	var err error
	if m, ok := strings.CutSuffix(s, "m"); ok {
		v, err = strconv.ParseFloat(m, 64)
		v /= 1000
	} else {
		v, err = strconv.ParseFloat(s, 64)
	}
	if err != nil || v < 0 {
		return 0, fmt.Errorf("CPU %q: want a share of a core such as 50m or 0.05", s)
	}
	return v, nil
}
