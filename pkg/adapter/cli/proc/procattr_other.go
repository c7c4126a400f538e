//go:build !linux

package proc

import "syscall"

// sysProcAttr puts the child in a new session (its own process group).
// Outside Linux there is no parent-death signal: a runner's children
// outlive it until the next runner on the host reaps their groups.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}
