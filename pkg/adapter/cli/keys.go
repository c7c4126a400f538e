package cli

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
)

// A Key is a provider credential a CLI takes from a variable of its
// environment. Under the sandbox the runner's proxy holds it in the
// CLI's place (sandbox.KeyedAPI): the CLI gets sandbox.Placeholder in Var
// and, in BaseURLVar, the plain-http loopback URL of the proxy, which
// adds the key to each request as Header says and forwards it to the
// API. Without the sandbox the CLI gets the key itself, as before.
type Key struct {
	// Var is the variable that holds the key (ANTHROPIC_API_KEY). The key
	// is its value in EnvSet, else the runner's when EnvAllow names it;
	// with none, the CLI runs as without a Key (a login of its own).
	Var string
	// BaseURLVar is the variable that moves the API (ANTHROPIC_BASE_URL).
	// Empty: the CLI reads its base URL elsewhere (a config file), and its
	// adapter points it at Config.ProxyURL(URL) for a confined run.
	BaseURLVar string
	// URL is the API's base URL when BaseURLVar is empty or unset.
	URL string
	// Header is how the API takes the key: sandbox.HeaderAPIKey,
	// HeaderBearer or HeaderGoogAPIKey.
	Header string
	// Value, if set, is the key itself, which the CLI's own configuration
	// file holds (Pi's models.json apiKey as a literal): Var is then
	// empty, and the adapter keeps the file from the run (its rewritten
	// copy holds sandbox.Placeholder).
	Value secret.String
}

// The keys of the model APIs the CLIs reach through a base-URL variable.
var (
	AnthropicKey = Key{Var: "ANTHROPIC_API_KEY", BaseURLVar: "ANTHROPIC_BASE_URL", URL: "https://api.anthropic.com", Header: sandbox.HeaderAPIKey}
	GeminiKey    = Key{Var: "GEMINI_API_KEY", BaseURLVar: "GOOGLE_GEMINI_BASE_URL", URL: "https://generativelanguage.googleapis.com", Header: sandbox.HeaderGoogAPIKey}
)

// childValue is the value the child gets for name: EnvSet's, else the
// runner's when EnvAllow names it.
func (c Config) childValue(name string) (string, bool) {
	if v, ok := c.EnvSet[name]; ok {
		return v, true
	}
	if slices.Contains(c.EnvAllow, name) {
		return os.LookupEnv(name)
	}
	return "", false
}

// names reports whether the child's environment may hold name.
func (c Config) names(name string) bool {
	_, set := c.EnvSet[name]
	return set || slices.Contains(c.EnvAllow, name)
}

// keyURL is the API base URL of k for the child: its base-URL
// variable's value, else k.URL.
func (c Config) keyURL(k Key) string {
	if k.BaseURLVar != "" {
		if v, _ := c.childValue(k.BaseURLVar); v != "" {
			return v
		}
	}
	return k.URL
}

// keyed are the Keys whose key the child would get, as the sandbox's
// keyed APIs.
func (c Config) keyed() ([]sandbox.KeyedAPI, error) {
	var out []sandbox.KeyedAPI
	for _, k := range c.Keys {
		v := k.Value.Reveal()
		if v == "" && k.Var != "" {
			v, _ = c.childValue(k.Var)
		}
		if v == "" {
			continue
		}
		u := c.keyURL(k)
		if u == "" {
			return nil, fmt.Errorf("%s: no API URL to hold its key for", k.Var)
		}
		out = append(out, sandbox.KeyedAPI{URL: u, Header: k.Header, Key: secret.New(v), KeyVar: k.Var, BaseURLVar: k.BaseURLVar})
	}
	return out, nil
}

// WithoutKeys is c with none of its Keys' variables in the child's
// environment, nor those its configuration file names for a key
// (ConfigBaseURLs), nor any other holding one of their keys: for a run
// that reaches no network, which has no use for a key and gets none.
func (c Config) WithoutKeys() Config {
	vars := map[string]bool{}
	for _, k := range c.Keys {
		vars[k.Var] = true
	}
	if c.ConfigBaseURLs != nil {
		urls, _ := c.ConfigBaseURLs(c.ChildEnv) // a file it cannot read holds no variable's name
		for _, u := range urls {
			if u.KeyVar != "" {
				vars[u.KeyVar] = true
			}
		}
	}
	// A variable that holds one of those keys too (Codex's CODEX_API_KEY
	// and OPENAI_API_KEY, say) goes as well.
	var keys []string
	for n := range vars {
		if v, _ := c.childValue(n); v != "" {
			keys = append(keys, v)
		}
	}
	for _, n := range append(slices.Clone(c.EnvAllow), slices.Collect(maps.Keys(c.EnvSet))...) {
		if v, _ := c.childValue(n); v != "" && slices.Contains(keys, v) {
			vars[n] = true
		}
	}
	c.EnvAllow = slices.DeleteFunc(slices.Clone(c.EnvAllow), func(n string) bool { return vars[n] })
	set := map[string]string{}
	for n, v := range c.EnvSet {
		if !vars[n] {
			set[n] = v
		}
	}
	c.EnvSet = set
	c.Keys = nil
	return c
}

// ProxyURL is the base URL a confined run of the CLI reaches the keyed
// API at apiURL through, and whether the runner holds that API's key
// (the run is confined, and one of Keys is that API's with its key set):
// the hook of an adapter whose CLI reads its base URL from a config file,
// which writes this URL there instead of apiURL when ok.
func (c Config) ProxyURL(apiURL string) (string, bool) {
	s, ok := c.Confine.(interface {
		KeyedURL(string) (string, bool)
	})
	if !ok {
		return "", false
	}
	return s.KeyedURL(apiURL)
}
