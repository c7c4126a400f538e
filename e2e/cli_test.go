//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/codex"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/fakemodel"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/gemini"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/pi"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
)

const tenant = "e2e"

const (
	// runDeadline is each run's deadline_ms: the mesh ends a run that
	// takes longer as timed_out and stops its CLI.
	runDeadline = 90 * time.Second
	// runWait bounds the test's wait for a run's terminal status.
	runWait = runDeadline + 30*time.Second
	// maxAttempts is every profile's attempt policy: the adapters turn the
	// CLIs' own retries off, so an API error is one request and fast.
	maxAttempts = 1
	// retryAttempts is the policy of each CLI's second profile, named
	// <cli>+retrySuffix, which proves the policy reaches the CLI's own
	// retry switch: an API error is then exactly that many requests.
	retryAttempts = 2
	retrySuffix   = "-retry2"
)

// tagVar is set in every CLI's environment to a value unique to this test
// run, so that the test can find any process of its CLIs still alive.
const tagVar = "AGENTMESH_E2E_TAG"

// cliEnv is where one CLI lives for the test.
type cliEnv struct {
	home, tmp, workRoot, fakeURL, tag string
	// codexKeyVar is the variable Codex's provider reads its key from
	// (env_key); the transcripts use FAKE_OPENAI_API_KEY.
	codexKeyVar string
	// ownHome: home is the runner's own HOME too, which the sandbox binds
	// only when the policy names it; used by TestCLIGeminiTempHome.
	ownHome bool
	// unreachable is the adapter's UnreachableAfter (profile
	// policy.unreachable_after); 0 leaves it off.
	unreachable time.Duration
	// egress, if set, replaces the egress the adapter derives (a
	// profile's egress: that leaves the model API out).
	egress []string
}

// base is the environment every CLI gets on top of its adapter's own:
// a private HOME and TMPDIR (Gemini CLI writes error reports to TMPDIR) and
// the process tag.
func (e cliEnv) base() map[string]string {
	return map[string]string{"HOME": e.home, "TMPDIR": e.tmp, tagVar: e.tag}
}

// cliCase is one agent CLI under test.
type cliCase struct {
	name   string // the adapter and profile name
	binary string
	hint   string
	model  string
	// shell is the CLI's shell tool, as the fake sees it offered.
	shell string
	// printsThinking: the CLI prints the model's thinking on stdout
	// (Gemini CLI drops thought parts).
	printsThinking bool
	// keyVar and key are the variable the CLI reads its key from and the
	// profile's key in it, which the runner's proxy holds: the model API
	// gets key, the CLI only sandbox.Placeholder.
	keyVar, key string
	// configure writes the CLI's configuration under e.home, exactly as
	// the transcripts' README describes, and returns the variables the CLI
	// needs (base URL, key, config directory).
	configure func(t *testing.T, e cliEnv) map[string]string
	// defaults and build are the adapter package's DefaultConfig and New.
	defaults func() cli.Config
	build    func(cli.Config) (adapter.Adapter, error)
	// request is the adapter's request for prompt; tool asks for the
	// settings the tool round trip needs.
	request func(prompt string, tool bool) map[string]any
}

// adapter configures the CLI under e and returns its adapter: the
// package's DefaultConfig, the workspace root, and the CLI's variables set
// for the child. Every run is confined to the sandbox as the subprocess
// runner confines it by default: its one egress the fake model API, the
// root of every workspace hidden.
func (c cliCase) adapter(t *testing.T, e cliEnv) (adapter.Adapter, error) {
	cfg := c.defaults()
	cfg.WorkspaceRoot = e.workRoot
	cfg.EnvSet = merge(cfg.EnvSet, e.base(), c.configure(t, e))
	fake, err := sandbox.EgressOf(e.fakeURL)
	if err != nil {
		return nil, err
	}
	// The egress follows where each CLI is pointed at the fake: its base
	// URL variable, Codex's config.toml, Pi's models.json.
	pol, err := cfg.SandboxPolicy()
	if err != nil {
		return nil, err
	}
	if !slices.Equal(pol.Egress, []string{fake}) {
		return nil, fmt.Errorf("%s: sandbox egress %v, want only the fake at %s", c.name, pol.Egress, fake)
	}
	if e.egress != nil {
		pol.Egress = e.egress
	}
	if e.ownHome {
		pol.StateVars = append(pol.StateVars, "HOME")
	}
	s, err := sandbox.New(sandbox.Config{Hidden: []string{e.workRoot}}, pol)
	if err != nil {
		return nil, err
	}
	cfg.Confine = s
	cfg.UnreachableAfter = e.unreachable
	return c.build(cfg)
}

