//go:build !linux

package testenv

import "syscall"

// procAttr puts a child in a process group of its own. Only Linux kills it when its
// parent dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
