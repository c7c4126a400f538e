package proc

import "syscall"

// sysProcAttr puts the child in a new session (its own process group, with
// no controlling terminal) and has the kernel SIGKILL it when its parent
// dies.
//
// Linux delivers the parent-death signal when the *thread* that forked the
// child exits, not when the process does (prctl(2), PR_SET_PDEATHSIG; Go
// issue 27505). The Go runtime ends an OS thread when a goroutine locked to
// it returns without unlocking, so any other code's locked goroutine could
// otherwise take the forking thread down with it and kill a healthy child.
// start therefore forks from a goroutine locked to its thread and keeps it
// locked until the child is reaped: no other goroutine runs on that thread
// meanwhile, and the thread outlives the child. Go's fork itself closes the
// race with a parent that dies before prctl runs (the child checks its
// parent pid and signals itself). The setting is cleared in a child that
// executes a set-user-ID, set-group-ID or file-capability binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}
