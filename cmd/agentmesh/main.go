// Command agentmesh runs the whole mesh in one process (agentmesh up) and
// talks to a running mesh: agentmesh run submits a run and streams its
// events, agentmesh status prints a run's record, agentmesh cancel cancels
// a run. agentmesh profiles lists, shows (with the pin a run would carry)
// and validates the profile documents without a mesh. Run agentmesh -h for
// the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal the default behavior returns: a second Ctrl-C
	// kills a command that is still shutting down or waiting for a cancel.
	context.AfterFunc(ctx, stop)
	io := newStdio(os.Stdout, os.Stderr, os.Getenv)
	io.environ = os.Environ
	if strings.ContainsRune(os.Args[0], '/') && !strings.HasPrefix(os.Args[0], os.TempDir()) {
		io.self = os.Args[0] // bin/agentmesh, not go run's temporary build
	}
	code := run(ctx, os.Args[1:], io)
	stop()
	os.Exit(code)
}
