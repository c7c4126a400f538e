// Package proc is the one subprocess transport every subprocess adapter
// uses (shared/DESIGN.md §4 "Subprocess safety"): argument-vector exec only,
// a new process group, stdin from /dev/null unless the adapter opts in, an
// allow-listed environment, stdout framed as newline-delimited or directly
// concatenated JSON maps, stderr drained concurrently with its first 256 KiB
// kept, typed errors for a missing binary and a non-zero exit, and
// SIGTERM-then-SIGKILL teardown of the whole group on every path.
package proc
