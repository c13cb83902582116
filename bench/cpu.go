package bench

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) this process has spent so far: in the
// end-to-end phases every service and every stand-in but redis-server run in it. CPU per
// erasure depends far less on how busy the shared machine is than rates and latencies do.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuPerErasure is cpu spread over n erasures, in milliseconds.
func cpuPerErasure(cpu time.Duration, n int) float64 {
	return float64(cpu) / float64(time.Millisecond) / float64(max(n, 1))
}
