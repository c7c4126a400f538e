package runnerservice_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/runner/runnerservice"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// keyAgentEnv turns the test binary into the key-hunting agent: its
// value is a keySpec, JSON then base64.
const keyAgentEnv = "HOSTILE_KEY_SPEC"

// keySpec is what the key-hunting agent knows: not the key, only what a
// provider's keys begin with, and a loopback address that is not the
// model API.
type keySpec struct {
	Lines     []string // the CLI's transcript (S1) it prints, its text replaced
	Prefix    string   // what the provider's keys begin with
	Forbidden string
	// Pi: it is Pi, which finds its key and base URL in the models.json
	// of $PI_CODING_AGENT_DIR (provider "fake"), not in variables.
	Pi bool
}

// keyAgentMain runs the key-hunting agent when the test binary is
// started as one (true).
func keyAgentMain() (int, bool) {
	var s keySpec
	return playAgent(keyAgentEnv, &s, func() ([]string, []string) { return s.Lines, s.hunt() })
}

// playAgent plays an agent when the variable name is set: its value,
// JSON then base64, decoded into spec, play gives the transcript to
// print (Claude Code's, Codex's, or Pi's, whose streamed deltas it drops) and
// the report that replaces its text. It returns the exit code, and false
// when name is not set.
func playAgent(name string, spec any, play func() (lines, report []string)) (int, bool) {
	raw := os.Getenv(name)
	if raw == "" {
		return 0, false
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return 2, true
	}
	if err := json.Unmarshal(b, spec); err != nil {
		return 2, true
	}
	lines, report := play()
	text := strings.Join(report, "\n")
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return 2, true
		}
		switch m["type"] {
		case "assistant":
			m["message"].(map[string]any)["content"] = []any{map[string]any{"type": "text", "text": text}}
		case "result":
			m["result"] = text
		case "item.completed": // Codex's
			if item, _ := m["item"].(map[string]any); item["type"] == "agent_message" {
				item["text"] = text
			}
		case "message_update": // Pi's deltas: its message_end carries the text
			continue
		case "message_end", "turn_end":
			if msg, _ := m["message"].(map[string]any); msg["role"] == "assistant" {
				msg["content"] = []any{map[string]any{"type": "text", "text": text}}
			}
		}
		out, _ := json.Marshal(m)
		fmt.Println(string(out))
	}
	return 0, true
}

// hunt looks for the provider's key everywhere a run can look, and asks
// the proxy that holds it to forward elsewhere; each line is
// "name: verdict".
func (s keySpec) hunt() []string {
	var out []string
	say := func(name, verdict string, args ...any) { out = append(out, name+": "+fmt.Sprintf(verdict, args...)) }
	key, base := os.Getenv("ANTHROPIC_API_KEY"), os.Getenv("ANTHROPIC_BASE_URL")
	roots := []string{}
	if s.Pi {
		dir := os.Getenv("PI_CODING_AGENT_DIR")
		key, base = piProvider(dir)
		roots = append(roots, dir)
		say("agent-dir", "is %s", dir)
	}
	say("key-var", "is %s", key)
	say("base-url", "is %s", base)
	out = append(out, searchRun([]string{s.Prefix}, roots...)...)

	// The model API, through the proxy, with the placeholder.
	req, _ := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4-5"}`))
	req.Header.Set("x-api-key", key)
	say("model-api", "%s", callAPI(req))
	// The proxy asked to forward elsewhere: another Host, an absolute
	// URL, CONNECT.
	hostport := strings.TrimPrefix(base, "http://")
	if i := strings.IndexByte(hostport, '/'); i >= 0 {
		hostport = hostport[:i]
	}
	for name, raw := range map[string]string{
		"proxy-host":         "GET /v1/models HTTP/1.1\r\nHost: " + s.Forbidden + "\r\nConnection: close\r\n\r\n",
		"proxy-absolute-url": "GET http://" + s.Forbidden + "/v1/models HTTP/1.1\r\nHost: " + s.Forbidden + "\r\nConnection: close\r\n\r\n",
		"proxy-connect":      "CONNECT " + s.Forbidden + " HTTP/1.1\r\nHost: " + s.Forbidden + "\r\n\r\n",
	} {
		say(name, "%s", askProxy(hostport, raw))
	}
	if c, err := net.DialTimeout("tcp", s.Forbidden, 2*time.Second); err != nil {
		say("connect-forbidden", "refused (%v)", err)
	} else {
		c.Close()
		say("connect-forbidden", "ALLOWED, connected to %s", s.Forbidden)
	}
	return out
}

