package main

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/agentmesh/agentmesh/pkg/sandbox"
)

// cmdSandbox checks the sandbox on this machine as a subprocess runner
// would build it (AGENTMESH_SANDBOX_CGROUP, AGENTMESH_SANDBOX_RUNTIME_DIR,
// AGENTMESH_SANDBOX_INIT):
// a confined probe runs, and how runs are limited is printed; exit 1
// names what is missing.
func cmdSandbox(ctx context.Context, args []string, io *stdio) error {
	check := func(_ context.Context, args []string, io *stdio) error {
		if helpAsked(args) {
			fmt.Fprintln(io.stderr, "usage: agentmesh sandbox check\n  runs a confined probe as a subprocess runner on this machine would, and prints how runs are confined and limited")
			return flag.ErrHelp
		}
		if len(args) > 0 {
			return usageErr("sandbox check: takes no arguments, got %d", len(args))
		}
		cfg := sandboxConfig(io)
		m, err := sandbox.Check(cfg)
		if err != nil {
			return &exitError{code: exitFail, err: fmt.Errorf("%w\nset AGENTMESH_SANDBOX=off on the subprocess runner to run the CLIs unconfined (docs/operating.md: the sandbox)", err)}
		}
		fmt.Fprintln(io.stdout, "sandbox: ok: a confined probe ran in its own user, mount, pid, network, IPC and UTS namespaces, with no capabilities and a read-only root")
		if cfg.Init != "" {
			fmt.Fprintf(io.stdout, "init: %s\n", cfg.Init)
		} else {
			fmt.Fprintf(io.stdout, "init: this program, re-executed (no %s next to it or on PATH: each run starts about 20 ms slower)\n", sandbox.InitBinary)
		}
		fmt.Fprintf(io.stdout, "ids: a run's uid and gid 0 are %s\n", m.IDs)
		fmt.Fprintf(io.stdout, "seccomp: a deny list modelled on Docker's default profile, EPERM\n")
		if m.Landlock > 0 {
			fmt.Fprintf(io.stdout, "landlock: ABI %d, a second fence on the file view (writes only in the run's read-write trees)\n", m.Landlock)
		} else {
			fmt.Fprintf(io.stdout, "landlock: absent (%s): the file view rests on its mounts alone\n", m.NoLandlock)
		}
		if m.Cgroup != "" {
			fmt.Fprintf(io.stdout, "limits: %s, each run a cgroup under %s (memory, processes); wall time by the sandbox's init\n", m.Limits, m.Cgroup)
		} else {
			fmt.Fprintln(io.stdout, "limits: rlimits (RLIMIT_NPROC, RLIMIT_DATA; no cgroup this runner may create was found: set AGENTMESH_SANDBOX_CGROUP to a delegated cgroup v2 directory); wall time by the sandbox's init")
		}
		return nil
	}
	// run runs a command confined as a CLI run would be, its workspace
	// the current directory, with no egress: to see what a run sees.
	runCmd := func(ctx context.Context, args []string, io *stdio) error {
		if helpAsked(args) {
			fmt.Fprintln(io.stderr, "usage: agentmesh sandbox run [--] CMD [ARGS]\n  runs CMD confined as a CLI run would be, its workspace the current directory, with no egress")
			return flag.ErrHelp
		}
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
		if len(args) == 0 {
			return usageErr("sandbox run: want a command, as sandbox run -- CMD [ARGS]")
		}
		s, err := sandbox.New(sandboxConfig(io), sandbox.Policy{})
		if err != nil {
			return &exitError{code: exitFail, err: err}
		}
		path, err := exec.LookPath(args[0])
		if err != nil {
			return &exitError{code: exitFail, err: err}
		}
		cmd := &exec.Cmd{Path: path, Args: args, Env: []string{"PATH=" + io.getenv("PATH")}, Stdin: io.stdin, Stdout: io.stdout, Stderr: io.stderr,
			SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}}
		c, err := s.Confine(cmd)
		if err != nil {
			return &exitError{code: exitFail, err: err}
		}
		defer c.Release()
		if err := cmd.Start(); err != nil {
			return &exitError{code: exitFail, err: err}
		}
		if err := c.Started(cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return &exitError{code: exitFail, err: err}
		}
		if err := cmd.Wait(); err != nil {
			return &exitError{code: exitFail, err: fmt.Errorf("sandbox run: %s: %w", args[0], err)}
		}
		return nil
	}
	return subcommand(ctx, "sandbox", args, io, map[string]func(context.Context, []string, *stdio) error{"check": check, "run": runCmd}, "check", "run")
}

// helpAsked reports whether args ask for a command's usage (-h, --help,
// as its first argument).
func helpAsked(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help")
}

// sandboxConfig is the sandbox a runner on this machine would build, from
// the same variables.
func sandboxConfig(io *stdio) sandbox.Config {
	return sandbox.Config{Cgroup: io.getenv("AGENTMESH_SANDBOX_CGROUP"), RuntimeDir: io.getenv("AGENTMESH_SANDBOX_RUNTIME_DIR"),
		Init: sandbox.InitPath(io.getenv("AGENTMESH_SANDBOX_INIT")), UIDBase: atoi(io.getenv("AGENTMESH_SANDBOX_UID_BASE")),
		UIDCount: atoi(io.getenv("AGENTMESH_SANDBOX_UID_COUNT"))}
}

// atoi is s's number, 0 (the default) when it is none.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
