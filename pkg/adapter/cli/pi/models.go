package pi

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
)

// maxModels bounds the models.json the adapter reads.
const maxModels = 1 << 20

// ConfigBaseURLs is cli.Config.ConfigBaseURLs for Pi: every baseUrl
// $PI_CODING_AGENT_DIR/models.json (else $HOME/.pi/agent's) names, a
// provider's and each of its models', providers sorted by name. Pi reads
// the file as JSON with // line comments and trailing commas, and so does
// this. When the file names any, they are a sandboxed run's egress (a
// profile whose runs also use a built-in provider lists every host in
// egress:); when it names none, the built-in provider's host is (Egress).
//
// A baseUrl whose provider has a key the child would get, for an api
// whose header the runner's proxy knows (keyHeader), carries that key:
// the apiKey's variable when the child's environment sets it, else the
// apiKey itself, as Pi resolves it (an apiKey "!command" is never held).
// A confined run's proxy holds it, and the run gets a models.json that
// points the provider at the proxy (overlay).
//
// A built-in provider (builtins) whose key variable the child gets is
// reached with that key, which Pi prefers to models.json's apiKey, at
// its baseUrl in models.json, else at Pi's own for it.
func ConfigBaseURLs(env func(string) (string, bool)) ([]cli.BaseURL, error) {
	var b []byte
	path := "models.json"
	if dir := agentDir(env); dir != "" {
		path = filepath.Join(dir, "models.json")
		var err error
		if b, err = cli.ReadConfigFile(path, maxModels); err != nil {
			return nil, err
		}
	}
	urls, err := modelsBaseURLs(b, env)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for i := range urls {
		urls[i].Source = path + ": " + urls[i].Source
	}
	return urls, nil
}

// A builtin is a provider Pi knows without models.json whose key the
// runner's proxy can hold: its key variable (Pi's first choice for its
// key), its base URL and its api.
type builtin struct{ keyVar, url, api string }

// builtins are those providers, by name. Anthropic's
// ANTHROPIC_OAUTH_TOKEN, which Pi prefers to ANTHROPIC_API_KEY, is not
// held.
var builtins = map[string]builtin{
	"anthropic": {"ANTHROPIC_API_KEY", "https://api.anthropic.com", "anthropic-messages"},
	"openai":    {"OPENAI_API_KEY", "https://api.openai.com/v1", "openai-responses"},
	"google":    {"GEMINI_API_KEY", "https://generativelanguage.googleapis.com/v1beta", "google-generative-ai"},
}

// builtinKey is the key variable of the built-in provider name when the
// child gets it, else "".
func builtinKey(name string, env func(string) (string, bool)) string {
	b, ok := builtins[name]
	if !ok || env == nil {
		return ""
	}
	if v, _ := env(b.keyVar); v == "" {
		return ""
	}
	return b.keyVar
}

// agentDir is the child's Pi agent directory, as Pi finds it
// (PI_CODING_AGENT_DIR, a leading ~/ expanded, else $HOME/.pi/agent), or
// "" when it is not known as an absolute path.
func agentDir(env func(string) (string, bool)) string {
	dir, _ := env(EnvAgentDir)
	home, _ := env("HOME")
	switch {
	case dir == "" && home == "":
		return ""
	case dir == "":
		dir = filepath.Join(home, ".pi", "agent")
	case dir == "~" && home != "":
		dir = home
	case strings.HasPrefix(dir, "~/") && home != "":
		dir = filepath.Join(home, dir[2:])
	}
	if !filepath.IsAbs(dir) {
		return "" // relative to the child's cwd: not ours to guess
	}
	return filepath.Clean(dir)
}

// modelsDoc is what the adapter reads of a models.json.
type modelsDoc struct {
	Providers map[string]struct {
		BaseURL string `json:"baseUrl"`
		APIKey  string `json:"apiKey"`
		API     string `json:"api"`
		Models  []struct {
			ID      string `json:"id"`
			BaseURL string `json:"baseUrl"`
			API     string `json:"api"`
		} `json:"models"`
	} `json:"providers"`
}