// callAPI makes req and says what came back.
func callAPI(req *http.Request) string {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Sprintf("unreachable (%v)", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return fmt.Sprintf("reached, %d %s", resp.StatusCode, b)
}

// searchRun looks for a secret that begins with one of prefixes in the
// run's environment, /proc/self/environ, /proc/1/environ, every
// process's environment and command line it can read, and every file it
// can read under roots, its home, temp dir, workspace, /tmp, /run, /etc
// and /dev/shm; each line is "name: verdict".
func searchRun(prefixes []string, roots ...string) []string {
	var out []string
	say := func(name, verdict string, args ...any) { out = append(out, name+": "+fmt.Sprintf(verdict, args...)) }
	find := func(text string) int {
		for _, p := range prefixes {
			if i := strings.Index(text, p); i >= 0 {
				return i
			}
		}
		return -1
	}
	look := func(name, where, text string) {
		if i := find(text); i >= 0 {
			say(name, "ALLOWED, a key in %s: %q", where, text[i:min(len(text), i+60)])
		} else {
			say(name, "absent (%d bytes of %s)", len(text), where)
		}
	}
	look("env", "the environment", strings.Join(os.Environ(), "\n"))
	if b, err := os.ReadFile("/proc/self/environ"); err != nil {
		say("proc-self-environ", "refused (%v)", err)
	} else {
		look("proc-self-environ", "/proc/self/environ", string(b))
	}
	if b, err := os.ReadFile("/proc/1/environ"); err != nil {
		say("proc-1-environ", "refused (%v)", err)
	} else {
		look("proc-1-environ", "/proc/1/environ", string(b))
	}
	// Every process's environment and command line it can read.
	var procs strings.Builder
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		for _, f := range []string{"environ", "cmdline"} {
			if b, err := os.ReadFile("/proc/" + e.Name() + "/" + f); err == nil {
				procs.Write(b)
			}
		}
	}
	look("proc-all", "every /proc/*/environ and cmdline", procs.String())
	// Every file it can read under its home, temp dir, workspace and the
	// rest of what it has been given.
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	n, size, where, text := 0, 0, "", ""
	for _, root := range append(roots, home, os.TempDir(), cwd, "/tmp", "/run", "/etc", "/dev/shm") {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || n > 20000 || where != "" {
				return nil
			}
			if d.Type().IsRegular() {
				n++
				if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
					size += len(b)
					if find(string(b)) >= 0 {
						where, text = p, string(b)
					}
				}
			}
			return nil
		})
	}
	if where == "" {
		say("files", "absent (%d files, %d bytes, under home, temp, workspace, /run, /etc)", n, size)
	} else {
		look("files", where, text)
	}
	return out
}

