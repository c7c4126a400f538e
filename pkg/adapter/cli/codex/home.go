package codex

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// home finds the child's CODEX_HOME from the environment the child will
// get (the allow-listed runner variables and the fixed ones) and reads
// what the adapter needs from it. It only reads.
type home struct {
	allow []string
	set   map[string]string
}

// dir is the child's CODEX_HOME: the variable, else $HOME/.codex, or ""
// when neither is known as an absolute path.
func (h home) dir() string {
	var codexHome, userHome string
	for _, kv := range proc.AllowEnv(h.allow, h.set) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case EnvCodexHome:
			codexHome = v
		case "HOME":
			userHome = v
		}
	}
	return homeDir(codexHome, userHome)
}

// homeDir is Codex's home for the child's CODEX_HOME and HOME: the first,
// else $HOME/.codex, or "" when neither is known as an absolute path.
func homeDir(codexHome, userHome string) string {
	switch {
	case codexHome != "":
		if filepath.IsAbs(codexHome) {
			return codexHome
		}
		return "" // relative to the child's cwd: not ours to guess
	case filepath.IsAbs(userHome):
		return filepath.Join(userHome, ".codex")
	}
	return ""
}

// maxConfig bounds the config.toml the adapter reads.
const maxConfig = 1 << 20

// provider is the id of the model provider config.toml selects, when the
// file itself defines it under a bare key; otherwise "" and no retry
// override is passed (Codex refuses one for a built-in provider and for an
// undefined id, and cannot address a dotted one).
func (h home) provider() string {
	b, err := readConfig(h.dir())
	if err != nil || b == nil {
		return ""
	}
	return providerFromConfig(b)
}

// readConfig reads dir/config.toml, bounded: nil when dir is "" or there
// is no such file.
func readConfig(dir string) ([]byte, error) {
	if dir == "" {
		return nil, nil
	}
	return cli.ReadConfigFile(filepath.Join(dir, "config.toml"), maxConfig)
}

// The built-in provider config.toml selects when it names none.
const builtinProvider = "openai"

// DefaultOpenAIBaseURL is the built-in openai provider's base URL for an
// API key, unless config.toml's openai_base_url moves it (Codex 0.171
// reads no OPENAI_BASE_URL).
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// AuthFile is the file in Codex's home where `codex login` keeps its
// login: an API key (--with-api-key) or a ChatGPT login's tokens.
const AuthFile = "auth.json"

// ConfigBaseURLs is cli.Config.ConfigBaseURLs for Codex: the base URL of
// the model provider $CODEX_HOME/config.toml (else $HOME/.codex's)
// selects, by its model_provider or its selected profile's, with the
// variable whose key a confined run's proxy holds (Authorization:
// Bearer) when the child would get it, Codex pointed at the proxy by
// ProxyArgs. For a provider the file defines, that is its base_url and
// env_key, when set. For the built-in openai provider (none selected, or
// "openai") it is openai_base_url, else DefaultOpenAIBaseURL, and
// CODEX_API_KEY (which codex exec reads), else OPENAI_API_KEY (which it
// does not, and the proxy adds anyway); a child given both with
// different keys is refused, since the run would hold the other one. The
// codex-acp agent reads the same file.
func ConfigBaseURLs(env func(string) (string, bool)) ([]cli.BaseURL, error) {
	dir, c, err := childConfig(env)
	if err != nil {
		return nil, err
	}
	if c.builtin() {
		u, src := c.openaiURL(dir)
		k, err := builtinKeyVar(env)
		if err != nil {
			return nil, err
		}
		return []cli.BaseURL{{URL: u, Source: src, KeyVar: k, Header: sandbox.HeaderBearer}}, nil
	}
	u, ok := c.baseURL[c.selected]
	if !ok {
		return nil, nil
	}
	return []cli.BaseURL{{URL: u, Source: filepath.Join(dir, "config.toml") + ": model_providers." + c.selected + ".base_url",
		KeyVar: c.envKey[c.selected], Header: sandbox.HeaderBearer}}, nil
}

// builtin reports whether the selected provider is the built-in openai.
func (c configTOML) builtin() bool { return c.selected == "" || c.selected == builtinProvider }