var clis = []cliCase{
	{
		name: claudecode.Name, binary: claudecode.Binary, hint: claudecode.InstallHint,
		model: "claude-sonnet-4-5", shell: "Bash", printsThinking: true, keyVar: "ANTHROPIC_API_KEY", key: "sk-ant-fake-0000",
		configure: func(t *testing.T, e cliEnv) map[string]string {
			return map[string]string{
				"CLAUDE_CONFIG_DIR":  mkdir(t, e.home, ".claude"),
				"ANTHROPIC_BASE_URL": e.fakeURL,
				"ANTHROPIC_API_KEY":  "sk-ant-fake-0000",
			}
		},
		defaults: claudecode.DefaultConfig,
		build:    func(cfg cli.Config) (adapter.Adapter, error) { return claudecode.New(cfg) },
		request: func(prompt string, tool bool) map[string]any {
			r := map[string]any{"prompt": prompt}
			if tool {
				r["allowed_tools"] = []any{"Bash"}
			}
			return r
		},
	},
	{
		name: codex.Name, binary: codex.Name, hint: codex.InstallHint,
		model: "gpt-5.5", shell: "exec_command", printsThinking: true, keyVar: "FAKE_OPENAI_API_KEY", key: "sk-fake-0000",
		configure: func(t *testing.T, e cliEnv) map[string]string {
			home := mkdir(t, e.home, ".codex")
			write(t, filepath.Join(home, "config.toml"), codexConfig(e.fakeURL, e.codexKeyVar))
			if e.codexKeyVar == "" {
				return map[string]string{codex.EnvCodexHome: home}
			}
			return map[string]string{codex.EnvCodexHome: home, e.codexKeyVar: "sk-fake-0000"}
		},
		defaults: codex.DefaultConfig,
		build:    func(cfg cli.Config) (adapter.Adapter, error) { return codex.New(cfg) },
		request: func(prompt string, _ bool) map[string]any {
			return map[string]any{"prompt": prompt, "sandbox": codex.SandboxWorkspaceWrite}
		},
	},
	{
		name: gemini.Name, binary: gemini.Name, hint: gemini.InstallHint,
		model: "gemini-2.5-flash", shell: "run_shell_command", keyVar: "GEMINI_API_KEY", key: "fake-gemini-key-0000",
		configure: func(t *testing.T, e cliEnv) map[string]string {
			// Its own home, which the sandbox binds (the runner's HOME is
			// private inside).
			geminiHome := mkdir(t, e.home, "gemini-cli-home")
			write(t, filepath.Join(mkdir(t, geminiHome, ".gemini"), "settings.json"), geminiSettings)
			return map[string]string{"GEMINI_API_KEY": "fake-gemini-key-0000", "GOOGLE_GEMINI_BASE_URL": e.fakeURL, gemini.EnvCLIHome: geminiHome}
		},
		defaults: gemini.DefaultConfig,
		build:    func(cfg cli.Config) (adapter.Adapter, error) { return gemini.New(cfg) },
		request: func(prompt string, tool bool) map[string]any {
			r := map[string]any{"prompt": prompt}
			if tool {
				// Headless default mode does not even offer the shell tool.
				r["approval_mode"] = string(gemini.ApprovalYolo)
			}
			return r
		},
	},
	{
		name: pi.Name, binary: pi.Binary, hint: pi.InstallHint,
		model: "fake-model", shell: "bash", printsThinking: true, keyVar: pi.EnvAPIKey, key: "sk-fake-pi-0000",
		configure: func(t *testing.T, e cliEnv) map[string]string {
			dir := mkdir(t, e.home, ".pi", "agent")
			write(t, filepath.Join(dir, "models.json"), fmt.Sprintf(`{"providers":{"fake":{"baseUrl":%q,"api":"anthropic-messages","apiKey":"FAKE_PI_API_KEY",
  "models":[{"id":"fake-model","name":"Fake Model","reasoning":true,"contextWindow":200000,"maxTokens":8192,
             "cost":{"input":3,"output":15,"cacheRead":0.3,"cacheWrite":3.75}}]}}}
`, e.fakeURL))
			// Pi's provider-SDK retries are invisible on stdout; the
			// package doc asks operators to keep them at 0.
			write(t, filepath.Join(dir, "settings.json"), `{"enableInstallTelemetry":false,"retry":{"provider":{"maxRetries":0}}}`+"\n")
			return map[string]string{pi.EnvAgentDir: dir, pi.EnvAPIKey: "sk-fake-pi-0000"}
		},
		defaults: pi.DefaultConfig,
		build:    func(cfg cli.Config) (adapter.Adapter, error) { return pi.New(cfg) },
		request: func(prompt string, _ bool) map[string]any {
			return map[string]any{"prompt": prompt, "provider": "fake"}
		},
	},
}

// geminiSettings is the e2e $HOME/.gemini/settings.json (testdata/acp/README.md
// names it too): API-key auth, folder trust, usage statistics, telemetry
// and updates off.
const geminiSettings = `{"security":{"auth":{"selectedType":"gemini-api-key"},"folderTrust":{"enabled":false}},
 "privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},
 "general":{"enableAutoUpdate":false,"enableAutoUpdateNotification":false}}
`

