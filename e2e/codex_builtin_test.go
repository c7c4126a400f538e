//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/codex"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/fakemodel"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestCLICodexBuiltinProvider: the real Codex, confined, with no provider
// of its own in config.toml: the built-in openai provider, moved to the
// fake model API by openai_base_url, beside an auth.json holding another
// key (`codex login --with-api-key`'s form). Its key is in CODEX_API_KEY,
// which codex exec reads, or in OPENAI_API_KEY, which it ignores (it
// would log in with auth.json). Either way the runner's proxy holds the
// key, Codex is pointed at it (-c openai_base_url) and finds auth.json
// empty: the answer and a shell tool round trip succeed, and every
// request reaches the model API with the variable's key, never the
// placeholder Codex holds nor the login. With no key variable the run
// fails before Codex starts, an auth error naming credential_files; with
// the login named there, bound read-only, Codex logs in with it.
func TestCLICodexBuiltinProvider(t *testing.T) {
	c := clis[slices.IndexFunc(clis, func(c cliCase) bool { return c.name == codex.Name })]
	if _, err := exec.LookPath(c.binary); err != nil {
		t.Fatalf("%s not on PATH (%s); `make e2e-cli` installs the pinned CLIs into .cache/cli", c.binary, c.hint)
	}
	fake := fakemodel.New(fakemodel.Auto)
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	const key, loginKey = "sk-fake-builtin-0000", "sk-fake-login-0000"
	for _, keyVar := range []string{codex.EnvCodexAPIKey, codex.EnvAPIKey, "login", "credential_files"} {
		t.Run(keyVar, func(t *testing.T) {
			tag := fmt.Sprintf("builtin-%d-%d", os.Getpid(), time.Now().UnixNano())
			t.Cleanup(func() { checkReaped(t, tag+"/") })
			root := t.TempDir()
			e := cliEnv{home: mkdir(t, root, "home"), tmp: mkdir(t, root, "tmp"), workRoot: mkdir(t, root, "work"),
				fakeURL: fake.URL(), tag: tag + "/" + c.name}
			mkdir(t, e.workRoot, c.name)
			var login string
			c.configure = func(t *testing.T, e cliEnv) map[string]string {
				home := mkdir(t, e.home, ".codex")
				write(t, filepath.Join(home, "config.toml"),
					fmt.Sprintf("model = \"gpt-5.5\"\ncheck_for_update_on_startup = false\nopenai_base_url = \"%s/v1\"\n", e.fakeURL)+codexConfigOff)
				login = filepath.Join(home, codex.AuthFile)
				write(t, login, `{"auth_mode":"apikey","OPENAI_API_KEY":"`+loginKey+`"}`)
				if keyVar == "login" || keyVar == "credential_files" {
					return map[string]string{codex.EnvCodexHome: home}
				}
				return map[string]string{codex.EnvCodexHome: home, keyVar: key}
			}
			want := key
			if keyVar == "credential_files" {
				c.defaults = func() cli.Config {
					cfg := codex.DefaultConfig()
					cfg.CredentialFiles = []string{filepath.Join(e.home, ".codex", codex.AuthFile)}
					return cfg
				}
				want = loginKey
			}
			a, err := c.adapter(t, e)
			if err != nil {
				t.Fatal(err)
			}
			// collect runs the prompt p to its end.
			collect := func(p string, tool bool) conformance.Outcome {
				b, err := wire.Marshal(c.request(p, tool))
				if err != nil {
					t.Fatal(err)
				}
				req, err := a.Validate(b)
				if err != nil {
					t.Fatal(err)
				}
				return conformance.Collect(t, a, adapter.Call{RunID: "builtin", Request: req, Model: c.model, Attempt: 1, MaxAttempts: 1,
					Runtime: map[string]any{cli.RuntimeWorkspace: c.name}})
			}
			if keyVar == "login" {
				p := prompt(c, "What is the answer?", "builtin login", fakemodel.Answer)
				o := collect(p, false)
				we := wire.AsError(o.Err)
				if we == nil || we.Class != wire.ProviderAuthError || !strings.Contains(we.Message, "credential_files") || !strings.Contains(we.Message, login) {
					t.Fatalf("err %v, want a %s naming %s and credential_files", o.Err, wire.ProviderAuthError, login)
				}
				if reqs := requestsHolding(fake, p); len(reqs) != 0 {
					t.Errorf("the model API got %d requests, want none", len(reqs))
				}
				t.Logf("login only: %s", we.Message)
				return
			}
			for _, tc := range []struct {
				name, text string
				sc         fakemodel.Scenario
				want       string
			}{
				{"answer", "What is the answer?", fakemodel.Answer, "42"},
				{"tool", "Run the shell command 'echo hello-from-tool' and tell me what it printed.", fakemodel.ToolCall, "hello-from-tool. Done"},
			} {
				p := prompt(c, tc.text, "builtin "+keyVar+" "+tc.name, tc.sc)
				o := collect(p, tc.sc == fakemodel.ToolCall)
				var text strings.Builder
				var tool bool
				for _, ch := range o.Chunks {
					if ch.Type == wire.ChunkText {
						text.WriteString(ch.Content)
					}
					if ch.Type == wire.ChunkToolResult && strings.Contains(fmt.Sprint(ch.ToolOutput)+ch.Content, fakemodel.ToolOutput) && !ch.IsError {
						tool = true
					}
				}
				reqs := requestsHolding(fake, p)
				if o.Err != nil || !strings.Contains(text.String(), tc.want) || (tc.sc == fakemodel.ToolCall && !tool) {
					t.Fatalf("%s: err %v, text %q, tool result %t: want %q\nchunks %+v\nfake saw:\n%s",
						tc.name, o.Err, text.String(), tool, tc.want, o.Chunks, describeRequests(reqs))
				}
				if len(reqs) == 0 {
					t.Fatalf("%s: the model API got no request", tc.name)
				}
				for _, r := range reqs {
					if r.Key != want {
						t.Errorf("%s: the model API got key %q on %s %s, want %q (%s; the placeholder is %q)",
							tc.name, r.Key, r.Method, r.Path, want, keyVar, sandbox.Placeholder)
					}
				}
			}
			if b, err := os.ReadFile(login); err != nil || !strings.Contains(string(b), loginKey) {
				t.Errorf("the login on the host is now %q (%v)", b, err)
			}
		})
	}
}
