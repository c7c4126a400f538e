// Package proc is the one subprocess transport every subprocess adapter
// uses (docs/contract.md §4.8, "Subprocess safety"): argument-vector exec only,
// a new process group, stdin from /dev/null unless the adapter opts in, an
// allow-listed environment, stdout framed as newline-delimited or directly
// concatenated JSON maps (package ndjson), stderr drained concurrently with
// its first 256 KiB kept, typed errors for a missing binary and a non-zero
// exit, and SIGTERM-then-SIGKILL teardown of the whole group on every path.
//
// Children die with their runner, as far as Linux allows. Each child gets
// the parent-death signal SIGKILL (see sysProcAttr for why it is forked
// and waited on one locked OS thread). Its grandchildren do not inherit
// that, so with Spec.StateDir set each live process group is recorded in a
// host-local directory, and Reap, which a runner calls at start, SIGKILLs
// what is left of the groups of runners that have died. What does not
// hold: a grandchild that leaves the group (setsid or setpgid) escapes the
// teardown, the parent-death signal and Reap alike; grandchildren of a dead
// runner run until a runner starts again on the host; a set-user-ID child
// loses the parent-death signal; and without /proc nothing is recorded. The
// runner is not made a child subreaper (PR_SET_CHILD_SUBREAPER): orphans
// would become its children, zombies until reaped, and reaping them with a
// wait for any child would race os/exec's own Wait; the records reach the
// same grandchildren without it. A container whose PID 1 is the runner, or
// systemd's KillMode=control-group, ends every descendant with the runner.
package proc