// codexConfig is the e2e $CODEX_HOME/config.toml (testdata/acp/README.md
// names it too): the fake model API as the provider, whose key is read
// from keyVar (none when keyVar is ""), with every retry, update check,
// analytics and plugin off.
func codexConfig(fakeURL, keyVar string) string {
	envKey := fmt.Sprintf("env_key = %q", keyVar)
	if keyVar == "" {
		envKey = "requires_openai_auth = false"
	}
	return fmt.Sprintf(`model = "gpt-5.5"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "%s/v1"
%s
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`, fakeURL, envKey) + codexConfigOff
}

// codexConfigOff turns analytics, feedback and plugins off in an e2e
// config.toml.
const codexConfigOff = `
[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
remote_plugin = false
apps = false
`

// Compile-time checks that the CLI adapters are mesh adapters.
var (
	_ adapter.Adapter = (*cli.Adapter[claudecode.Request])(nil)
	_ adapter.Adapter = (*cli.Adapter[codex.Request])(nil)
	_ adapter.Adapter = (*cli.Adapter[gemini.Request])(nil)
	_ adapter.Adapter = (*cli.Adapter[pi.Request])(nil)
)

// harness is the mesh, the fake and a client shared by the CLIs' subtests.
type harness struct {
	fake   *fakemodel.Server
	client *client.Client
	retry  *client.Client    // the mesh of the <cli>-retry2 profiles
	owner  sync.Map          // run id → the *client.Client it was submitted to
	tag    string            // the value of tagVar in every CLI's environment, less "/<cli>"
	homes  map[string]string // CLI name → its home (cliEnv.home)

	mu      sync.Mutex
	results map[string]string // "cli/scenario" → "ok 2.1s" or "FAIL 2.1s"
}

func (h *harness) note(cli, scenario string, failed bool, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	verdict := "ok"
	if failed {
		verdict = "FAIL"
	}
	h.results[cli+"/"+scenario] = fmt.Sprintf("%s %.1fs", verdict, d.Seconds())
}

var scenarios = []string{"answer", "tool", "thinking", "error-401", "error-429", "error-500", "retry-500", "resume", "cancel"}

// TestCLI runs each real CLI through an in-process mesh (router, runner
// host, sweeper on an embedded JetStream) against the fake model API and
// checks the normalized chunks a client receives: a plain answer, a tool
// round trip, thinking, the three API errors with the CLI's own retries
// off (max_attempts 1) and a 500 with max_attempts 2 (exactly two
// requests), a resumed conversation, and the cancellation of a run whose
// model stream hangs. The four CLIs run at once, each its scenarios in
// order; every CLI process must be gone when the mesh has stopped.
func TestCLI(t *testing.T) {
	var missing []string
	for _, c := range clis {
		if _, err := exec.LookPath(c.binary); err != nil {
			missing = append(missing, fmt.Sprintf("%s (%s)", c.binary, c.hint))
		}
	}
	if len(missing) > 0 {
		t.Fatalf("not on PATH: %s; `make e2e-cli` installs the pinned CLIs into .cache/cli", strings.Join(missing, ", "))
	}
	began := time.Now()
	tag := fmt.Sprintf("%d-%d", os.Getpid(), began.UnixNano())
	// Registered first, so it runs last: after the mesh has stopped, no
	// process of any CLI (children and grandchildren included) survives.
	t.Cleanup(func() { checkReaped(t, tag+"/") })

	fake := fakemodel.New(fakemodel.Auto)
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })

	root := t.TempDir()
	workRoot := mkdir(t, root, "work")
	var served []adapter.Adapter
	var profiles, retryProfiles []profile.Profile
	homes := map[string]string{}
	for _, c := range clis {
		mkdir(t, workRoot, c.name)
		e := cliEnv{
			home: mkdir(t, root, "home", c.name), tmp: mkdir(t, root, "tmp", c.name),
			workRoot: workRoot, fakeURL: fake.URL(), tag: tag + "/" + c.name,
			codexKeyVar: "FAKE_OPENAI_API_KEY",
		}
		homes[c.name] = e.home
		a, err := c.adapter(t, e)
		if err != nil {
			t.Fatalf("%s adapter: %v", c.name, err)
		}
		served = append(served, a)
		profiles = append(profiles, profile.Profile{
			Name: c.name, Adapter: c.name, Transport: wire.TransportSubprocess,
			Model: c.model, Binary: c.binary, InstallHint: c.hint, MaxAttempts: maxAttempts,
		})
		retryProfiles = append(retryProfiles, profile.Profile{
			Name: c.name + retrySuffix, Adapter: c.name, Transport: wire.TransportSubprocess,
			Model: c.model, Binary: c.binary, InstallHint: c.hint, MaxAttempts: retryAttempts,
		})
	}
	// One adapter and model has one profile per registry (docs/contract.md §10.1), so
	// the retry profiles run on a mesh of their own.
	reg, err := profile.New(profiles...)
	if err != nil {
		t.Fatal(err)
	}
	retryReg, err := profile.New(retryProfiles...)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{fake: fake, tag: tag, homes: homes, results: map[string]string{}}
	h.client = startMesh(t, reg, served)
	h.retry = startMesh(t, retryReg, served)
	t.Cleanup(func() { h.summary(t, time.Since(began)) })

	for _, c := range clis {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // one run at a time per CLI, the four CLIs at once
			for _, sc := range scenarios {
				t.Run(sc, func(t *testing.T) {
					start := time.Now()
					defer func() { h.note(c.name, sc, t.Failed(), time.Since(start)) }()
					switch sc {
					case "answer":
						h.testAnswer(t, c)
					case "tool":
						h.testTool(t, c)
					case "thinking":
						h.testThinking(t, c)
					case "error-401":
						h.testError(t, c, c.name, maxAttempts, fakemodel.Unauthorized, wire.ProviderAuthError)
					case "error-429":
						h.testError(t, c, c.name, maxAttempts, fakemodel.RateLimited, wire.ProviderQuotaError)
					case "error-500":
						h.testError(t, c, c.name, maxAttempts, fakemodel.ServerError, wire.ProviderError)
					case "retry-500":
						h.testError(t, c, c.name+retrySuffix, retryAttempts, fakemodel.ServerError, wire.ProviderError)
					case "cancel":
						h.testCancel(t, c)
					case "resume":
						h.testResume(t, c)
					}
				})
			}
		})
	}
}

