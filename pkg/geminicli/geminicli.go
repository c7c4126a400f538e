package geminicli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/argv"
	"github.com/agentmesh/agentmesh/pkg/cliadapter"
	"github.com/agentmesh/agentmesh/pkg/cost"
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
var capabilities = wire.Capabilities{
	Transport:       wire.TransportSubprocess,
	Resumable:       true,
	EmitsToolEvents: true,
	ReportsUsage:    true,
	ResumeField:     ResumeField,
}

// tokenClasses are the classes of the result's usage (see usage): input
// read fresh, input read from cache, output, and the thoughts the CLI
// counts only in total_tokens, as reasoning.
var tokenClasses = []string{cost.Input, cost.Output, cost.CacheRead, cost.Reasoning}

// DefaultConfig is the operator configuration for the real CLI on PATH:
// the binary, its install hint, and the only runner variables the child
// may receive (the API key and the base URL). Callers add WorkspaceRoot.
func DefaultConfig() cliadapter.Config {
	return cliadapter.Config{
		Binary:      Name,
		InstallHint: InstallHint,
		EnvAllow:    []string{"GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"},
		EnvSet:      map[string]string{"GEMINI_TELEMETRY_ENABLED": "false"},
	}
}

// New returns the Gemini CLI adapter. It starts nothing; the adapter is safe
// for concurrent use.
func New(cfg cliadapter.Config) (*cliadapter.Adapter[Request], error) {
	return cliadapter.New(Spec(), cfg)
}

// Spec is the Gemini CLI grammar. Its retry settings files live under the
// user cache directory (see the package doc).
func Spec() cliadapter.Spec[Request] {
	return spec(settingsFiles{dirs: defaultSettingsDirs})
}

func spec(sf settingsFiles) cliadapter.Spec[Request] {
	return cliadapter.Spec[Request]{
		Name:         Name,
		Capabilities: capabilities,
		TokenClasses: tokenClasses,
		Decode:       Decode,
		Invoke: func(req Request, call adapter.Call, dir string) (cliadapter.Invocation, error) {
			return invoke(req, call, dir, sf)
		},
		NewParser: func(Request, adapter.Call) cliadapter.Parser { return newParser() },
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

func invoke(req Request, call adapter.Call, dir string, sf settingsFiles) (cliadapter.Invocation, error) {
	model, err := CLIModel(req.Model, call.Model)
	if err != nil {
		return cliadapter.Invocation{}, err
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

	settings, err := sf.path(CLIAttempts(call.MaxAttempts))
	if err != nil {
		return cliadapter.Invocation{}, wire.Errorf(wire.ProviderTransportError, "%s: retry settings: %v", Name, err)
	}
	env := map[string]string{EnvSystemSettingsPath: settings}
	if req.SystemMD != "" {
		env[EnvSystemMD] = filepath.Join(dir, req.SystemMD)
		files = append(files, req.SystemMD)
	}
	return cliadapter.Invocation{Args: args, Env: env, Files: files}, nil
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

// settingsFiles keeps one read-only system settings file per maxAttempts
// value. A file's content is fixed by its name, it is replaced only by an
// atomic rename of identical content, and it is checked on every use (a
// temp-file cleaner may remove it), so concurrent runs, and several runner
// processes of one user, share them without coordination.
type settingsFiles struct {
	// dirs are the candidate directories, in order of preference.
	dirs func() []string
}

// defaultSettingsDirs prefers the user cache directory and falls back to a
// per-user directory in the system temp dir (a read-only HOME, no HOME).
func defaultSettingsDirs() []string {
	var dirs []string
	if d, err := os.UserCacheDir(); err == nil {
		dirs = append(dirs, filepath.Join(d, "agentmesh", "geminicli"))
	}
	return append(dirs, filepath.Join(os.TempDir(), fmt.Sprintf("agentmesh-geminicli-%d", os.Getuid())))
}

func settingsContent(n int) []byte {
	return fmt.Appendf(nil, "{\"general\":{\"maxAttempts\":%d}}\n", n)
}

// path returns the settings file for n attempts in the first candidate
// directory that works, creating it if needed.
func (s settingsFiles) path(n int) (string, error) {
	var errs []error
	for _, dir := range s.dirs() {
		p, err := settingsFile(dir, n)
		if err == nil {
			return p, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return "", errors.New("no directory for the settings file")
	}
	return "", errors.Join(errs...)
}

func settingsFile(dir string, n int) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	// The file overrides every other settings layer of the CLI, so its
	// directory must be ours alone: a real directory, owned by us, that
	// no one else can write.
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 || (ok && int(st.Uid) != os.Getuid()) {
		return "", fmt.Errorf("%s is not a private directory of this user", dir)
	}
	name := filepath.Join(dir, fmt.Sprintf("system-settings-max-attempts-%d.json", n))
	want := settingsContent(n)
	if got, err := os.ReadFile(name); err == nil && bytes.Equal(got, want) {
		return name, nil
	}
	tmp, err := os.CreateTemp(dir, ".settings-*")
	if err != nil {
		return "", err
	}
	_, err = tmp.Write(want)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o400)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return name, nil
}
