package pi

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/argv"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Name is the adapter key.
const Name = "pi"

// Binary is the executable the npm package installs.
const Binary = "pi"

// Version is the CLI version the grammar was captured from.
const Version = "0.73.1"

// InstallHint is the message of ProviderExecutableNotFound.
const InstallHint = "npm install -g @mariozechner/pi-coding-agent@" + Version

// Environment variables the child may receive or is given (see the package
// documentation).
const (
	EnvAgentDir   = "PI_CODING_AGENT_DIR"
	EnvSessionDir = "PI_CODING_AGENT_SESSION_DIR"
	EnvAPIKey     = "FAKE_PI_API_KEY"
	EnvOffline    = "PI_OFFLINE"
	EnvTelemetry  = "PI_TELEMETRY"
	// EnvReadOnly lists, separated as PATH's entries are, the entries of
	// the real agent directory a confined run's overlay links to, which
	// the sandbox binds read-only (ReadOnlyVars). Pi does not read it.
	EnvReadOnly = "PI_AGENTMESH_READ_ONLY"
)

// Capabilities is the adapter's declaration: a subprocess that resumes
// through the request's resume field (pi --session), emits tool events
// (tool_execution_start/end) and reports usage (message_end usage).
var Capabilities = cli.AgentCapabilities(ResumeField)

// tokenClasses are the classes of the result's usage, summed over the
// assistant messages' usage: input, output, cacheRead and cacheWrite. Pi
// reports no separate reasoning count.
var tokenClasses = []string{cost.Input, cost.Output, cost.CacheRead, cost.CacheWrite}

// DefaultConfig is the operator configuration the transcripts were captured
// with: the binary, its install hint, the variables the child may receive
// from the runner (the config directory, which holds models.json with the
// provider's base URL and the name of its key variable, and that key), and
// the fixed switches that keep a headless Pi from making startup network
// calls. It is a new value on every call.
func DefaultConfig() cli.Config {
	return cli.Config{
		Binary:         Binary,
		InstallHint:    InstallHint,
		EnvAllow:       []string{EnvAgentDir, EnvAPIKey},
		Egress:         []string{"api.anthropic.com:443"},
		StateVars:      []string{EnvAgentDir, EnvSessionDir},
		ReadOnlyVars:   []string{EnvReadOnly},
		LoginFiles:     LoginFiles,
		ConfigBaseURLs: ConfigBaseURLs,
		EnvSet:         map[string]string{EnvOffline: "1", EnvTelemetry: "0"},
	}
}

// Spec is Pi's grammar for pkg/adapter/cli, for DefaultConfig's
// environment. It is a new value on every call; New binds it to its
// Config.
func Spec() cli.Spec[Request] { return spec(DefaultConfig()) }

// spec binds the grammar to cfg: a confined run whose proxy holds a key
// of models.json gets its overlay agent directory (see overlay), removed
// once the run is over.
func spec(cfg cli.Config) cli.Spec[Request] {
	return cli.Spec[Request]{
		Name:         Name,
		Capabilities: Capabilities,
		TokenClasses: tokenClasses,
		Decode:       Decode,
		Invoke: func(req Request, call adapter.Call, dir string) (cli.Invocation, error) {
			inv, err := Invoke(req, call, dir)
			if err != nil {
				return inv, err
			}
			o, err := newOverlay(cfg, dir)
			if err != nil || o == nil {
				return inv, err
			}
			inv.Env, inv.Cleanup = o.env, o.remove
			return inv, nil
		},
		NewParser: func(_ Request, call adapter.Call) cli.Parser { return NewParser(call) },
		Classify:  Classify,
		// Pi writes one complete JSON object per line; a cut-off final line
		// is a protocol error, so there is no TailRepair.
	}
}

// New returns the Pi adapter for cfg (start from DefaultConfig). It starts
// nothing; the adapter is safe for concurrent use.
func New(cfg cli.Config) (*cli.Adapter[Request], error) {
	return cli.New(spec(cfg), cfg)
}

var _ cli.Parser = (*Parser)(nil)

// mode is the fixed head of every invocation: JSON event lines, print
// (single-shot) mode.
type mode struct {
	Mode  string `cli:"--mode"`
	Print bool   `cli:"-p"`
}

// Invoke builds the argv of one attempt in the workspace dir:
//
//	pi --mode json -p [--provider P] [--model M] [--thinking T]
//	   [--tools a,b | --no-tools] [--system-prompt S] [--append-system-prompt A]
//	   [--session ID] PROMPT
//
// The model is the request's, else the pinned call.Model. The session is
// the request's resume field, else call.SessionID. A system prompt value
// that names an existing file is listed in Invocation.Files, so it must
// stay inside the workspace. Invoke starts nothing, only looks at the file
// system, and is safe for concurrent use.
//
// Retries: Pi 0.73 reads its retry policy (settings "retry") only from
// $PI_CODING_AGENT_DIR/settings.json and <cwd>/.pi/settings.json, and has no
// flag or environment override. The first is shared by every run (it sits
// beside models.json, auth.json and the sessions) and the second is in the
// caller's workspace, so a per-run value would mean writing a shared,
// mutable file. Invoke therefore passes nothing; instead the parser bounds
// Pi's agent-level retries by call.MaxAttempts from the stream itself: when
// Pi announces retry N (auto_retry_start) with N > MaxAttempts-1, the
// parser ends the run with the one error chunk and the transport stops Pi
// before it sends another request. Pi's provider-SDK retries
// (retry.provider.maxRetries) are invisible on stdout; operators keep them
// at 0 in the profile's settings.json (see the package documentation).
func Invoke(req Request, call adapter.Call, dir string) (cli.Invocation, error) {
	if req.Model == "" {
		req.Model = call.Model
	}
	if req.Resume == "" && call.SessionID != "" {
		if !reqfield.IsUUID(call.SessionID) {
			return cli.Invocation{}, wire.Errorf(wire.AgenticRequestValidationError, "%s: session %q is not a pi session id (a UUID)", Name, call.SessionID)
		}
		req.Resume = call.SessionID
	}
	args := argv.Build(&mode{Mode: "json", Print: true})
	args = append(args, argv.Build(&req)...)
	args = append(args, req.Prompt)
	var files []string
	for _, v := range []string{req.SystemPrompt, req.AppendSystemPrompt} {
		if namesFile(dir, v) {
			files = append(files, v)
		}
	}
	return cli.Invocation{Args: args, Files: files}, nil
}

// namesFile reports whether pi would read v as a file: it does when v names
// an existing path, absolute or relative to its working directory.
func namesFile(dir, v string) bool {
	if v == "" || strings.ContainsRune(v, 0) {
		return false
	}
	p := v
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, v)
	}
	_, err := os.Stat(p)
	return err == nil
}

// Classify maps a non-zero exit to an error class by Pi's stderr. Pi
// reports API failures in-band and exits 0; a non-zero exit is a startup
// failure (unknown provider or model, no API key, a session id that matches
// nothing) or a crash.
func Classify(code int, stderr string) wire.Class {
	s := strings.ToLower(stderr)
	if strings.Contains(s, "no api key") || strings.Contains(s, "api key not found") {
		return wire.ProviderAuthError
	}
	return proc.Classify(code, stderr)
}
