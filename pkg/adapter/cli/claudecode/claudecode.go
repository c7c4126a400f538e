package claudecode

import (
	"bytes"
	"strconv"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/argv"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Name is the adapter key and the provider name in chunk metadata.
const Name = "claude-code"

// Binary is the CLI's executable name.
const Binary = "claude"

// Version is the CLI version the grammar was captured from
// (its recorded transcripts are in testdata/cli/claude-code).
const Version = "2.1.197"

// InstallHint tells an operator how to install the pinned CLI.
const InstallHint = "npm install -g @anthropic-ai/claude-code@" + Version

// EnvMaxRetries is the CLI's own retry switch (0 turns its retries off).
const EnvMaxRetries = "CLAUDE_CODE_MAX_RETRIES"

// Capabilities is the adapter's declaration: the CLI emits tool_use and
// tool_result events and reports usage on its result; it resumes a session
// through the request field "resume" (--resume <id>), and the parser
// publishes the confirmed id from system/init.
var Capabilities = cli.AgentCapabilities(ResumeField)

// tokenClasses are the classes of the result's usage (see usage):
// input_tokens, output_tokens, cache_read_input_tokens and
// cache_creation_input_tokens. The CLI counts thinking inside output_tokens,
// so it reports no reasoning class.
var tokenClasses = []string{cost.Input, cost.Output, cost.CacheRead, cost.CacheWrite}

// DefaultConfig is the operator configuration of a claude-code adapter:
// the binary, its install hint, the environment variables the child may
// receive from the runner (see the package doc) and the fixed switches
// that keep the headless CLI quiet. WorkspaceRoot is left to the caller.
func DefaultConfig() cli.Config {
	return cli.Config{
		Binary:      Binary,
		InstallHint: InstallHint,
		EnvAllow:    []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR"},
		Egress:      []string{"api.anthropic.com:443"},
		BaseURLVars: []string{"ANTHROPIC_BASE_URL"},
		Keys:        []cli.Key{cli.AnthropicKey},
		StateVars:   []string{"CLAUDE_CONFIG_DIR"},
		EnvSet: map[string]string{
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			"DISABLE_TELEMETRY":                        "1",
			"DISABLE_AUTOUPDATER":                      "1",
			"DISABLE_ERROR_REPORTING":                  "1",
			"DISABLE_BUG_COMMAND":                      "1",
		},
	}
}

// Spec returns the claude-code grammar: strict request decoding, the
// command line, one stream-json parser per attempt, tail repair and exit
// classification.
func Spec() cli.Spec[Request] {
	return cli.Spec[Request]{
		Name:         Name,
		Capabilities: Capabilities,
		TokenClasses: tokenClasses,
		Decode:       Decode,
		Invoke:       Invoke,
		NewParser:    func(Request, adapter.Call) cli.Parser { return NewParser() },
		TailRepair:   TailRepair,
		Classify:     Classify,
	}
}

// New returns a claude-code adapter with cfg (start from DefaultConfig).
// The adapter is safe for concurrent use.
func New(cfg cli.Config) (*cli.Adapter[Request], error) {
	return cli.New(Spec(), cfg)
}

// flags is the command line before the prompt, in the order of the captured
// invocations: `-p --output-format stream-json --verbose --model M …`.
// --verbose is mandatory with stream-json in print mode (without it the CLI
// exits 1 with "requires --verbose").
type flags struct {
	Print                  bool     `cli:"-p"`
	OutputFormat           string   `cli:"--output-format"`
	Verbose                bool     `cli:"--verbose"`
	Model                  string   `cli:"--model"`
	SystemPrompt           string   `cli:"--system-prompt"`
	AppendSystemPrompt     string   `cli:"--append-system-prompt"`
	PermissionMode         string   `cli:"--permission-mode"`
	AllowedTools           []string `cli:"--allowedTools"`
	DisallowedTools        []string `cli:"--disallowedTools"`
	IncludePartialMessages bool     `cli:"--include-partial-messages"`
	Resume                 string   `cli:"--resume"`
}

// Invoke builds one attempt's command line and environment. The CLI works
// in the process's working directory, which is the contained workspace dir.
//
// The prompt is the last argv element, after "--": -p is a boolean switch
// and the prompt a positional argument, so a prompt that begins with "-"
// would otherwise be read as an option ("error: unknown option"), and
// "--" also stops --allowedTools, which takes several values, from
// swallowing it.
//
// Retries: the CLI retries a failed API call on its own (10 times over
// about three minutes by default) and says so only in system/api_retry
// telemetry. Each attempt sets CLAUDE_CODE_MAX_RETRIES to MaxAttempts-1,
// so one attempt makes at most MaxAttempts API calls. The mesh itself
// retries only before a run's first chunk, and the CLI's first line
// (system/init) is a chunk, so the run's attempt policy, not a hidden inner
// loop, bounds the calls. MaxAttempts ≤ 0 (no policy) means the record's
// default of 3.
func Invoke(req Request, call adapter.Call, _ string) (cli.Invocation, error) {
	model, err := call.RunModel(Name, req.Model)
	if err != nil {
		return cli.Invocation{}, err
	}
	f := flags{
		Print: true, OutputFormat: "stream-json", Verbose: true, Model: model,
		SystemPrompt: req.SystemPrompt, AppendSystemPrompt: req.AppendSystemPrompt,
		PermissionMode: req.PermissionMode, AllowedTools: req.AllowedTools, DisallowedTools: req.DisallowedTools,
		IncludePartialMessages: req.IncludePartialMessages, Resume: req.Resume,
	}
	args := append(argv.Build(f), "--", req.Prompt)
	attempts := call.MaxAttempts
	if attempts <= 0 {
		attempts = wire.DefaultMaxAttempts
	}
	return cli.Invocation{
		Args: args,
		Env:  map[string]string{EnvMaxRetries: strconv.Itoa(attempts - 1)},
	}, nil
}

// Classify maps a non-zero exit of the CLI without an in-band error to an
// error class by its stderr. The CLI reports API failures on stdout (a
// result with is_error), so what reaches here is mostly a refused
// invocation, a crash or a login problem; the CLI's own phrases come
// first, then the shared patterns of proc.Classify.
func Classify(code int, stderr string) wire.Class {
	s := bytes.ToLower([]byte(stderr))
	for _, p := range []struct {
		class  wire.Class
		phrase string
	}{
		{wire.ProviderAuthError, "please run /login"},
		{wire.ProviderAuthError, "oauth token has expired"},
		{wire.ProviderQuotaError, "credit balance is too low"},
		{wire.ProviderQuotaError, "usage limit reached"},
		{wire.ProviderContextError, "prompt is too long"},
		// Refused invocations are process errors even though their text
		// mentions permissions.
		{wire.ProviderProcessError, "cannot be used with root/sudo privileges"},
		{wire.ProviderProcessError, "requires --verbose"},
		{wire.ProviderProcessError, "unknown option"},
	} {
		if bytes.Contains(s, []byte(p.phrase)) {
			return p.class
		}
	}
	return proc.Classify(code, stderr)
}