// tempHomeAttempts is the attempt policy of TestCLIGeminiTempHome's
// profile: neither 1 nor the CLI's own 10, so only the policy itself can
// explain the count.
const tempHomeAttempts = 3

// TestCLIGeminiTempHome runs Gemini CLI under a runner whose home is in the
// system temp directory, as in many CI jobs and containers. The temp dir is
// world-writable and sticky, so Gemini CLI refuses any settings file below
// it; the adapter must put its retry settings elsewhere. A 429 is then
// tried exactly the policy's number of times, counted at the fake model
// API. A runner that is not root cannot create a file the CLI accepts: it
// must fail the run with the typed error instead, having called the API
// not once, unless root has provisioned gemini.SharedSettingsDir.
func TestCLIGeminiTempHome(t *testing.T) {
	i := slices.IndexFunc(clis, func(c cliCase) bool { return c.name == gemini.Name })
	c := clis[i]
	if _, err := exec.LookPath(c.binary); err != nil {
		t.Fatalf("%s not on PATH (%s); `make e2e-cli` installs the pinned CLIs into .cache/cli", c.binary, c.hint)
	}
	fi, err := os.Stat(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o002 == 0 || fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("the system temp dir %s has mode %v; this case needs it world-writable and sticky, as /tmp is on real machines (unset TMPDIR)", os.TempDir(), fi.Mode())
	}
	tag := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { checkReaped(t, tag+"/") })

	root := t.TempDir() // in the system temp dir
	home := mkdir(t, root, "home")
	// The runner's own home, which the adapter's first candidate
	// directory (the user cache dir) is derived from; the CLI gets it too.
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")

	fake := fakemodel.New(fakemodel.Auto)
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	e := cliEnv{home: home, tmp: mkdir(t, root, "tmp"), workRoot: mkdir(t, root, "work"), fakeURL: fake.URL(), tag: tag + "/" + c.name, ownHome: true}
	mkdir(t, e.workRoot, c.name)
	a, err := c.adapter(t, e)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := profile.New(profile.Profile{
		Name: c.name, Adapter: c.name, Transport: wire.TransportSubprocess,
		Model: c.model, Binary: c.binary, InstallHint: c.hint, MaxAttempts: tempHomeAttempts,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{fake: fake, tag: tag, results: map[string]string{}}
	h.client = startMesh(t, reg, []adapter.Adapter{a})

	t.Run("error-429", func(t *testing.T) {
		p := prompt(c, "What is the answer?", "temp-home error-429", fakemodel.RateLimited)
		r := h.follow(t, h.start(t, c, c.name, "", p, false))
		reqs := h.requestsFor(p)
		if err := r.final.Error; os.Geteuid() != 0 && err != nil && err.Class == wire.ProviderTransportError {
			// Not root, and SharedSettingsDir not provisioned.
			if !strings.Contains(err.Message, "no place for the retry settings file") || len(reqs) != 0 {
				t.Fatalf("want the typed settings error and no request, got %s; %d requests", r.summary(), len(reqs))
			}
			t.Logf("not root: the run failed as documented, without calling the API: %s", err.Message)
			return
		}
		if len(reqs) != tempHomeAttempts {
			t.Fatalf("the CLI made %d requests for a 429, want %d (max_attempts %d): %s\nfake saw:\n%s",
				len(reqs), tempHomeAttempts, tempHomeAttempts, r.summary(), describeRequests(reqs))
		}
		if r.final.State != wire.StateFailed || r.final.Error == nil || r.final.Error.Class != wire.ProviderQuotaError {
			t.Fatalf("want failed with ProviderQuotaError, got %s", r.summary())
		}
		t.Logf("429 tried %d times: %s", len(reqs), r.summary())
	})
	t.Run("answer", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("not root: covered by error-429's typed failure")
		}
		h.testAnswer(t, c)
	})
	// The user cache dir under this home was refused before anything was
	// created in it.
	if _, err := os.Stat(filepath.Join(home, ".cache", "agentmesh")); !os.IsNotExist(err) {
		t.Errorf("the adapter created settings under the refused home %s (%v)", home, err)
	}
}

