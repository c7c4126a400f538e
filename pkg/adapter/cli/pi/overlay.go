package pi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// An overlay is the agent directory a confined run of Pi gets in place of
// the operator's when the runner's proxy holds a key models.json names,
// or a built-in provider's (ConfigBaseURLs): a directory of the run's own holding a models.json
// whose keyed providers point at the proxy with sandbox.Placeholder for
// their apiKey, and a symlink to each other entry of the real directory,
// which the sandbox binds read-only at its own path (EnvReadOnly). The
// real models.json and auth.json are not in the run's view (auth.json
// only when the profile lists it in credential_files), masked where a
// state directory the run gets would show them (LoginFiles), nor is the
// rest of sessions/: the run's sessions directory is the real one's for
// its workspace (EnvSessionDir), read-write, so a session resumes across
// runs, confined or not.
type overlay struct {
	dir string            // the run's agent directory, removed after it
	env map[string]string // what the child gets on top of its environment
}

// agentOwn are the entries of the real agent directory an overlay does
// not link: the file it replaces, the credential store and its lock, and
// the sessions, which the run reaches through EnvSessionDir.
var agentOwn = []string{"models.json", "auth.json", "auth.json.lock", "sessions"}

// LoginFiles is cli.Config.LoginFiles for Pi: the files of its agent
// directory a confined run may not read where a state directory shows
// them (the sandbox masks them, unless credential_files names one). Its
// auth.json, which holds its /login and any key stored there, always;
// its models.json when the runner's proxy holds a key it names, which
// holds the key itself when apiKey is a literal: every confined run then
// gets an overlay and reads its own models.json instead.
func LoginFiles(env func(string) (string, bool)) []string {
	real := agentDir(env)
	if real == "" {
		return nil
	}
	files := []string{filepath.Join(real, "auth.json")}
	urls, err := ConfigBaseURLs(env)
	if err == nil && slices.ContainsFunc(urls, func(u cli.BaseURL) bool { return u.KeyVar != "" || !u.Key.Empty() }) {
		files = append(files, filepath.Join(real, "models.json"))
	}
	return files
}

// newOverlay builds the overlay of a run in the workspace dir when cfg
// confines it and its proxy holds a key of models.json or of a built-in
// provider; nil when not.
func newOverlay(cfg cli.Config, dir string) (*overlay, error) {
	if cfg.Confine == nil {
		return nil, nil
	}
	real := agentDir(cfg.ChildEnv)
	if real == "" {
		return nil, nil
	}
	b, err := cli.ReadConfigFile(filepath.Join(real, "models.json"), maxModels)
	if err != nil {
		return nil, overlayErr(err)
	}
	models, keyed, err := proxiedModels(b, cfg.ProxyURL, cfg.ChildEnv)
	if err != nil {
		return nil, overlayErr(fmt.Errorf("%s: %v", filepath.Join(real, "models.json"), err))
	}
	if !keyed {
		return nil, nil
	}
	entries, err := os.ReadDir(real)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, overlayErr(err)
	}
	o := &overlay{env: map[string]string{}}
	if o.dir, err = os.MkdirTemp("", "agentmesh-pi-"); err != nil {
		return nil, overlayErr(err)
	}
	if err := o.fill(cfg, real, entries, models, dir); err != nil {
		o.remove()
		return nil, overlayErr(err)
	}
	o.env[EnvAgentDir] = o.dir
	return o, nil
}

// overlayErr is the run's error for err, a failure to build its overlay.
func overlayErr(err error) error {
	return wire.Errorf(wire.ProviderProcessError, "%s: the run's agent directory: %v", Name, err)
}

