package acp

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/codex"
)

// vendor is the model API of the agents of one vendor this project ships
// as ACP profiles, as their CLIs find it: the variables that say a
// profile's agent uses it (its key, its configuration), the variable
// that moves its base URL, the configuration file that may name it, and
// its default.
type vendor struct {
	vars           []string
	baseURLVar     string
	configBaseURLs func(env func(string) (string, bool)) ([]cli.BaseURL, error)
	defaultURL     string
	loginFiles     func(env func(string) (string, bool)) []string // where its CLI keeps a login, if it has one there
}

// vendors are claude-agent-acp's (Claude Code's), codex-acp's (Codex's)
// and Gemini CLI's.
var vendors = []vendor{
	{vars: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CONFIG_DIR"}, baseURLVar: "ANTHROPIC_BASE_URL",
		defaultURL: "https://api.anthropic.com"},
	{vars: []string{codex.EnvCodexHome, codex.EnvAPIKey}, baseURLVar: "OPENAI_BASE_URL",
		configBaseURLs: codex.ConfigBaseURLs, defaultURL: "https://api.openai.com", loginFiles: codex.LoginFiles},
	{vars: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}, baseURLVar: "GOOGLE_GEMINI_BASE_URL",
		defaultURL: "https://generativelanguage.googleapis.com"},
}

// ConfigBaseURLs is cli.Config.ConfigBaseURLs for an ACP agent, so that
// its sandboxed runs reach its model API as the CLI adapters' do: for
// each vendor whose variables the child's environment holds (a key, a
// configuration directory, the base URL variable itself), the base URL
// that variable sets, else the one the vendor's configuration file names
// (Codex's config.toml, for codex-acp), else the vendor's default. An
// agent of another vendor names its endpoints in the profile's egress.
func ConfigBaseURLs(env func(string) (string, bool)) ([]cli.BaseURL, error) {
	var out []cli.BaseURL
	for _, v := range vendors {
		if u, ok := env(v.baseURLVar); ok && u != "" {
			out = append(out, cli.BaseURL{URL: u, Source: v.baseURLVar})
			continue
		}
		if !v.used(env) {
			continue
		}
		if v.configBaseURLs != nil {
			urls, err := v.configBaseURLs(env)
			if err != nil {
				return nil, err
			}
			if len(urls) > 0 {
				out = append(out, urls...)
				continue
			}
		}
		out = append(out, cli.BaseURL{URL: v.defaultURL, Source: "the default of " + v.baseURLVar})
	}
	return out, nil
}

// used reports whether the child's environment holds one of the
// vendor's variables.
func (v vendor) used(env func(string) (string, bool)) bool {
	for _, name := range v.vars {
		if _, ok := env(name); ok {
			return true
		}
	}
	return false
}

// LoginFiles is cli.Config.LoginFiles for an ACP agent: the files the
// CLIs of the vendors whose variables the child's environment holds keep
// a login in (Codex's auth.json, for codex-acp), which a sandboxed run
// finds empty unless the profile's credential_files names them.
func LoginFiles(env func(string) (string, bool)) []string {
	var out []string
	for _, v := range vendors {
		if v.loginFiles != nil && v.used(env) {
			out = append(out, v.loginFiles(env)...)
		}
	}
	return out
}

// StateVars are the variables naming the directories the shipped ACP
// agents keep their configuration and sessions in, bound read-write into
// a sandboxed run when the child's environment sets them: Claude Code's,
// Codex's, and Gemini CLI's home (it reads $GEMINI_CLI_HOME/.gemini, else
// the run's private, empty $HOME/.gemini).
var StateVars = []string{"CLAUDE_CONFIG_DIR", codex.EnvCodexHome, "GEMINI_CLI_HOME"}

// DefaultConfig is the process side of an ACP agent before its profile
// is applied: the binary named acp on PATH, its model API found by
// ConfigBaseURLs, the keys the runner's proxy holds for Claude's and
// Gemini's agents (cli.Key), its state directories.
func DefaultConfig() cli.Config {
	return cli.Config{Binary: Name, InstallHint: "an ACP agent (profiles/SCHEMA.md, adapter acp)",
		ConfigBaseURLs: ConfigBaseURLs, Keys: []cli.Key{cli.AnthropicKey, cli.GeminiKey}, StateVars: slices.Clone(StateVars),
		LoginFiles: LoginFiles}
}

// confinedArgs are the arguments an agent confined by the runner's
// sandbox (cfg.Confine) gets before its profile's. codex-acp is pointed
// at the runner's key proxy when it holds the key of the provider
// config.toml selects (codex.ProxyArgs), and gets Codex's sandbox mode
// danger-full-access, as the codex adapter gives a workspace-write run
// (pkg/adapter/cli/codex, sandboxMode): Codex's own sandbox (bubblewrap)
// cannot be built inside ours when the runner is root, nor at all where
// bwrap is not installed, and every shell command would fail; ours
// confines the agent's writes to its workspace and state, and its egress
// to its model API. A profile whose args set sandbox_mode keeps its own.
func confinedArgs(cfg cli.Config, profileArgs []string) []string {
	if !isCodexACP(cfg) {
		return nil
	}
	args := codex.ProxyArgs(cfg)
	for _, a := range profileArgs {
		if strings.Contains(a, "sandbox_mode") {
			return args
		}
	}
	return append(args, "-c", `sandbox_mode="danger-full-access"`)
}

// isCodexACP reports whether the agent is codex-acp (its node wrapper or
// its native binary).
func isCodexACP(cfg cli.Config) bool {
	return strings.HasPrefix(filepath.Base(cfg.Binary), "codex-acp")
}
