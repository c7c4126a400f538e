package gemini

import (
	"path/filepath"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/argv"
	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Name is the adapter key and the default binary.
const Name = "gemini"

// Version is the CLI version the adapter's grammar was captured from.
const Version = "0.61.0"

// InstallHint is shown when the binary is missing.
const InstallHint = "npm install -g @google/gemini-cli@" + Version

// Environment variables the adapter sets in the child.
const (
	EnvSystemSettingsPath = "GEMINI_CLI_SYSTEM_SETTINGS_PATH"
	EnvSystemMD           = "GEMINI_SYSTEM_MD"
)

// MaxCLIAttempts is the largest general.maxAttempts the CLI accepts.
const MaxCLIAttempts = 10

// capabilities is the adapter's declaration: a subprocess, resumable through
// the "resume" field, with tool events and usage (both seen in the
// transcripts).
var capabilities = cli.AgentCapabilities(ResumeField)

// tokenClasses are the classes of the result's usage (see usage): input
// read fresh, input read from cache, output, and the thoughts the CLI
// counts only in total_tokens, as reasoning.
var tokenClasses = []string{cost.Input, cost.Output, cost.CacheRead, cost.Reasoning}

// EnvCLIHome moves the CLI's home ($GEMINI_CLI_HOME/.gemini holds its
// settings and sessions), a state directory under the sandbox.
const EnvCLIHome = "GEMINI_CLI_HOME"

// DefaultConfig is the operator configuration for the real CLI on PATH:
// the binary, its install hint, and the only runner variables the child
// may receive (the API key, the base URL, the CLI's home). Callers add
// WorkspaceRoot.
func DefaultConfig() cli.Config {
	return cli.Config{
		Binary:      Name,
		InstallHint: InstallHint,
		EnvAllow:    []string{"GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", EnvCLIHome},
		StateVars:   []string{EnvCLIHome},
		Egress:      []string{"generativelanguage.googleapis.com:443"},
		BaseURLVars: []string{"GOOGLE_GEMINI_BASE_URL"},
		Keys:        []cli.Key{cli.GeminiKey},
		// The retry settings file lives outside the sandbox's view (the
		// runner's cache dir, SharedSettingsDir): bound read-only, else a
		// confined CLI finds no file and retries 10 times on its own.
		ReadOnlyVars: []string{EnvSystemSettingsPath},
		EnvSet:       map[string]string{"GEMINI_TELEMETRY_ENABLED": "false"},
	}
}

// New returns the Gemini CLI adapter. It starts nothing; the adapter is safe
// for concurrent use.
func New(cfg cli.Config) (*cli.Adapter[Request], error) {
	return cli.New(Spec(), cfg)
}

// Spec is the Gemini CLI grammar. Its retry settings files live in the
// first of SettingsDirs that Gemini CLI accepts (see the package doc).
func Spec() cli.Spec[Request] {
	return spec(settingsFiles{dirs: SettingsDirs, rule: cliRule})
}

func spec(sf settingsFiles) cli.Spec[Request] {
	return cli.Spec[Request]{
		Name:         Name,
		Capabilities: capabilities,
		TokenClasses: tokenClasses,
		Decode:       Decode,
		Invoke: func(req Request, call adapter.Call, dir string) (cli.Invocation, error) {
			return invoke(req, call, dir, sf)
		},
		NewParser: func(Request, adapter.Call) cli.Parser { return newParser() },
		Classify:  Classify,
	}
}

// flags is the argv grammar of one headless run, in the transcripts' order:
// -p PROMPT --output-format stream-json -m MODEL [--approval-mode M]
// [--resume ID] [--include-directories DIR]...
type flags struct {
	Prompt             string   `cli:"-p"`
	OutputFormat       string   `cli:"--output-format"`
	Model              string   `cli:"-m"`
	ApprovalMode       string   `cli:"--approval-mode"`
	Resume             string   `cli:"--resume"`
	IncludeDirectories []string `cli:"--include-directories"`
}

func invoke(req Request, call adapter.Call, dir string, sf settingsFiles) (cli.Invocation, error) {
	model, err := CLIModel(req.Model, call.Model)
	if err != nil {
		return cli.Invocation{}, err
	}
	f := flags{OutputFormat: "stream-json", Model: model, ApprovalMode: string(req.ApprovalMode), Resume: req.Resume}
	var args []string
	if strings.HasPrefix(req.Prompt, "-") {
		// yargs would read "-p -x" as an empty -p and a flag -x; the
		// "--prompt=" form binds the whole value, whatever it starts with.
		args = append(args, "--prompt="+req.Prompt)
	} else {
		f.Prompt = req.Prompt
	}
	var files []string
	for _, d := range req.IncludeDirectories {
		f.IncludeDirectories = append(f.IncludeDirectories, filepath.Join(dir, d))
		files = append(files, d)
	}
	args = append(args, argv.Build(f)...)

	n := CLIAttempts(call.MaxAttempts)
	settings, err := sf.path(n)
	if err != nil {
		return cli.Invocation{}, wire.Errorf(wire.ProviderTransportError,
			"%s: no place for the retry settings file (general.maxAttempts %d) that Gemini CLI accepts: "+
				"it reads %s only if the file and every directory above it are owned by root and not writable by group or others, "+
				"and would otherwise retry up to %d times on its own. Run the runner as root, or have root provision %s (see pkg/adapter/cli/gemini). Tried: %v",
			Name, n, EnvSystemSettingsPath, MaxCLIAttempts, SharedSettingsDir, err)
	}
	env := map[string]string{EnvSystemSettingsPath: settings}
	if req.SystemMD != "" {
		env[EnvSystemMD] = filepath.Join(dir, req.SystemMD)
		files = append(files, req.SystemMD)
	}
	return cli.Invocation{Args: args, Env: env, Files: files, Stderr: refusalWatch(settings, n)}, nil
}

// CLIAttempts maps the run's attempt policy onto the CLI's
// general.maxAttempts: the CLI makes at most MaxAttempts requests per model
// turn, i.e. MaxAttempts-1 retries, clamped to 1…MaxCLIAttempts; a policy of
// 0 (unset) is wire.DefaultMaxAttempts.
func CLIAttempts(maxAttempts int) int {
	if maxAttempts <= 0 {
		maxAttempts = wire.DefaultMaxAttempts
	}
	return min(maxAttempts, MaxCLIAttempts)
}

// CLIModel returns the -m value for a request's model (which wins) or the
// pinned model: "models/X", "gemini/X" and "google/X" become X; the CLI's
// aliases and every other name pass through. Empty means no -m. A name that
// could be read as a flag or is not a model name is an error: a validation
// error for the request's model, a ProfileError for the pinned one.
func CLIModel(requested, pinned string) (string, error) {
	m, class := requested, wire.AgenticRequestValidationError
	if m == "" {
		m, class = pinned, wire.ProfileError
	}
	if m == "" {
		return "", nil
	}
	orig := m
	for _, prefix := range []string{"models/", "gemini/", "google/"} {
		m = strings.TrimPrefix(m, prefix)
	}
	if m == "" || len(m) > maxModelLen || !modelRE.MatchString(m) {
		return "", wire.Errorf(class, "%s: model %.64q is not a model name", Name, orig)
	}
	return m, nil
}
