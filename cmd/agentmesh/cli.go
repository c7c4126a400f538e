package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/nats-io/nats.go"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the run or request did not succeed
	exitUsage = 2 // bad arguments, configuration or connection
	// exitInterrupted: a signal (SIGINT, SIGTERM) stopped agentmesh run
	// before the run ended (the shell's 128+SIGINT).
	exitInterrupted = 130
)

// stdio is what a command reads and writes besides the network.
type stdio struct {
	stdin  io.Reader // agentmesh decode's input
	stdout io.Writer
	stderr io.Writer // safe for concurrent use
	getenv func(string) string
	color  bool // stdout is a terminal that takes ANSI styles

	// environ is the whole environment, "KEY=value" each (os.Environ),
	// for the check that it names no AGENTMESH_* or AGENT_* variable this
	// build does not read (service.CheckEnvironment); nil for none.
	environ func() []string
	// self is how the user ran this command (os.Args[0]: bin/agentmesh
	// under make run), for the hints that tell them what to type next.
	self string
}

func newStdio(stdout, stderr io.Writer, getenv func(string) string) *stdio {
	return &stdio{
		stdin:  os.Stdin,
		stdout: stdout,
		stderr: &lockedWriter{w: stderr},
		getenv: getenv,
		color:  isTerminal(stdout) && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb",
		self:   "agentmesh",
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// exitError ends a command with code, printing err unless it is nil.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErr is a usage or connection problem: exit code 2.
func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// failed ends a command with exit code 1 without a message: what failed has
// been printed already.
var failed = &exitError{code: exitFail}

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, io *stdio) error
}

var commands = []command{
	{"up", "start an embedded NATS JetStream server and every service in one process", cmdUp},
	{"run", "submit a run and stream its events", cmdRun},
	{"status", "print a run's record", cmdStatus},
	{"cancel", "cancel a queued or running run", cmdCancel},
	{"send", "send a follow-up prompt to a session run, or interrupt its turn", cmdSend},
	{"approve", "allow a session's permission request", cmdApprove},
	{"deny", "deny a session's permission request", cmdDeny},
	{"acp", "speak the Agent Client Protocol on stdin/stdout, as an editor's agent, on the mesh's pool", cmdACP},
	{"profiles", "list, show or validate the profile documents (no mesh needed)", cmdProfiles},
	{"consent", "grant, withdraw or show a principal's trajectory export consent", cmdConsent},
	{"redaction", "set, show or check (offline) a tenant's redaction rules", cmdRedaction},
	{"exports", "list, get, verify or sweep the exported trajectories", cmdExports},
	{"spend", "show a tenant's or a principal's exact spend, in all or by profile, label or day", cmdSpend},
	{"budget", "set, show or clear a tenant's or a principal's budget", cmdBudget},
	{"quota", "set or show a tenant's most runs admitted and not ended", cmdQuota},
	{"decode", "print one agentmesh message read from stdin as JSON (nats sub --translate 'agentmesh decode')", cmdDecode},
	{"follow", "print a run's events from a seq on, until it ends", cmdFollow},
	{"runs", "list the run records (runs ls)", cmdRuns},
	{"keys", "create, list or revoke the HTTP gateway's API keys", cmdKeys},
	{"artifacts", "list, get or apply a run's artifacts (its patch, its archive of changed files)", cmdArtifacts},
	{"workspace", "push a directory as a workspace snapshot and print its content address", cmdWorkspace},
	{"sandbox", "check that this machine can confine the agent CLIs (sandbox check)", cmdSandbox},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: agentmesh <command> [flags] [arguments]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'agentmesh <command> -h' for a command's flags.")
}

// run runs the command args name and returns the exit code.
func run(ctx context.Context, args []string, io *stdio) int {
	if len(args) == 0 {
		usage(io.stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(io.stdout)
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			// A misspelt variable (AGENTMESH_TENNANT) would leave its
			// flag at the default: refuse it, as every service does. up
			// checks through service.LoadConfig.
			if c.name != "up" && io.environ != nil {
				if err := service.CheckEnvironment(io.environ(), nil); err != nil {
					return exitCode(&exitError{code: exitUsage, err: err}, io)
				}
			}
			return exitCode(c.run(ctx, args[1:], io), io)
		}
	}
	fmt.Fprintf(io.stderr, "agentmesh: unknown command %q\n\n", args[0])
	usage(io.stderr)
	return exitUsage
}

func exitCode(err error, io *stdio) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintln(io.stderr, "agentmesh:", ee.err)
		}
		return ee.code
	default:
		fmt.Fprintln(io.stderr, "agentmesh:", err)
		return exitFail
	}
}