// startMesh runs router, runner host and sweeper in this process on an
// embedded JetStream server, serving the given adapters, and returns a
// client. Everything is stopped when the test ends.
func startMesh(t *testing.T, profiles *profile.Registry, served []adapter.Adapter) *client.Client {
	t.Helper()
	srv := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, srv)
	d := service.Deps{
		NC: nc, JS: js,
		Log:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{},
	}
	adapters, err := adapter.NewRegistry(served...)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Serve(t, d, profiles, adapters, mesh.Config{}, 60*time.Second)
	return clienttest.New(t, srv)
}

// run is one finished run as the client saw it.
type run struct {
	id     string
	events []wire.Event
	chunks []wire.Chunk
	final  wire.Status
}

// submit runs prompt on c's profile (in conversation conv, if set) and
// returns its events up to the terminal status.
func (h *harness) submit(t *testing.T, c cliCase, conv, prompt string, tool bool) run {
	t.Helper()
	return h.follow(t, h.start(t, c, c.name, conv, prompt, tool))
}

// start submits prompt on the named profile of c and returns the run id.
func (h *harness) start(t *testing.T, c cliCase, profileName, conv, prompt string, tool bool) string {
	t.Helper()
	b, err := wire.Marshal(c.request(prompt, tool))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := h.client
	if strings.HasSuffix(profileName, retrySuffix) {
		cl = h.retry
	}
	id, err := cl.Submit(ctx, wire.RunRequest{
		Tenant: tenant, Principal: "e2e", Profile: profileName, Request: b,
		Runtime:      map[string]any{cli.RuntimeWorkspace: c.name},
		Conversation: conv, DeadlineMS: runDeadline.Milliseconds(),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.owner.Store(id, cl)
	return id
}

// clientOf is the client of the mesh a run was submitted to.
func (h *harness) clientOf(id string) *client.Client {
	if cl, ok := h.owner.Load(id); ok {
		return cl.(*client.Client)
	}
	return h.client
}

// follow returns a run's events up to its terminal status.
func (h *harness) follow(t *testing.T, id string) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runWait)
	defer cancel()
	r := run{id: id}
	for ev, err := range h.clientOf(id).Events(ctx, tenant, id, 1) {
		if err != nil {
			t.Fatalf("events of run %s: %v\n%s", id, err, r.describe())
		}
		r.events = append(r.events, ev)
		if ev.Kind == wire.KindChunk {
			r.chunks = append(r.chunks, *ev.Chunk)
		}
		if ev.Terminal() {
			r.final = *ev.Status
		}
	}
	if r.final.State == "" {
		t.Fatalf("run %s ended without a terminal status\n%s", id, r.describe())
	}
	t.Logf("run %s: %s\n%s", id, r.summary(), r.describe())
	return r
}

// summary is "system text result → succeeded".
func (r run) summary() string {
	var types []string
	for _, c := range r.chunks {
		types = append(types, string(c.Type))
	}
	s := strings.Join(types, " ") + " → " + string(r.final.State)
	if r.final.Error != nil {
		s += " (" + r.final.Error.Error() + ")"
	}
	return s
}

// describe renders every chunk as JSON, for a failure message.
func (r run) describe() string {
	var b strings.Builder
	for _, c := range r.chunks {
		j, _ := json.Marshal(c)
		b.WriteString("  chunk ")
		b.Write(j)
		b.WriteByte('\n')
	}
	j, _ := json.Marshal(r.final)
	b.WriteString("  terminal ")
	b.Write(j)
	return b.String()
}

func (r run) systemSession() string {
	for _, c := range r.chunks {
		if c.Type == wire.ChunkSystem && c.Metadata.SessionID != "" {
			return c.Metadata.SessionID
		}
	}
	return ""
}

// text is the content of every text and result chunk, in order.
func (r run) text() string {
	var b strings.Builder
	for _, c := range r.chunks {
		if c.Type == wire.ChunkText || c.Type == wire.ChunkResult {
			b.WriteString(c.Content)
		}
	}
	return b.String()
}

// prompt is a prompt unique to one run, so the fake's requests for it can
// be found.
func prompt(c cliCase, text, label string, sc fakemodel.Scenario) string {
	return uniquePrompt(c.name, text, label, sc)
}

// uniquePrompt is text, tagged with the agent's name, label and the time,
// then the scenario's marker unless it is the plain answer.
func uniquePrompt(name, text, label string, sc fakemodel.Scenario) string {
	p := fmt.Sprintf("%s (e2e %s %s %d)", text, name, label, time.Now().UnixNano())
	if sc != fakemodel.Answer {
		p += " " + fakemodel.Marker(sc)
	}
	return p
}

// requestsFor returns the fake's requests whose current user turn holds p.
func (h *harness) requestsFor(p string) []fakemodel.Request {
	return requestsHolding(h.fake, p)
}