// openaiURL is the built-in provider's base URL in Codex's home dir, and
// where it is set.
func (c configTOML) openaiURL(dir string) (string, string) {
	if c.openaiBaseURL != "" {
		return c.openaiBaseURL, filepath.Join(dir, "config.toml") + ": openai_base_url"
	}
	return DefaultOpenAIBaseURL, "the built-in openai provider's default"
}

// builtinKeyVar is the variable of the built-in provider's key the child
// gets: CODEX_API_KEY, else OPENAI_API_KEY, else "".
func builtinKeyVar(env func(string) (string, bool)) (string, error) {
	codexKey, _ := env(EnvCodexAPIKey)
	openaiKey, _ := env(EnvAPIKey)
	switch {
	case codexKey != "" && openaiKey != "" && codexKey != openaiKey:
		return "", fmt.Errorf("%s and %s hold different keys for the built-in openai provider: a sandboxed run could read the one the runner's proxy does not hold; give the child one of them (env_allow, env)",
			EnvCodexAPIKey, EnvAPIKey)
	case codexKey != "":
		return EnvCodexAPIKey, nil
	case openaiKey != "":
		return EnvAPIKey, nil
	}
	return "", nil
}

// childHome is the child's Codex home, found by env (cli.Config.ChildEnv).
func childHome(env func(string) (string, bool)) string {
	codexHome, _ := env(EnvCodexHome)
	userHome, _ := env("HOME")
	return homeDir(codexHome, userHome)
}

// childConfig reads the config.toml of the child's Codex home, found by
// env (cli.Config.ChildEnv); a zero configTOML when there is none.
func childConfig(env func(string) (string, bool)) (string, configTOML, error) {
	dir := childHome(env)
	b, err := readConfig(dir)
	if err != nil || b == nil {
		return dir, configTOML{}, err
	}
	return dir, scanConfig(b), nil
}

// LoginFiles is cli.Config.LoginFiles for Codex and codex-acp: the
// auth.json of the child's Codex home.
func LoginFiles(env func(string) (string, bool)) []string {
	dir := childHome(env)
	if dir == "" {
		return nil
	}
	return []string{filepath.Join(dir, AuthFile)}
}

// HiddenLogin is the error of a confined run (cfg.Confine) whose Codex
// could log in only with the auth.json its sandbox masks (LoginFiles):
// the built-in provider is selected, the file exists, the profile's
// credential_files does not name it, and, when keyed (codex exec, which
// takes the key from CODEX_API_KEY), the child gets no key variable for
// the provider. nil otherwise, and for a run not confined.
func HiddenLogin(cfg cli.Config, keyed bool) error {
	if cfg.Confine == nil {
		return nil
	}
	dir, c, err := childConfig(cfg.ChildEnv)
	if err != nil || dir == "" || !c.builtin() {
		return nil
	}
	if k, _ := builtinKeyVar(cfg.ChildEnv); keyed && k != "" {
		return nil
	}
	f := filepath.Join(dir, AuthFile)
	if _, err := os.Stat(f); err != nil {
		return nil
	}
	for _, cf := range cfg.CredentialFiles {
		if filepath.Clean(cf) == f {
			return nil
		}
	}
	instead := "give the key in " + EnvCodexAPIKey + " (env_allow; the runner's proxy holds it)"
	if !keyed {
		instead = "select a provider config.toml defines, with env_key (the runner's proxy holds its key; codex-acp takes no " +
			EnvCodexAPIKey + " without an ACP authenticate, which agentmesh does not send)"
	}
	return wire.Errorf(wire.ProviderAuthError,
		"%s: the built-in openai provider would log in with %s, which a sandboxed run may not read (it holds a provider credential): %s, or name the file in the profile's credential_files to bind it read-only into the run",
		Name, f, instead)
}