// fill writes the overlay's models.json, links the real directory's other
// entries and names the run's sessions directory.
func (o *overlay) fill(cfg cli.Config, real string, entries []fs.DirEntry, models []byte, ws string) error {
	if err := os.WriteFile(filepath.Join(o.dir, "models.json"), models, 0o600); err != nil {
		return err
	}
	var shown []string
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(real, name)
		if slices.Contains(agentOwn, name) && (name != "auth.json" || !slices.Contains(cfg.CredentialFiles, p)) {
			continue
		}
		if err := os.Symlink(p, filepath.Join(o.dir, name)); err != nil {
			return err
		}
		if name != "auth.json" { // bound as a credential file
			shown = append(shown, p)
		}
	}
	if len(shown) > 0 {
		o.env[EnvReadOnly] = strings.Join(shown, string(filepath.ListSeparator))
	}
	if v, _ := cfg.ChildEnv(EnvSessionDir); v != "" {
		return nil // the operator's, which the sandbox binds (StateVars)
	}
	abs, err := filepath.Abs(ws)
	if err != nil {
		return err
	}
	sessions := SessionDir(real, abs)
	if err := os.MkdirAll(sessions, 0o700); err != nil {
		return err
	}
	o.env[EnvSessionDir] = sessions
	return nil
}

// remove removes the overlay's directory (Invocation.Cleanup).
func (o *overlay) remove() { _ = os.RemoveAll(o.dir) }

// SessionDir is where Pi keeps the sessions of a workspace cwd under the
// agent directory agentDir: sessions/--<cwd, its separators dashes>--.
func SessionDir(agentDir, cwd string) string {
	name := "--" + sessionSep.ReplaceAllString(strings.TrimPrefix(cwd, "/"), "-") + "--"
	return filepath.Join(agentDir, "sessions", name)
}

var sessionSep = regexp.MustCompile(`[/\\:]`)

// credentialHeaders are the header names a provider's or model's headers
// may carry a credential in; an overlay drops them from a keyed provider
// (the proxy drops them from its requests in any case).
var credentialHeaders = []string{"authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie"}

// proxiedModels rewrites a models.json (b, nil when there is none) for a
// confined run: each baseUrl proxy reports a held key for
// (cli.Config.ProxyURL) becomes the proxy's URL, a built-in provider
// whose key variable the child gets (env) is moved there when its own
// base URL is held, and a provider with one gets sandbox.Placeholder for
// its apiKey and loses its credential headers. keyed reports whether any
// was. The rest of the file is kept as Pi reads it (its comments and
// trailing commas gone).
func proxiedModels(b []byte, proxy func(string) (string, bool), env func(string) (string, bool)) (out []byte, keyed bool, err error) {
	doc := map[string]any{}
	if b != nil {
		dec := json.NewDecoder(bytes.NewReader(stripJSONComments(b)))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return nil, false, err
		}
	}
	providers, _ := doc["providers"].(map[string]any)
	if providers == nil {
		providers = map[string]any{}
	}
	for name, bi := range builtins {
		p, _ := providers[name].(map[string]any)
		if u, ok := proxy(bi.url); !ok || builtinKey(name, env) == "" || p != nil && p["baseUrl"] != nil {
			continue
		} else if p == nil {
			providers[name] = map[string]any{"baseUrl": u}
		} else {
			p["baseUrl"] = u
			providers[name] = p
		}
		keyed = true
	}
	for _, v := range providers {
		p, _ := v.(map[string]any)
		if p == nil {
			continue
		}
		held := point(p, proxy)
		models, _ := p["models"].([]any)
		for _, m := range models {
			if m, _ := m.(map[string]any); m != nil && point(m, proxy) {
				held = true
			}
		}
		if !held {
			continue
		}
		keyed = true
		if _, ok := p["apiKey"]; ok {
			p["apiKey"] = sandbox.Placeholder
		}
		dropCredentials(p)
		for _, m := range models {
			if m, _ := m.(map[string]any); m != nil {
				dropCredentials(m)
			}
		}
	}
	if !keyed {
		return nil, false, nil
	}
	doc["providers"] = providers
	out, err = json.MarshalIndent(doc, "", "  ")
	return append(out, '\n'), true, err
}

// point points obj's baseUrl at the proxy when it holds its key.
func point(obj map[string]any, proxy func(string) (string, bool)) bool {
	u, _ := obj["baseUrl"].(string)
	if u == "" {
		return false
	}
	p, ok := proxy(u)
	if ok {
		obj["baseUrl"] = p
	}
	return ok
}

// dropCredentials removes obj's headers that carry a credential.
func dropCredentials(obj map[string]any) {
	h, _ := obj["headers"].(map[string]any)
	for name := range h {
		if slices.Contains(credentialHeaders, strings.ToLower(name)) {
			delete(h, name)
		}
	}
}