// requestsHolding returns f's requests whose current user turn holds p.
func requestsHolding(f *fakemodel.Server, p string) []fakemodel.Request {
	var out []fakemodel.Request
	for _, r := range f.Requests() {
		if strings.Contains(r.LatestUserText(), p) {
			out = append(out, r)
		}
	}
	return out
}

func describeRequests(reqs []fakemodel.Request) string {
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "  %s %s model=%s → %d %s\n", r.Method, r.Path, r.Model, r.Status, r.Reply)
	}
	return b.String()
}

func (h *harness) testAnswer(t *testing.T, c cliCase) {
	p := prompt(c, "What is the answer?", "answer", fakemodel.Answer)
	r := h.submit(t, c, "", p, false)
	if r.final.State != wire.StateSucceeded || !strings.Contains(r.text(), "42") {
		t.Fatalf("want a text holding 42 and succeeded, got %s\n%s\nfake saw:\n%s", r.summary(), r.describe(), describeRequests(h.requestsFor(p)))
	}
	checkNoErrorChunk(t, r)
	if r.systemSession() == "" {
		t.Errorf("no system chunk confirms a session id\n%s", r.describe())
	}
	checkKey(t, c, h.requestsFor(p))
}

// checkKey: the model API got the profile's key on each request, from
// the runner's key proxy (the CLI holds only the placeholder: checkAgentView).
func checkKey(t *testing.T, c cliCase, reqs []fakemodel.Request) {
	t.Helper()
	for _, req := range reqs {
		if req.Key != c.key {
			t.Errorf("the model API got key %q on %s %s, want the profile's %q", req.Key, req.Method, req.Path, c.key)
		}
	}
}

// checkAgentView: the live processes of the CLI c (tagged tag) hold the
// placeholder in its key variable and the profile's key nowhere in their
// environment; Pi's agent directory is the run's own, whose models.json
// has the placeholder, not the operator's (under $HOME/.pi/agent, which
// the run's HOME shows it: masked, empty).
func (h *harness) checkAgentView(t *testing.T, c cliCase, tag string) {
	t.Helper()
	needle := []byte("\x00" + tagVar + "=" + tag + "\x00")
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	seen := 0
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(append(append([]byte{0}, b...), 0), needle) {
			continue
		}
		seen++
		pid := filepath.Dir(p)
		env := map[string]string{}
		for _, kv := range strings.Split(string(b), "\x00") {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		if bytes.Contains(b, []byte(c.key)) || env[c.keyVar] != sandbox.Placeholder {
			t.Errorf("%s: %s=%q, and its environment holds the profile's key: %t", pid, c.keyVar, env[c.keyVar], bytes.Contains(b, []byte(c.key)))
		}
		if c.name != pi.Name {
			continue
		}
		dir := env[pi.EnvAgentDir]
		m, err := os.ReadFile(filepath.Join(pid, "root", dir, "models.json"))
		if dir == "" || strings.HasSuffix(dir, filepath.Join(".pi", "agent")) || err != nil ||
			!bytes.Contains(m, []byte(sandbox.Placeholder)) || bytes.Contains(m, []byte(c.key)) {
			t.Errorf("%s: the agent dir it sees, %q (%v), is not the run's own with the placeholder:\n%s", pid, dir, err, m)
		}
		real := filepath.Join(pid, "root", h.homes[c.name], ".pi", "agent", "models.json")
		if m, err := os.ReadFile(real); err != nil || len(m) != 0 {
			t.Errorf("%s: the operator's models.json inside: %q, %v; want it masked, empty", pid, m, err)
		}
	}
	if seen == 0 {
		t.Errorf("no live process of %s (tag %s) to look into", c.name, tag)
	}
}

func (h *harness) testTool(t *testing.T, c cliCase) {
	p := prompt(c, "Run the shell command 'echo hello-from-tool' and tell me what it printed.", "tool", fakemodel.ToolCall)
	r := h.submit(t, c, "", p, true)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nchunks:\n%s\nfake saw:\n%s", fmt.Sprintf(format, args...), r.describe(), describeRequests(h.requestsFor(p)))
	}
	if r.final.State != wire.StateSucceeded {
		fail("terminal %s, want succeeded", r.summary())
	}
	checkNoErrorChunk(t, r)
	use := slices.IndexFunc(r.chunks, func(ch wire.Chunk) bool { return ch.Type == wire.ChunkToolUse })
	if use < 0 || r.chunks[use].ToolID == "" {
		fail("no tool_use chunk with a tool_id")
	}
	id := r.chunks[use].ToolID
	res := slices.IndexFunc(r.chunks, func(ch wire.Chunk) bool { return ch.Type == wire.ChunkToolResult })
	if res < use || r.chunks[res].ToolID != id {
		fail("the first tool_result does not follow tool_use %q with the same tool_id", id)
	}
	if out := fmt.Sprint(r.chunks[res].ToolOutput) + r.chunks[res].Content; !strings.Contains(out, fakemodel.ToolOutput) || r.chunks[res].IsError {
		fail("tool_result %q (is_error %t) does not hold %q", out, r.chunks[res].IsError, fakemodel.ToolOutput)
	}
	after := run{chunks: r.chunks[res+1:]}
	if !strings.Contains(after.text(), "hello-from-tool. Done") {
		fail("no text after the tool_result holds the fake's final answer %q (the fake answers %q when the result it got lacks the output)",
			fakemodel.ToolDoneText, fakemodel.ToolMismatchText)
	}
	if reqs := h.requestsFor(p); len(reqs) != 2 || !strings.HasPrefix(reqs[0].Reply, "tool_call "+c.shell) || reqs[1].Reply != "tool_done" {
		fail("fake requests: want a %s call and its follow-up", c.shell)
	}
	t.Logf("tool %s id %s", r.chunks[use].ToolName, id)
}