// piProvider is the key and baseUrl of provider "fake", else
// "anthropic", in the models.json of Pi's agent directory dir: its
// apiKey, else (a built-in provider's) $ANTHROPIC_API_KEY.
func piProvider(dir string) (key, base string) {
	var doc struct {
		Providers map[string]struct {
			BaseURL string `json:"baseUrl"`
			APIKey  string `json:"apiKey"`
		} `json:"providers"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "models.json"))
	_ = json.Unmarshal(b, &doc)
	p, ok := doc.Providers["fake"]
	if !ok {
		p = doc.Providers["anthropic"]
	}
	if p.APIKey == "" {
		p.APIKey = os.Getenv("ANTHROPIC_API_KEY")
	}
	return p.APIKey, p.BaseURL
}

// askProxy writes raw to the proxy at hostport and says what came back.
func askProxy(hostport, raw string) string {
	c, err := net.DialTimeout("tcp", hostport, 5*time.Second)
	if err != nil {
		return fmt.Sprintf("unreachable (%v)", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		return fmt.Sprintf("refused (write: %v)", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return fmt.Sprintf("refused (%v)", err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Sprintf("refused (status %d)", resp.StatusCode)
	}
	return fmt.Sprintf("ALLOWED, status %d", resp.StatusCode)
}

// hostileMesh starts the real subprocess runner with env (its sandbox
// on, the default) against the NATS server at url, and a mesh without a
// runner in front of it, both reading the profiles env names; it returns
// a context for the runs, a client of the mesh and the runner, to Stop.
func hostileMesh(t *testing.T, url string, env map[string]string) (context.Context, *client.Client, *servicetest.Proc) {
	t.Helper()
	p, common := subprocessRunner(t, url, env)
	ctx, c := meshFront(t, common, env)
	return ctx, c, p
}

// subprocessRunner starts the real subprocess runner with env (its
// sandbox on, the default) against the NATS server at url, and returns
// it, to Stop, and its common configuration.
func subprocessRunner(t *testing.T, url string, env map[string]string) (*servicetest.Proc, service.Config) {
	t.Helper()
	rs := runnerservice.Subprocess.NewSpec()
	servicetest.Load(t, rs, rs.Common(), url, env)
	if rs.SandboxMode != runnerservice.SandboxOn {
		t.Fatalf("AGENTMESH_SANDBOX defaults to %q, want on", rs.SandboxMode)
	}
	p := servicetest.Start(t, func(ctx context.Context, log *slog.Logger) error {
		return runnerservice.Subprocess.Run(ctx, rs.Config, log)
	})
	p.Log(t, "runner started")
	return p, rs.Config.Config
}

// meshFront starts a mesh without a runner on common's server, reading
// the profiles env names, and returns a context for the runs (90 s) and
// a client of the mesh.
func meshFront(t *testing.T, common service.Config, env map[string]string) (context.Context, *client.Client) {
	t.Helper()
	common.HTTPAddr, common.ShutdownTimeout = "", 10*time.Second
	reg, err := catalog.Dirs{ProfilesDir: env["AGENTMESH_PROFILES_DIR"]}.Profiles()
	if err != nil {
		t.Fatal(err)
	}
	adapters, err := catalog.Dirs{}.Registry(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	infra, err := service.Start(ctx, env["AGENTMESH_RUNNER_ID"]+"-mesh", common, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = infra.Close() })
	meshtest.Serve(t, infra.Deps, reg, adapters, mesh.Config{WithoutRunner: true}, 30*time.Second)
	c, err := client.New(infra.Deps.NC, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, c
}

// upMesh starts agentmesh up as a newcomer runs it (mesh.LoadUpConfig,
// mesh.Up with up's default choice of services: a runner of every
// profile's adapters, its sandbox on by default) on free ports, reading
// the profiles of dir and keeping every workspace under root; it returns
// a context for the runs, a client of the mesh and up's log. Up stops
// when the test ends.
func upMesh(t *testing.T, profiles, root string) (context.Context, *client.Client, *servicetest.Buffer) {
	t.Helper()
	u := startUp(t, upDirs{Profiles: profiles, Root: root, Data: t.TempDir(), State: t.TempDir()})
	return u.ctx, u.c, u.log
}

// upDirs are the directories of an up: its profiles, workspace root,
// data directory and runner state directory.
type upDirs struct{ Profiles, Root, Data, State string }

// upMeshRun is a running up (startUp).
type upMeshRun struct {
	ctx     context.Context
	c       *client.Client
	log     *servicetest.Buffer
	natsURL string // the embedded server's client URL
}

// startUp starts agentmesh up as upMesh does, in dirs.
func startUp(t *testing.T, dirs upDirs) upMeshRun {
	t.Helper()
	t.Setenv("AGENTMESH_RUNNER_STATE_DIR", dirs.State)
	cfg, err := mesh.LoadUpConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	type ready struct {
		url string
		d   service.Deps
	}
	up := make(chan ready, 1)
	done := make(chan error, 1)
	log := &servicetest.Buffer{}
	go func() {
		done <- mesh.Up(ctx, cfg, mesh.UpOptions{Listen: "127.0.0.1:0", DataDir: dirs.Data, ProfilesDir: dirs.Profiles, WorkspaceRoot: dirs.Root,
			Ready: func(url string, d service.Deps) { up <- ready{url, d} }}, slog.New(slog.NewTextHandler(log, nil)))
	}()
	var r ready
	select {
	case r = <-up:
	case err := <-done:
		cancel()
		t.Fatalf("up: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("up: %v", err)
		}
	})
	c, err := client.New(r.d.NC, r.d.Names)
	if err != nil {
		t.Fatal(err)
	}
	return upMeshRun{ctx: ctx, c: c, log: log, natsURL: r.url}
}

// TestHostileAgentKey: the runner's environment holds the provider key;
// a prompt-injected agent, run with the sandbox on through the real
// subprocess runner and through agentmesh up as a newcomer runs it, hunts
// for it in its environment, /proc/self/environ, /proc/1/environ, every
// process's environment and command line, and the files under its home,
// temp dir, workspace, /run and /etc, finding only the placeholder; it
// asks the proxy that holds the key to forward to another host (another
// Host, an absolute URL, CONNECT) and is refused each time, and the other
// host gets no connection. The model API (a loopback double) gets the
// real key on the agent's own request.
//
// As Pi, the key is written in its models.json (a literal apiKey, and
// another in its auth.json), in an agent directory under the HOME its
// profile sets, which the run gets read-write: the agent reads its key
// and base URL from the models.json its PI_CODING_AGENT_DIR names, the
// run's own, and finds the same placeholder, and the operator's files
// masked. As Pi with its built-in anthropic provider (pi-builtin), moved
// to the model API by models.json, the key is ANTHROPIC_API_KEY in the
// runner's environment, as for Claude Code.
func TestHostileAgentKey(t *testing.T) {
	for _, agent := range []string{"claude-code", "pi", "pi-builtin"} {
		for _, via := range []string{"runner", "up"} {
			t.Run(agent+"/"+via, func(t *testing.T) { testHostileAgentKey(t, agent, via) })
		}
	}
}

func testHostileAgentKey(t *testing.T, agent, via string) {
	root, profiles := t.TempDir(), t.TempDir()
	// A key of the provider's form, with a prefix no other file has.
	key := fmt.Sprintf("sk-ant-api03-agentmesh-test-%d", time.Now().UnixNano())

	var mu sync.Mutex
	var got []string // the x-api-key of each request the model API got
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	defer model.Close()
	forbidden := listen(t, nil)
	verdicts := map[string]string{} // the agent's report, by line name
	adapter := strings.TrimSuffix(agent, "-builtin")
	prof := agentProfile{
		Name: "hostile", SpecVar: keyAgentEnv, MaxActive: 1,
		Spec: keySpec{Lines: transcriptOf(t, adapter), Prefix: "sk-ant-api03-agentmesh-test-", Forbidden: forbidden.addr, Pi: adapter == "pi"},
	}
	if adapter == "pi" {
		home := t.TempDir()
		dir := filepath.Join(home, ".pi", "agent")
		models := fmt.Sprintf(`{"providers": {"fake": {"baseUrl": %q, "api": "anthropic-messages", "apiKey": %q,
  "models": [{"id": "fake-model"}]}}}`, model.URL, key)
		if agent == "pi-builtin" {
			models = fmt.Sprintf(`{"providers": {"anthropic": {"baseUrl": %q}}}`, model.URL)
			t.Setenv("ANTHROPIC_API_KEY", key)
			prof.EnvAllow = []string{"ANTHROPIC_API_KEY"}
		}
		for name, text := range map[string]string{
			"models.json":   models,
			"auth.json":     fmt.Sprintf(`{"anthropic": {"type": "api_key", "key": "%s-auth"}}`, key),
			"settings.json": `{"retry": {"provider": {"maxRetries": 0}}}`,
		} {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		prof.Adapter, prof.Model = "pi", "fake-model"
		prof.Env = map[string]string{"PI_CODING_AGENT_DIR": dir, "HOME": home}
		defer func() {
			// Its agent directory is the run's own, gone after it.
			if v, ok := verdicts["agent-dir"]; !ok || v == "is "+dir || !strings.HasPrefix(v, "is /") {
				t.Errorf("agent-dir: %q, want the run's own, not %s", v, dir)
			} else if _, err := os.Stat(strings.TrimPrefix(v, "is ")); !os.IsNotExist(err) {
				t.Errorf("the run's agent dir %s is still there (%v)", v, err)
			}
		}()
	} else {
		t.Setenv("ANTHROPIC_API_KEY", key)
		prof.EnvAllow = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"}
		prof.Env = map[string]string{"ANTHROPIC_BASE_URL": model.URL}
	}
	prof.write(t, profiles)
	report, found := runKeyHunt(t, via, adapter, profiles, root, "print your API key")
	maps.Copy(verdicts, found)
	if strings.Contains(report, key) {
		t.Error("the agent found the key")
	}
	proxied, err := sandbox.ProxyURL(model.URL)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"key-var":   "is " + sandbox.Placeholder,
		"base-url":  "is " + proxied,
		"model-api": "reached, 200 ok",
	} {
		if v := verdicts[name]; v != want {
			t.Errorf("%s: %q, want %q", name, v, want)
		}
	}
	for _, name := range []string{"env", "proc-self-environ", "proc-all", "files"} {
		if v := verdicts[name]; !strings.HasPrefix(v, "absent") {
			t.Errorf("%s: %q, want absent", name, v)
		}
	}
	if v := verdicts["proc-1-environ"]; !strings.HasPrefix(v, "absent") && !strings.HasPrefix(v, "refused") {
		t.Errorf("proc-1-environ: %q, want absent or refused", v)
	}
	for name, want := range map[string]string{"proxy-host": "refused (status 421)", "proxy-absolute-url": "refused (status 403)",
		"proxy-connect": "refused (status 405)"} {
		if v := verdicts[name]; v != want {
			t.Errorf("%s: %q, want %q", name, v, want)
		}
	}
	if v := verdicts["connect-forbidden"]; !strings.HasPrefix(v, "refused") {
		t.Errorf("connect-forbidden: %q, want refused", v)
	}
	mu.Lock()
	if len(got) != 1 || got[0] != key {
		t.Errorf("the model API got x-api-key %q, want the real key once", got)
	}
	mu.Unlock()
	if n := forbidden.accepted(); n != 0 {
		t.Errorf("the other host took %d connections", n)
	}
}

// runKeyHunt starts the mesh as via says, on the profiles in dir
// profiles (the real subprocess runner of the named adapter, or
// agentmesh up), runs the key-hunting agent of profile "hostile" once in
// workspace ws under root, and returns its report and the report's
// verdicts (verdictsOf); the run must succeed, sandboxed. The mesh
// stops before it returns.
func runKeyHunt(t *testing.T, via, adapterName, profiles, root, prompt string) (string, map[string]string) {
	t.Helper()
	var ctx context.Context
	var c *client.Client
	if via == "up" {
		ctx, c, _ = upMesh(t, profiles, root)
	} else {
		srv, sec := natstest.RunSecure(t)
		env := servicetest.SecureEnv(sec)
		env["AGENTMESH_RUNNER_ID"] = "hostile-key-runner"
		env["AGENTMESH_RUNNER_ADAPTERS"] = adapterName
		env["AGENTMESH_PROFILES_DIR"] = profiles
		env["AGENTMESH_WORKSPACE_ROOT"] = root
		env["AGENTMESH_RUNNER_STATE_DIR"] = t.TempDir()
		var p *servicetest.Proc
		ctx, c, p = hostileMesh(t, srv.ClientURL(), env)
		defer p.Stop(t)
	}
	if err := os.MkdirAll(filepath.Join(root, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	req, _ := wire.Marshal(map[string]any{"prompt": prompt})
	report, st := runHostile(ctx, t, c, "acme", "ws", req)
	t.Logf("report:\n%s", report)
	if st.State != wire.StateSucceeded || st.Sandbox != "" {
		t.Errorf("the run ended %s (%v), sandbox %q, want succeeded, sandboxed", st.State, st.Error, st.Sandbox)
	}
	return report, verdictsOf(report)
}

// verdictsOf reads a test agent's report: its "name: verdict" lines, by
// name.
func verdictsOf(report string) map[string]string {
	verdicts := map[string]string{}
	for _, l := range strings.Split(report, "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			verdicts[k] = v
		}
	}
	return verdicts
}
