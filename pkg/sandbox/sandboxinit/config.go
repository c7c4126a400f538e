// Package sandboxinit is the init of pkg/sandbox: pid 1 of a confined
// run's namespaces, which builds the run's file system view from the
// Config the runner sends it, relays its egress to the runner's proxy,
// starts the CLI without capabilities and ends every process left when
// the CLI exits.
//
// It depends on the standard library and golang.org/x/sys only, so that
// the small agentmesh-sandbox-init binary (cmd/agentmesh-sandbox-init)
// starts in a few milliseconds. Importing the package registers the init
// in any program: started with one of the names below as its argv[0],
// the program runs as the init (or its exec step, or Check's probe) and
// nothing else, before its main. A runner with no init binary re-executes
// itself that way.
package sandboxinit

import "time"

// The names the init answers to (argv[0]).
const (
	// InitName starts the init; its Config is on fd 3, the descriptors of
	// its tree mounts on 4 and after (argv[1] counts them).
	InitName = "agentmesh-sandbox-init"
	// ExecName is the init's last step before a CLI that rlimits bind.
	ExecName = "agentmesh-sandbox-exec"
	// ProbeName is pkg/sandbox.Check's probe, run confined.
	ProbeName = "agentmesh-sandbox-probe"
	// HoldName holds the user namespace it was started in until its stdin
	// ends, for pkg/sandbox to open (an idmapped mount's).
	HoldName = "agentmesh-sandbox-hold"
)

// Version is the version of Config. The init refuses another, so that an
// init binary older or newer than its runner fails the run it was given,
// naming both, rather than building a view it misreads.
const Version = 3

// A Mount is one step of the init's file system view; Dst is inside.
type Mount struct {
	// bind, robind, file (a bound file), tree (a mount the runner opened,
	// whose descriptor Data names), tmpfs, symlink, write, proc, devpts
	Kind string
	Src  string
	Dst  string
	Data string // tmpfs or devpts options, symlink target, a write's text, a tree's descriptor
	// RO remounts a tmpfs read-only once the view is built; a tree is
	// read-only already, and RO says so (for the Landlock fence).
	RO bool
}

// A Listener is one egress endpoint inside: Addr listens, Target is what
// the runner's proxy is asked for.
type Listener struct {
	Addr   string
	Target string
}

// BPF is one instruction of a classic BPF program (struct sock_filter).
type BPF struct {
	Code   uint16
	Jt, Jf uint8
	K      uint32
}

// Go is the byte the runner writes on fd 3 after the Config once the
// run is in its cgroup: the init builds the view meanwhile, and starts
// the CLI only then.
const Go = 'G'

// Config is what the runner tells its init on fd 3, as a frame (Encode),
// followed by Go.
type Config struct {
	V        int
	Root     string
	Mounts   []Mount
	Listen   []Listener
	Socket   string
	Dir      string
	Path     string
	Args     []string
	Env      []string
	Procs    int   // as an rlimit, when no cgroup holds the run
	Memory   int64 // as an rlimit, likewise
	WallTime time.Duration
	// Seccomp is the filter the CLI runs under, installed just before its
	// exec (none when empty).
	Seccomp []BPF
}
