package testenv

import "syscall"

// procAttr puts a child in a process group of its own (stopped as a whole) and has the
// kernel kill it when the thread that started it ends, so that no broker outlives a test
// process that crashed or was killed.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