// newFlagSet returns a flag set that reports to io.stderr with a usage line
// of "agentmesh <name> <synopsis>".
func newFlagSet(name, synopsis string, io *stdio) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.stderr)
	fs.Usage = func() {
		fmt.Fprintf(io.stderr, "usage: agentmesh %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args with fs, allowing flags after positional arguments (up
// to a "--"), and returns the positional arguments. A parse error has been
// reported by fs and is an exit code 2; -h is flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &exitError{code: exitUsage}
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// clientFlags are the flags of the commands that talk to a running mesh.
type clientFlags struct {
	server, tenant, principal, prefix string
	inboxPrefix, apiPrefix            string
	auth                              service.NATSAuth // credential and TLS files
}

// authNames name the flags and variables that set clientFlags.auth, for
// its errors.
var authNames = service.NATSAuth{
	NatsCreds:         "--creds/" + service.NATSAuthVariables.NatsCreds,
	NatsNkey:          "--nkey/" + service.NATSAuthVariables.NatsNkey,
	NatsTLSCa:         "--tls-ca/" + service.NATSAuthVariables.NatsTLSCa,
	NatsTLSCert:       "--tls-cert/" + service.NATSAuthVariables.NatsTLSCert,
	NatsTLSKey:        "--tls-key/" + service.NATSAuthVariables.NatsTLSKey,
	NatsTLSServerName: "--tls-server-name/" + service.NATSAuthVariables.NatsTLSServerName,
}

// envOr is the variable name's value, or def when it is unset or empty.
func (io *stdio) envOr(name, def string) string {
	if v := io.getenv(name); v != "" {
		return v
	}
	return def
}

func (c *clientFlags) register(fs *flag.FlagSet, io *stdio) {
	env := io.envOr
	fs.StringVar(&c.server, "server", env("AGENTMESH_NATS_URL", nats.DefaultURL), "NATS URL of the mesh (default from $AGENTMESH_NATS_URL)")
	fs.StringVar(&c.tenant, "tenant", env("AGENTMESH_TENANT", "default"), "tenant (default from $AGENTMESH_TENANT)")
	fs.StringVar(&c.principal, "principal", env("AGENTMESH_PRINCIPAL", "local"), "principal submitting runs (default from $AGENTMESH_PRINCIPAL)")
	fs.StringVar(&c.prefix, "prefix", env("AGENTMESH_PREFIX", ""), "deployment prefix of subjects and streams (default from $AGENTMESH_PREFIX)")
	fs.StringVar(&c.inboxPrefix, "inbox-prefix", env("AGENTMESH_INBOX_PREFIX", ""), "inbox prefix of the connection (default from $AGENTMESH_INBOX_PREFIX, else _INBOX_<tenant>)")
	v := service.NATSAuthVariables
	fs.StringVar(&c.auth.NatsCreds, "creds", env(v.NatsCreds, ""), "NATS .creds file: a user JWT and its nkey seed (default from $"+v.NatsCreds+")")
	fs.StringVar(&c.auth.NatsNkey, "nkey", env(v.NatsNkey, ""), "file holding a NATS user nkey seed (default from $"+v.NatsNkey+")")
	fs.StringVar(&c.auth.NatsTLSCa, "tls-ca", env(v.NatsTLSCa, ""), "PEM CA bundle that verifies the NATS server (default from $"+v.NatsTLSCa+", else the system roots)")
	fs.StringVar(&c.auth.NatsTLSCert, "tls-cert", env(v.NatsTLSCert, ""), "PEM client certificate, with --tls-key (default from $"+v.NatsTLSCert+")")
	fs.StringVar(&c.auth.NatsTLSKey, "tls-key", env(v.NatsTLSKey, ""), "PEM key of the client certificate (default from $"+v.NatsTLSKey+")")
	fs.StringVar(&c.auth.NatsTLSServerName, "tls-server-name", env(v.NatsTLSServerName, ""), "name the server's certificate must hold (default from $"+v.NatsTLSServerName+", else the URL's host)")
	fs.StringVar(&c.apiPrefix, "js-api-prefix", env("AGENTMESH_JS_API_PREFIX", ""), "JetStream API prefix, e.g. $JS.agentmesh.API for a tenant account of deploy/nats (default from $AGENTMESH_JS_API_PREFIX, else $JS.API)")
}

// connect checks the identity flags and connects to the mesh. The caller
// closes the connection.
func (c *clientFlags) connect(opts ...client.Option) (*nats.Conn, *client.Client, error) {
	for _, f := range []struct{ name, v string }{{"tenant", c.tenant}, {"principal", c.principal}} {
		if err := subject.ValidToken(f.name, f.v); err != nil {
			return nil, nil, usageErr("--%s: %v", f.name, err)
		}
	}
	if c.prefix != "" {
		if err := subject.ValidToken("prefix", c.prefix); err != nil {
			return nil, nil, usageErr("--prefix: %v", err)
		}
	}
	inbox := c.inboxPrefix
	if inbox == "" {
		inbox = client.InboxPrefix(c.tenant)
	}
	auth, err := c.auth.Options(authNames)
	if err != nil {
		return nil, nil, &exitError{code: exitUsage, err: err}
	}
	nc, err := client.Connect(c.server, c.tenant, append([]nats.Option{nats.Name("agentmesh-cli"), nats.Timeout(5 * time.Second), nats.CustomInboxPrefix(inbox)}, auth...)...)
	if err != nil {
		if strings.Contains(err.Error(), "invalid custom prefix") {
			return nil, nil, usageErr("--inbox-prefix %q: %v", inbox, err)
		}
		return nil, nil, usageErr("connect to %s: %v", service.RedactURL(c.server), service.RedactError(c.server, err))
	}
	cl, err := client.New(nc, subject.Names{Prefix: c.prefix}, append([]client.Option{client.WithAPIPrefix(c.apiPrefix)}, opts...)...)
	if err != nil {
		nc.Close()
		return nil, nil, usageErr("--js-api-prefix: %v", err)
	}
	return nc, cl, nil
}

// requestTimeout bounds one request to the mesh.
const requestTimeout = 30 * time.Second
