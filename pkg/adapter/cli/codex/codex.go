package codex

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Name is the adapter key, the default binary and the provider name in
// chunk metadata.
const Name = "codex"

// Version is the CLI version the grammar was captured from.
const Version = "0.171.0"

// InstallHint is the message of ProviderExecutableNotFound.
const InstallHint = "npm install -g @openai/codex@" + Version

// Environment variables of DefaultConfig.EnvAllow.
const (
	EnvCodexHome = "CODEX_HOME"
	EnvAPIKey    = "OPENAI_API_KEY"
	// EnvCodexAPIKey is the variable codex exec takes the built-in
	// openai provider's key from (before auth.json).
	EnvCodexAPIKey = "CODEX_API_KEY"
)

// Capabilities is the adapter's declaration: Codex reports tool activity
// (command_execution items) and usage (turn.completed), and it resumes a
// thread through the request field resume_thread_id.
var Capabilities = cli.AgentCapabilities(ResumeField)

// tokenClasses are the classes of the result's usage (see counts.usage):
// uncached input, cached and cache-write input, visible output and
// reasoning output, each its own class.
var tokenClasses = []string{cost.Input, cost.Output, cost.CacheRead, cost.CacheWrite, cost.Reasoning}

// DefaultConfig is the operator configuration for the real CLI on PATH: the
// binary, its install hint and the runner variables the child may receive
// (see the package doc). Callers add WorkspaceRoot, and replace EnvAPIKey
// by the variable their config.toml's env_key names if it differs.
func DefaultConfig() cli.Config {
	return cli.Config{
		Binary:         Name,
		InstallHint:    InstallHint,
		EnvAllow:       []string{EnvCodexHome, EnvAPIKey, EnvCodexAPIKey},
		Egress:         []string{"api.openai.com:443"},
		BaseURLVars:    []string{"OPENAI_BASE_URL"},
		StateVars:      []string{EnvCodexHome},
		ConfigBaseURLs: ConfigBaseURLs,
		LoginFiles:     LoginFiles,
	}
}

// Spec returns the Codex grammar for DefaultConfig's environment: strict
// decoding, the command line, one parser per attempt and exit
// classification. Use New for an adapter with another Config.
func Spec() cli.Spec[Request] { return spec(DefaultConfig()) }

// New returns a Codex adapter for cfg (start from DefaultConfig); an empty
// Binary or InstallHint takes the default. It starts nothing, and the
// adapter is safe for concurrent use.
func New(cfg cli.Config) (*cli.Adapter[Request], error) {
	if cfg.Binary == "" {
		cfg.Binary = Name
	}
	if cfg.InstallHint == "" {
		cfg.InstallHint = InstallHint
	}
	return cli.New(spec(cfg), cfg)
}

// spec binds the grammar to the child environment cfg describes: where
// Codex's home is decides which provider takes the retry overrides and
// where a resumed thread's previous usage is read.
func spec(cfg cli.Config) cli.Spec[Request] {
	h := home{allow: cfg.EnvAllow, set: cfg.EnvSet}
	return cli.Spec[Request]{
		Name:         Name,
		Capabilities: Capabilities,
		TokenClasses: tokenClasses,
		Decode:       Decode,
		Invoke: func(req Request, call adapter.Call, dir string) (cli.Invocation, error) {
			if err := HiddenLogin(cfg, true); err != nil {
				return cli.Invocation{}, err
			}
			inv, err := invoke(req, call, dir, h.provider(), cfg.Confine != nil)
			if err == nil {
				// Before the prompt's "--": the proxy holds the key.
				inv.Args = slices.Insert(inv.Args, len(inv.Args)-2, ProxyArgs(cfg)...)
			}
			return inv, err
		},
		NewParser: func(req Request, call adapter.Call) cli.Parser {
			p := NewParser(modelOf(req, call), req.ResumeThreadID)
			if req.ResumeThreadID != "" {
				p.baseline = h.threadTotal(req.ResumeThreadID)
			}
			return p
		},
		Classify: Classify,
	}
}

// Classify maps a non-zero exit with no in-band error to a class by the
// CLI's stderr (its WARN lines quote the API status it gave up on);
// anything unrecognized is a ProviderProcessError.
func Classify(_ int, stderr string) wire.Class {
	if c := classify(stderr); c != wire.ProviderError && c != wire.ProviderTransportError {
		return c
	}
	return wire.ProviderProcessError
}

// classify maps a Codex failure text (a turn.failed message, or stderr) to
// an error class: auth, quota and context failures by the API status or
// wording Codex uses, a lost stream as a transport failure, anything else
// (Codex words a 500 as "We're currently experiencing high demand") as a
// ProviderError. An HTTP 5xx it quotes ("unexpected status 502 Bad
// Gateway", "last status: 503") other than 529 is the model API's server
// failure, ProviderError, whatever else the text says (docs/contract-notes.md, "Error
// classes"); a 529 is quota.
func classify(text string) wire.Class {
	s := strings.ToLower(text)
	if m := quotedStatus.FindStringSubmatch(s); m != nil {
		switch code, _ := strconv.Atoi(m[1]); {
		case code == 529:
			return wire.ProviderQuotaError
		case code >= 500:
			return wire.ProviderError
		}
	}
	switch {
	case containsAny(s, "status 401", "status 403", "401 unauthorized", "403 forbidden", "invalid api key",
		"incorrect api key", "missing environment variable", "authentication"):
		return wire.ProviderAuthError
	case containsAny(s, "status 429", "429 too many requests", "too many requests", "rate limit",
		"insufficient_quota", "quota", "usage limit"):
		return wire.ProviderQuotaError
	case containsAny(s, "context window", "context_length_exceeded", "context length", "maximum context"):
		return wire.ProviderContextError
	case containsAny(s, "stream disconnected", "error sending request", "connection refused", "connection reset"):
		return wire.ProviderTransportError
	}
	return wire.ProviderError
}

// quotedStatus finds the HTTP status Codex quotes in its error texts.
var quotedStatus = regexp.MustCompile(`\bstatus:? (\d{3})\b`)

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