// modelsBaseURLs reads the baseUrl values of a models.json (none when b
// is nil) and the key each is reached with, and the base URLs of the
// built-in providers whose key the child gets (see ConfigBaseURLs);
// Source is the key path of each.
func modelsBaseURLs(b []byte, env func(string) (string, bool)) ([]cli.BaseURL, error) {
	var doc modelsDoc
	if b != nil {
		if err := json.Unmarshal(stripJSONComments(b), &doc); err != nil {
			return nil, err
		}
	}
	var out []cli.BaseURL
	for _, name := range slices.Sorted(maps.Keys(builtins)) {
		if _, ok := doc.Providers[name]; !ok && builtinKey(name, env) != "" {
			bi := builtins[name]
			h, _ := keyHeader(bi.api)
			out = append(out, cli.BaseURL{URL: bi.url, Source: "no provider " + name + " (Pi's built-in)", KeyVar: bi.keyVar, Header: h})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(doc.Providers)) {
		p := doc.Providers[name]
		keyVar, key := apiKeyOf(p.APIKey, env)
		source := "providers." + name + ".baseUrl"
		if bi, ok := builtins[name]; ok && p.API == "" {
			p.API = bi.api
		}
		if v := builtinKey(name, env); v != "" {
			keyVar, key = v, secret.String{}
			if p.BaseURL == "" {
				p.BaseURL, source = builtins[name].url, "providers."+name+" (Pi's built-in baseUrl)" // its models' too
			}
		}
		held := func(u cli.BaseURL, api string) cli.BaseURL {
			if h, ok := keyHeader(api); ok && (keyVar != "" || !key.Empty()) {
				u.KeyVar, u.Key, u.Header = keyVar, key, h
			}
			return u
		}
		if p.BaseURL != "" {
			api := p.API
			if api == "" {
				// The one api of the models that use this baseUrl (those
				// without their own), when they agree on it.
				first := true
				for _, m := range p.Models {
					if m.BaseURL != "" {
						continue
					}
					if !first && m.API != api {
						api = ""
						break
					}
					api, first = m.API, false
				}
			}
			out = append(out, held(cli.BaseURL{URL: p.BaseURL, Source: source}, api))
		}
		for i, m := range p.Models {
			if m.BaseURL == "" {
				continue
			}
			api := m.API
			if api == "" {
				api = p.API
			}
			out = append(out, held(cli.BaseURL{URL: m.BaseURL, Source: fmt.Sprintf("providers.%s.models[%d].baseUrl", name, i)}, api))
		}
	}
	return out, nil
}

// apiKeyOf is how Pi resolves a provider's apiKey (resolveConfigValue):
// a variable of its environment when that is set and not empty, else
// the value itself; a "!command" is a shell command Pi runs, whose key
// the adapter never holds.
func apiKeyOf(apiKey string, env func(string) (string, bool)) (string, secret.String) {
	switch {
	case apiKey == "" || strings.HasPrefix(apiKey, "!"):
		return "", secret.String{}
	case env != nil:
		if v, _ := env(apiKey); v != "" {
			return apiKey, secret.String{}
		}
	}
	return "", secret.New(apiKey)
}

// keyHeader is how the model API of a Pi api takes its key, for the
// APIs the runner's proxy can hold a key for: Anthropic's x-api-key, the
// OpenAI-style Bearer token (Chat Completions, Responses, Mistral), and
// Gemini's x-goog-api-key. Others (Azure's api-key, Bedrock's and
// Vertex's signed requests, Codex's subscription token) keep their key in
// Pi's hands.
func keyHeader(api string) (string, bool) {
	switch api {
	case "anthropic-messages":
		return sandbox.HeaderAPIKey, true
	case "openai-completions", "openai-responses", "mistral-conversations":
		return sandbox.HeaderBearer, true
	case "google-generative-ai":
		return sandbox.HeaderGoogAPIKey, true
	}
	return "", false
}

var (
	// lineComment matches a string literal (kept) or a // comment to the
	// end of its line (dropped), as Pi's stripJsonComments does.
	lineComment = regexp.MustCompile(`"(?:\\.|[^"\\])*"|//[^\n]*`)
	// trailingComma matches a string literal (kept) or a comma before a
	// closing bracket (dropped).
	trailingComma = regexp.MustCompile(`"(?:\\.|[^"\\])*"|,(\s*[}\]])`)
)

// stripJSONComments drops // line comments and trailing commas outside
// string literals.
func stripJSONComments(b []byte) []byte {
	b = lineComment.ReplaceAllFunc(b, func(m []byte) []byte {
		if m[0] == '"' {
			return m
		}
		return nil
	})
	return trailingComma.ReplaceAllFunc(b, func(m []byte) []byte {
		if m[0] == '"' {
			return m
		}
		return m[1:]
	})
}