// testError runs an API error on the named profile, whose attempt policy
// is attempts: one error chunk, a typed terminal error of class want, and
// exactly attempts requests reach the model API.
func (h *harness) testError(t *testing.T, c cliCase, profileName string, attempts int, sc fakemodel.Scenario, want wire.Class) {
	p := prompt(c, "What is the answer?", profileName+" error-"+string(sc), sc)
	r := h.follow(t, h.start(t, c, profileName, "", p, false))
	reqs := h.requestsFor(p)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nchunks:\n%s\nfake saw:\n%s", fmt.Sprintf(format, args...), r.describe(), describeRequests(reqs))
	}
	var errs []int
	for i, ch := range r.chunks {
		if ch.Type == wire.ChunkError || ch.IsError && ch.Type != wire.ChunkToolResult {
			errs = append(errs, i)
		}
	}
	if len(errs) != 1 || errs[0] != len(r.chunks)-1 || !r.chunks[errs[0]].IsError {
		fail("want exactly one error chunk with is_error, last; got error chunks at %v", errs)
	}
	ec := r.chunks[errs[0]]
	if r.final.State != wire.StateFailed || r.final.Error == nil || !r.final.Error.Class.Known() {
		fail("want a failed run with a typed error, got %s", r.summary())
	}
	// Exactly the class docs/contract.md §1.5 and docs/contract-notes.md gives the status: a 500 is
	// the base ProviderError, no subclass and not ProviderStreamError.
	if got := r.final.Error.Class; got != want {
		fail("HTTP %s: terminal error class %s, want %s", sc, got, want)
	}
	got := r.final.Error.Class
	if ec.Metadata.ErrorClass != "" && ec.Metadata.ErrorClass != got {
		fail("error chunk class %s, terminal class %s", ec.Metadata.ErrorClass, got)
	}
	if len(reqs) != attempts {
		fail("the CLI made %d requests, want %d (max_attempts %d)", len(reqs), attempts, attempts)
	}
	t.Logf("HTTP %s → %s (retryable %t): %s", sc, got, r.final.Error.Retryable, ec.Content)
}

func (h *harness) testResume(t *testing.T, c cliCase) {
	conv := fmt.Sprintf("%s-conv-%d", strings.ReplaceAll(c.name, "-", ""), time.Now().UnixNano())
	p1 := prompt(c, "What is the answer?", "resume-1", fakemodel.Answer)
	first := h.submit(t, c, conv, p1, false)
	sid := first.systemSession()
	if first.final.State != wire.StateSucceeded || sid == "" {
		t.Fatalf("first run: want succeeded with a confirmed session id, got %s\n%s", first.summary(), first.describe())
	}
	p2 := prompt(c, "What was the answer again?", "resume-2", fakemodel.Answer)
	second := h.submit(t, c, conv, p2, false)
	reqs := h.requestsFor(p2)
	if second.final.State != wire.StateSucceeded || !strings.Contains(second.text(), "42") {
		t.Fatalf("second run: want succeeded with 42, got %s\n%s\nfake saw:\n%s", second.summary(), second.describe(), describeRequests(reqs))
	}
	if got := second.systemSession(); got != sid {
		t.Fatalf("second run confirmed session %q, want the first run's %q (the router injects the stored id)\n%s", got, sid, second.describe())
	}
	if len(reqs) == 0 {
		t.Fatalf("the fake saw no request for the second prompt")
	}
	checkKey(t, c, append(h.requestsFor(p1), reqs...))
	if c.name == pi.Name {
		// The session is kept in the operator's agent directory, not the
		// run's own (removed after it): a confined run's sessions directory
		// is the real one's for its workspace.
		files, _ := filepath.Glob(filepath.Join(h.homes[c.name], ".pi", "agent", "sessions", "*", "*_"+sid+".jsonl"))
		if len(files) != 1 {
			t.Errorf("session %s: files %q in the operator's agent dir, want one", sid, files)
		}
	}
	history := reqs[0].Text()
	if !strings.Contains(history, p1) || !strings.Contains(history, fakemodel.AnswerText) {
		t.Fatalf("the second request's history lacks the first turn (prompt %q and answer %q); messages: %+v", p1, fakemodel.AnswerText, reqs[0].Messages)
	}
}