// ProxyArgs are the -c overrides that point a confined Codex (codex exec,
// codex-acp) at the runner's key proxy when the runner holds the key of
// the provider config.toml selects: the provider's base_url replaced by
// cfg.ProxyURL's, when the file defines it under a bare key, or
// openai_base_url for the built-in provider; else none.
func ProxyArgs(cfg cli.Config) []string {
	dir, c, err := childConfig(cfg.ChildEnv)
	if err != nil {
		return nil
	}
	if c.builtin() {
		u, _ := c.openaiURL(dir)
		if proxy, ok := cfg.ProxyURL(u); ok {
			return []string{"-c", configArg("openai_base_url", proxy)}
		}
		return nil
	}
	id := c.provider()
	u, ok := c.baseURL[id]
	if id == "" || !ok {
		return nil
	}
	proxy, ok := cfg.ProxyURL(u)
	if !ok {
		return nil
	}
	return []string{"-c", configArg("model_providers."+id+".base_url", proxy)}
}

var bareKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// providerFromConfig is the model provider a config.toml selects (see
// scanConfig), only if the file defines it under a bare key.
func providerFromConfig(b []byte) string { return scanConfig(b).provider() }

// provider is the selected provider when the file defines it under a bare
// key, else "".
func (c configTOML) provider() string {
	if c.selected == "" || !c.defined[c.selected] || !bareKeyRE.MatchString(c.selected) {
		return ""
	}
	return c.selected
}

// configTOML is what scanConfig reads of a config.toml.
type configTOML struct {
	selected string            // the selected model provider's id
	defined  map[string]bool   // the providers the file defines
	baseURL  map[string]string // their base_url, where one is set
	envKey   map[string]string // their env_key, where one is set
	// openaiBaseURL is the top-level openai_base_url: the built-in
	// provider's base URL.
	openaiBaseURL string
}

