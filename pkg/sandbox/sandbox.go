// Package sandbox confines an agent CLI to its own run. A confined child
// runs in new user, mount, pid, network, IPC and UTS namespaces set up
// through syscall.SysProcAttr, under an init of ours (package sandboxinit:
// the small agentmesh-sandbox-init binary, or the runner's own binary
// re-executed) that builds its file system view and stays pid 1:
//
//   - the run's workspace, read-write, at its own path;
//   - the CLI's install and the system's files it needs (/usr, /lib, the
//     directories on the child's PATH, a few files of /etc), read-only;
//   - a private, empty home and /tmp; the directories the child's
//     environment names as its state (HOME, TMPDIR, XDG_*_HOME and the
//     adapter's own, such as CLAUDE_CONFIG_DIR) read-write;
//   - a /proc of its own pid namespace, a minimal /dev, and nothing else:
//     not the runner's state directory or credentials, not another run's
//     workspace, not the runner's processes.
//
// The network namespace has loopback only. Each allowed egress endpoint
// (the profile's model API host) is a listener inside the sandbox that
// forwards, over a unix socket, to a proxy the runner owns, which dials
// only the endpoints of the run's Policy; a host name resolves inside to
// a loopback address through the sandbox's /etc/hosts. A Policy with no
// egress cuts the network off. Memory and process count are limited by a
// cgroup (v2, or v1 where that is what the host has) when the runner may
// create one, by rlimits otherwise, and wall time by the init. When the
// CLI exits, the init ends, and with it every process left in the pid
// namespace.
//
// Importing the package registers the init (sandboxinit): a program that
// imports it and is started as the init (the argv[0] Confine gives it)
// runs as the init and nothing else, before its main.
package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrUnavailable is the error Check and New wrap when this machine cannot
// build the sandbox; the message names what is missing.
var ErrUnavailable = errors.New("sandbox unavailable")

// Limits bound one run. A zero field is no limit of that kind.
type Limits struct {
	// Memory is the most memory the run's processes may use, in bytes.
	Memory int64
	// Procs is the most processes (threads included) the run may have.
	Procs int
	// WallTime is how long the run's CLI may run before it and every
	// process it left are killed.
	WallTime time.Duration
}

// Config is the operator's side of the sandbox, shared by every run of
// a runner.
type Config struct {
	Limits
	// RuntimeDir holds each run's proxy socket and mount point while it
	// runs (default: a directory of its own under os.TempDir()).
	RuntimeDir string
	// Hidden are paths no run may see (the runner's state directory, its
	// credentials, the workspace root): Confine refuses a run whose view
	// would contain one.
	Hidden []string
	// Cgroup is the cgroup directory under which each run gets its own
	// (a cgroup v2 directory whose subtree_control enables memory and
	// pids, delegated to the runner); empty finds one (CgroupMechanism).
	Cgroup string
	// Init is the agentmesh-sandbox-init binary every run starts as its
	// pid 1 (FindInit). Empty re-executes this program as the init
	// instead, which works the same but costs its start-up: every package
	// initializer of a large binary, about 20 ms a run.
	Init string
	// UIDBase and UIDCount are the host uids (and gids, the same numbers)
	// a root runner's runs lease, one each while it runs, as their uid
	// and gid 0 (zero: DefaultUIDBase, DefaultUIDCount). Runners on one
	// host lease from one another's ranges safely (UIDLockDir). A runner
	// that is not root maps its own uid instead.
	UIDBase, UIDCount int
}

// InitBinary is the name of the init's own small binary
// (cmd/agentmesh-sandbox-init).
const InitBinary = "agentmesh-sandbox-init"

// InitPath is the init binary an operator's setting names (made
// absolute), or when it names none FindInit's.
func InitPath(named string) string {
	if named == "" {
		return FindInit()
	}
	if abs, err := filepath.Abs(named); err == nil {
		return abs
	}
	return named
}

// FindInit returns the init binary next to this program's executable,
// else on PATH, else "" (the program re-executes itself).
func FindInit() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), InitBinary)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	if p, err := exec.LookPath(InitBinary); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	return ""
}

// Policy is one adapter's side: what its runs may reach.
type Policy struct {
	// Egress are the host:port endpoints a run may connect to, through
	// the runner's proxy; empty cuts the network off. A host is a name or
	// a loopback address.
	Egress []string
	// StateVars name the child environment variables whose values are
	// directories the CLI keeps its state in, bound read-write when set
	// (on top of HOME, TMPDIR and the XDG base directories, which are
	// bound only when the adapter set them: the runner's own are private
	// and empty inside, unless StateVars names them too).
	StateVars []string
	// ReadOnlyVars name the child environment variables whose values are
	// files or directories the CLI reads but may not change (a settings
	// file the adapter writes for the run; several, separated as PATH's
	// are), bound read-only at their own path when set; a hidden path is
	// refused as any other.
	ReadOnlyVars []string
	// Keyed are the model APIs whose keys the runner holds in the run's
	// place (KeyedAPI): each is reached only through the runner's HTTP
	// proxy, which adds its key; its endpoint is allowed egress on top of
	// Egress, and served only that way.
	Keyed []KeyedAPI
	// CredentialFiles are files (a CLI's subscription login) bound
	// read-only at their own paths into every run; a hidden path is
	// refused as any other, a missing one left out.
	CredentialFiles []string
	// LoginFiles are files under the run's state directories that hold
	// a CLI's login (a provider credential: Codex's auth.json). Each one
	// that exists and is in the run's view is masked there: /dev/null in
	// its place, empty, what the run writes there lost, so that no run
	// reads the credential nor changes the host's file.
	// One that CredentialFiles names is bound as a credential file
	// instead.
	LoginFiles []string
}

// An Endpoint is one allowed egress destination.
type Endpoint struct {
	Host string
	Port int
}

func (e Endpoint) String() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// ParseEgress checks egress endpoints ("host:port", a name or a
// loopback address), each once.
func ParseEgress(egress []string) ([]Endpoint, error) {
	var out []Endpoint
	seen := map[string]bool{}
	for _, s := range egress {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return nil, fmt.Errorf("egress %q: want host:port: %v", s, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("egress %q: port must be 1-65535", s)
		}
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		if ip := net.ParseIP(host); ip != nil {
			if !ip.IsLoopback() || ip.To4() == nil {
				return nil, fmt.Errorf("egress %q: an address must be an IPv4 loopback address; name a remote host by its name", s)
			}
		} else if !validHost(host) {
			return nil, fmt.Errorf("egress %q: %q is not a host name", s, host)
		}
		e := Endpoint{Host: host, Port: p}
		if seen[e.String()] {
			return nil, fmt.Errorf("egress %q is named twice", s)
		}
		seen[e.String()] = true
		out = append(out, e)
	}
	return out, nil
}

func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// EgressOf returns the host:port of a base URL (http or https), for a
// Policy's Egress: the endpoint a CLI pointed at rawURL connects to.
func EgressOf(rawURL string) (string, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return "", fmt.Errorf("base URL %q has no scheme", rawURL)
	}
	hostport, _, _ := strings.Cut(rest, "/")
	if i := strings.LastIndexByte(hostport, '@'); i >= 0 {
		hostport = hostport[i+1:]
	}
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport, nil
	}
	switch strings.ToLower(scheme) {
	case "https":
		return net.JoinHostPort(hostport, "443"), nil
	case "http":
		return net.JoinHostPort(hostport, "80"), nil
	}
	return "", fmt.Errorf("base URL %q: scheme must be http or https", rawURL)
}