// testThinking: the thinking streamed before the answer arrives as
// thinking chunks ahead of the text, for a CLI that prints it.
func (h *harness) testThinking(t *testing.T, c cliCase) {
	p := prompt(c, "Think, then tell me the answer.", "thinking", fakemodel.Thinking)
	r := h.submit(t, c, "", p, false)
	if r.final.State != wire.StateSucceeded || !strings.Contains(r.text(), "42") {
		t.Fatalf("want succeeded with 42, got %s\n%s", r.summary(), r.describe())
	}
	checkNoErrorChunk(t, r)
	var thinking strings.Builder
	firstText := slices.IndexFunc(r.chunks, func(ch wire.Chunk) bool { return ch.Type == wire.ChunkText })
	for i, ch := range r.chunks {
		if ch.Type != wire.ChunkThinking {
			continue
		}
		if firstText >= 0 && i > firstText {
			t.Fatalf("thinking chunk %d after the first text chunk %d\n%s", i, firstText, r.describe())
		}
		thinking.WriteString(ch.Content)
	}
	switch {
	case c.printsThinking && !strings.Contains(thinking.String(), fakemodel.ThinkingText):
		t.Fatalf("thinking chunks hold %q, want %q\n%s", thinking.String(), fakemodel.ThinkingText, r.describe())
	case !c.printsThinking && thinking.Len() > 0:
		t.Fatalf("%s never prints thinking, yet thinking chunks hold %q", c.name, thinking.String())
	}
}

// testCancel cancels a run whose model stream hangs: the run ends
// cancelled with no synthetic chunk, and no process of the CLI survives.
func (h *harness) testCancel(t *testing.T, c cliCase) {
	p := prompt(c, "What is the answer?", "cancel", fakemodel.Stall)
	id := h.start(t, c, c.name, "", p, false)
	natstest.Eventually(t, 60*time.Second, func() error {
		if len(h.requestsFor(p)) == 0 {
			return fmt.Errorf("the CLI has not called the model yet")
		}
		return nil
	})
	h.checkAgentView(t, c, h.tag+"/"+c.name)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reply, err := h.clientOf(id).Cancel(ctx, tenant, id)
	if err != nil || !reply.Cancelled {
		t.Fatalf("cancel: %+v, %v", reply, err)
	}
	r := h.follow(t, id)
	if r.final.State != wire.StateCancelled {
		t.Fatalf("want cancelled, got %s\n%s", r.summary(), r.describe())
	}
	checkNoErrorChunk(t, r)
	checkReaped(t, h.tag+"/"+c.name+"\x00")
	t.Logf("cancelled and reaped in %.1fs", time.Since(began).Seconds())
}

func checkNoErrorChunk(t *testing.T, r run) {
	t.Helper()
	for _, ch := range r.chunks {
		if ch.Type == wire.ChunkError {
			t.Fatalf("unexpected error chunk %q\n%s", ch.Content, r.describe())
		}
	}
}

// checkReaped fails if a process whose environment has tagVar set to a
// value starting with prefix is alive 10s from now (more than the
// adapters' 5s SIGTERM grace).
func checkReaped(t *testing.T, prefix string) {
	t.Helper()
	needle := []byte("\x00" + tagVar + "=" + prefix)
	var alive []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		alive = alive[:0]
		procs, _ := filepath.Glob("/proc/[0-9]*/environ")
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err != nil || !bytes.Contains(append([]byte{0}, b...), needle) {
				continue
			}
			pid := filepath.Base(filepath.Dir(p))
			cmd, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
			alive = append(alive, pid+" "+strings.ReplaceAll(strings.TrimSpace(string(cmd)), "\x00", " "))
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("CLI processes still alive:\n  %s", strings.Join(alive, "\n  "))
			return
		}
		time.Sleep(100 * time.Millisecond) // polling /proc; no event to wait on
	}
}

// summary logs the CLI × scenario table and the fake's requests by API.
func (h *harness) summary(t *testing.T, total time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s", "")
	for _, sc := range scenarios {
		fmt.Fprintf(&b, " %-11s", sc)
	}
	for _, c := range clis {
		fmt.Fprintf(&b, "\n%-12s", c.name)
		for _, sc := range scenarios {
			v := h.results[c.name+"/"+sc]
			if v == "" {
				v = "-"
			}
			fmt.Fprintf(&b, " %-11s", v)
		}
	}
	byAPI := map[string]int{}
	var stray []fakemodel.Request
	for _, r := range h.fake.Requests() {
		byAPI[fmt.Sprintf("%s %s", r.Method, r.Path)]++
		if r.Status == http.StatusNotFound {
			stray = append(stray, r)
		}
	}
	fmt.Fprintf(&b, "\nfake model API requests:")
	for _, k := range slices.Sorted(maps.Keys(byAPI)) {
		fmt.Fprintf(&b, "\n  %4d × %s", byAPI[k], k)
	}
	t.Logf("results (wall %.1fs):\n%s", total.Seconds(), b.String())
	if len(stray) > 0 {
		t.Errorf("requests the fake does not serve:\n%s", describeRequests(stray))
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

func mkdir(t *testing.T, parts ...string) string {
	t.Helper()
	p := filepath.Join(parts...)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