// scanConfig scans TOML for the selected model provider: the top-level
// model_provider, or the one of [profiles.<profile>] when a top-level
// profile selects it; the providers a [model_providers.<id>] table (or a
// dotted or inline key under model_providers) defines, and the base_url
// each sets as a one-line string. Lines inside multi-line strings, arrays
// and inline tables are skipped, so their text is never read as a table
// header. It is a scanner for these few keys, not a TOML parser; anything
// it does not understand leaves the id undefined, and the only cost of
// that is the CLI's default retries and egress.
func scanConfig(b []byte) configTOML {

	var (
		table         []string
		inArray       bool // inside a [[array of tables]]
		selected      string
		profile       string
		byProfile     = map[string]string{}
		defined       = map[string]bool{}
		baseURL       = map[string]string{}
		envKey        = map[string]string{}
		openaiBaseURL string
		skipUntil     string // closing delimiter of a multi-line string in progress
		depth         int    // open brackets of a multi-line value in progress
	)
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if skipUntil != "" {
			if strings.Contains(line, skipUntil) {
				skipUntil = ""
			}
			continue
		}
		if depth > 0 {
			depth += bracketDelta(line)
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		if strings.HasPrefix(line, "[[") {
			inArray, table = true, nil
			continue
		}
		if line[0] == '[' {
			var path []string
			ok := false
			if end := strings.IndexByte(line, ']'); end > 0 {
				path, ok = keyPath(line[1:end])
			}
			if !ok {
				inArray, table = true, nil // unreadable: ignore what follows
				continue
			}
			inArray, table = false, path
			if len(path) >= 2 && path[0] == "model_providers" {
				defined[path[1]] = true
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key, ok := keyPath(k)
		v = strings.TrimSpace(v)
		switch {
		case strings.HasPrefix(v, `"""`) && !strings.Contains(v[3:], `"""`):
			skipUntil = `"""`
		case strings.HasPrefix(v, `'''`) && !strings.Contains(v[3:], `'''`):
			skipUntil = `'''`
		case strings.HasPrefix(v, "[") || strings.HasPrefix(v, "{"):
			depth = bracketDelta(v)
		}
		if !ok || inArray {
			continue
		}
		full := append(append([]string(nil), table...), key...)
		if len(full) >= 2 && full[0] == "model_providers" {
			defined[full[1]] = true
		}
		s, isString := tomlString(v)
		switch {
		case !isString:
		case len(full) == 1 && full[0] == "model_provider":
			selected = s
		case len(full) == 1 && full[0] == "profile":
			profile = s
		case len(full) == 1 && full[0] == "openai_base_url":
			openaiBaseURL = s
		case len(full) == 3 && full[0] == "profiles" && full[2] == "model_provider":
			byProfile[full[1]] = s
		case len(full) == 3 && full[0] == "model_providers" && full[2] == "base_url":
			baseURL[full[1]] = s
		case len(full) == 3 && full[0] == "model_providers" && full[2] == "env_key":
			envKey[full[1]] = s
		}
	}
	if p, ok := byProfile[profile]; profile != "" && ok {
		selected = p
	}
	return configTOML{selected: selected, defined: defined, baseURL: baseURL, envKey: envKey, openaiBaseURL: openaiBaseURL}
}

// keyPath splits a TOML key (bare, quoted or dotted) into its parts.
func keyPath(s string) ([]string, bool) {
	var out []string
	s = strings.TrimSpace(s)
	for s != "" {
		var part string
		switch s[0] {
		case '"', '\'':
			end := strings.IndexByte(s[1:], s[0])
			if end < 0 {
				return nil, false
			}
			part, s = s[1:1+end], s[2+end:]
		default:
			end := strings.IndexAny(s, ". \t")
			if end < 0 {
				end = len(s)
			}
			part, s = s[:end], s[end:]
			if !bareKeyRE.MatchString(part) {
				return nil, false
			}
		}
		out = append(out, part)
		s = strings.TrimSpace(s)
		if s == "" {
			break
		}
		if s[0] != '.' {
			return nil, false
		}
		s = strings.TrimSpace(s[1:])
		if s == "" {
			return nil, false
		}
	}
	return out, len(out) > 0
}

// tomlString reads a one-line TOML string value, ignoring a trailing
// comment. Escapes are not needed for an id: a value that uses one is not
// read.
func tomlString(v string) (string, bool) {
	if len(v) < 2 || (v[0] != '"' && v[0] != '\'') || strings.HasPrefix(v, `"""`) || strings.HasPrefix(v, `'''`) {
		return "", false
	}
	end := strings.IndexByte(v[1:], v[0])
	if end < 0 {
		return "", false
	}
	s, rest := v[1:1+end], strings.TrimSpace(v[2+end:])
	if strings.Contains(s, `\`) || (rest != "" && rest[0] != '#') {
		return "", false
	}
	return s, true
}

// bracketDelta counts [ and { less ] and } outside strings and comments.
func bracketDelta(s string) int {
	n := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#':
			return n
		case c == '[' || c == '{':
			n++
		case c == ']' || c == '}':
			n--
		}
	}
	return n
}

// threadTotal is the thread's cumulative usage before this run: the last
// token_count record of its rollout file, or nil when there is no single
// readable one.
func (h home) threadTotal(threadID string) *counts {
	d := h.dir()
	if d == "" || !reqfield.IsUUID(threadID) {
		return nil
	}
	matches, err := filepath.Glob(filepath.Join(d, "sessions", "*", "*", "*", "rollout-*-"+threadID+".jsonl"))
	if err != nil || len(matches) != 1 {
		return nil
	}
	f, err := os.Open(matches[0])
	if err != nil {
		return nil
	}
	defer f.Close()
	return lastTotal(f)
}

// lastTotal scans a rollout for its last
// {"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{...}}}}.
func lastTotal(r io.Reader) *counts {
	var last *counts
	br := bufio.NewReaderSize(r, 64<<10)
	marker := []byte(`"token_count"`)
	for {
		line, err := br.ReadBytes('\n')
		if bytes.Contains(line, marker) {
			var rec struct {
				Type    string `json:"type"`
				Payload struct {
					Type string `json:"type"`
					Info *struct {
						Total map[string]any `json:"total_token_usage"`
					} `json:"info"`
				} `json:"payload"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Type == "event_msg" && rec.Payload.Type == "token_count" &&
				rec.Payload.Info != nil && rec.Payload.Info.Total != nil {
				if c, err := countsOf(rec.Payload.Info.Total); err == nil {
					last = &c
				} else {
					return nil // a record we cannot read: no baseline rather than a wrong one
				}
			}
		}
		if err != nil {
			return last
		}
	}
}
