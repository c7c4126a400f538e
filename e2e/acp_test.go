//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/fakemodel"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// The ACP agents run as session runs of `agentmesh up`, one profile of
// adapter acp each, written by the test with the configuration
// testdata/acp/README.md records: claude-agent-acp, codex-acp and Gemini
// CLI's ACP mode (geminiACP, acp_gemini_test.go).
//
// acpAgent is one ACP agent under test.
type acpAgent struct {
	name    string // the subtest, the profile and the workspace
	bin     string // under node_modules/.bin of the cache
	model   string
	pricing string
	env     string // the profile's args: and env: blocks, if any
	allow   []string
	// configure, if set, writes the agent's configuration under home and
	// returns the variables it needs in the runner's environment.
	configure func(t *testing.T, home, fakeURL string) map[string]string
	// denyEndsTurn: a refused permission ends the prompt cancelled with
	// no tool call (Codex); otherwise the tool fails and the model goes on
	// (Claude), with no tool update at all if denyHidesCall (Gemini).
	denyEndsTurn, denyHidesCall bool
	// hidesToolOutput: the completed call's update may lack the command's
	// output although the model got it (Codex once, Gemini always).
	hidesToolOutput bool
}

var acpAgents = []acpAgent{
	{
		name: "claude-agent-acp", bin: "claude-agent-acp", model: "claude-sonnet-4-6",
		pricing: `{input: "3", output: "15", cache_read: "0.30", cache_write: "3.75", reasoning: "15"}`,
		env: `env:
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1"
  DISABLE_TELEMETRY: "1"
  DISABLE_AUTOUPDATER: "1"
  DISABLE_ERROR_REPORTING: "1"
  DISABLE_BUG_COMMAND: "1"
  CLAUDE_CODE_MAX_RETRIES: "0"
`,
		allow: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR"},
	},
	{
		// The native binary: the codex-acp bin is a node wrapper that
		// forwards no signal (testdata/acp/README.md).
		name: "codex-acp", bin: "codex-acp-linux-x64", model: "gpt-5.5",
		pricing: `{input: "1.25", output: "10", cache_read: "0.125", cache_write: "1.25", reasoning: "10"}`,
		allow:   []string{"CODEX_HOME", "FAKE_OPENAI_API_KEY"}, denyEndsTurn: true, hidesToolOutput: true,
	},
	geminiACP,
}

// acpMesh is `agentmesh up` serving the ACP agents' profiles against the
// fake model API.
type acpMesh struct {
	bin, natsURL, profilesDir, tag string
	repo, root, workRoot           string
	env                            map[string]string
	fake                           *fakemodel.Server
	client                         *client.Client
	upLog                          *servicetest.Buffer
	stop                           func()
}

// startACPMesh writes each agent's configuration under one HOME, exactly as
// testdata/acp/README.md describes (Claude's settings.json asking for
// Bash, Codex's rule prompting for echo, so that the shell tool asks
// permission), a profile of adapter acp per agent, and starts agentmesh up
// with them and a runner environment holding the agents' variables, and
// upArgs.
// acpSuspendAfter is the e2e ACP profiles' session.suspend_after: an idle
// session on a conversation (agentmesh acp's) is suspended after it.
const acpSuspendAfter = 15 * time.Second

func startACPMesh(t *testing.T, label string, upArgs ...string) *acpMesh {
	t.Helper()
	var want []string
	for _, a := range acpAgents {
		want = append(want, filepath.Join(".bin", a.bin))
	}
	modules := cacheModules(t, want...)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	m := &acpMesh{bin: buildAgentmesh(t, repo, root), tag: fmt.Sprintf("%s-%d-%d", label, os.Getpid(), time.Now().UnixNano()), repo: repo, root: root}
	// Registered first, so it runs last: after up has stopped, no agent
	// process survives.
	t.Cleanup(func() { checkReaped(t, m.tag+"/") })

	m.fake = fakemodel.New(fakemodel.Auto)
	if err := m.fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.fake.Close() })

	home := mkdir(t, root, "home")
	claudeDir := mkdir(t, home, ".claude")
	write(t, filepath.Join(claudeDir, "settings.json"), `{"permissions":{"ask":["Bash"]}}`+"\n")
	codexHome := mkdir(t, home, ".codex")
	write(t, filepath.Join(codexHome, "config.toml"), codexConfig(m.fake.URL(), "FAKE_OPENAI_API_KEY"))
	write(t, filepath.Join(mkdir(t, codexHome, "rules"), "default.rules"), `prefix_rule(pattern = ["echo"], decision = "prompt")`+"\n")

	m.env = map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": home, "TMPDIR": mkdir(t, root, "tmp"), tagVar: m.tag + "/up",
		"CLAUDE_CONFIG_DIR": claudeDir, "ANTHROPIC_BASE_URL": m.fake.URL(), "ANTHROPIC_API_KEY": "sk-ant-fake-0000",
		"CODEX_HOME": codexHome, "FAKE_OPENAI_API_KEY": "sk-fake-0000",
		// Every agent runs confined, as a subprocess runner confines it.
		"AGENTMESH_SANDBOX": "on",
	}
	for _, a := range acpAgents {
		if a.configure != nil {
			maps.Copy(m.env, a.configure(t, home, m.fake.URL()))
		}
	}
	m.profilesDir = mkdir(t, root, "profiles")
	m.workRoot = mkdir(t, root, "work")
	for _, a := range acpAgents {
		mkdir(t, m.workRoot, a.name)
		allow := append([]string{"HOME", "TMPDIR", tagVar}, a.allow...)
		write(t, filepath.Join(m.profilesDir, a.name+".yaml"), fmt.Sprintf(`# %s as an ACP agent against the e2e test's fake model API.
schema: 1
name: %s
adapter: acp
transport: subprocess
capabilities: {resumable: false, emits_tool_events: true, reports_usage: true}
model: %s
context_window: 200000
pricing: %s
binary: %s
install_hint: make e2e-cli installs it into .cache/cli
env_allow: [%s]
%ssession:
  permission_policy: ask
  permission_timeout: 60s
  idle_timeout: 2m
  suspend_after: %s
policy:
  max_attempts: 1
  max_active: 1
`, a.name, a.name, a.model, a.pricing, filepath.Join(modules, ".bin", a.bin), strings.Join(allow, ", "), a.env, acpSuspendAfter))
	}

	m.upLog, m.stop = startUp(t, m.bin, m.env, append([]string{
		"--listen", "127.0.0.1:0", "--http", "", "--gateway", "",
		"--data-dir", filepath.Join(root, "data"),
		"--profiles-dir", m.profilesDir,
		"--fixture-dir", filepath.Join(repo, "testdata", "fixture"),
		"--workspace-root", m.workRoot}, upArgs...)...)
	m.natsURL = upNATS(t, m.upLog)
	waitForRouter(t, m.natsURL, m.upLog)
	nc, err := client.Connect(m.natsURL, tenant)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if m.client, err = client.New(nc, subject.Names{}); err != nil {
		t.Fatal(err)
	}
	return m
}

// acpPrompt is a prompt unique to one run.
func acpPrompt(a acpAgent, text, label string, sc fakemodel.Scenario) string {
	return uniquePrompt("acp "+a.name, text, label, sc)
}

// requestsFor returns the fake's requests whose current user turn holds p.
func (m *acpMesh) requestsFor(p string) []fakemodel.Request {
	return requestsHolding(m.fake, p)
}

// waitForRequest waits until the fake has a request whose current user
// turn holds p.
func (m *acpMesh) waitForRequest(p string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for len(m.requestsFor(p)) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the fake got no request for %q within %s", p, wait)
		}
		time.Sleep(100 * time.Millisecond) // polling the fake's record; nothing to wait on
	}
	return nil
}

// session starts a session run of a's profile with prompt and follows it
// to its terminal status, calling on once with no chunk when the run is
// submitted, then for every chunk (it may Send, Answer, Interrupt or
// Cancel).
func (m *acpMesh) session(t *testing.T, a acpAgent, prompt string, on func(id string, ch *wire.Chunk)) run {
	t.Helper()
	b, err := wire.Marshal(map[string]any{"prompt": prompt})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runWait)
	defer cancel()
	id, events, err := m.client.Start(ctx, wire.RunRequest{
		RunID: client.NewRunID(), Tenant: tenant, Principal: "e2e", Profile: a.name, Request: b,
		Runtime: map[string]any{cli.RuntimeWorkspace: a.name}, DeadlineMS: runDeadline.Milliseconds(),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := run{id: id}
	on(id, nil)
	for ev, err := range events {
		if err != nil {
			t.Fatalf("events of run %s: %v\n%s", id, err, r.describe())
		}
		r.events = append(r.events, ev)
		if ev.Kind == wire.KindChunk {
			r.chunks = append(r.chunks, *ev.Chunk)
			on(id, ev.Chunk)
		}
		if ev.Terminal() {
			r.final = *ev.Status
			break
		}
	}
	if r.final.State == "" {
		t.Fatalf("run %s ended without a terminal status\n%s", id, r.describe())
	}
	t.Logf("run %s: %s\n%s", id, r.summary(), r.describe())
	return r
}

// end cancels session run id: how every run of these tests ends.
func (m *acpMesh) end(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.client.Cancel(ctx, tenant, id); err != nil {
		t.Errorf("cancel %s: %v", id, err)
	}
}

func chunksOf(r run, typ wire.ChunkType) []wire.Chunk {
	var out []wire.Chunk
	for _, ch := range r.chunks {
		if ch.Type == typ {
			out = append(out, ch)
		}
	}
	return out
}

func stopReasons(r run) []string {
	var out []string
	for _, ch := range chunksOf(r, wire.ChunkTurnEnd) {
		out = append(out, ch.Metadata.StopReason)
	}
	return out
}

// TestACPAgents runs the real claude-agent-acp and codex-acp as session
// runs of agentmesh up, against the fake model API: a follow-up sent to
// the live run (whose model request carries the first turn), a shell tool
// call that asks permission, approved in one run and refused in another,
// and an interrupt of a turn whose model stream hangs. Each run is ended
// with a cancel; no agent process survives the mesh.
func TestACPAgents(t *testing.T) {
	m := startACPMesh(t, "acp")
	for _, a := range acpAgents {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			t.Run("followup", func(t *testing.T) { m.testFollowUp(t, a) })
			t.Run("permission-allow", func(t *testing.T) { m.testPermission(t, a, true) })
			t.Run("permission-deny", func(t *testing.T) { m.testPermission(t, a, false) })
			t.Run("interrupt", func(t *testing.T) { m.testInterrupt(t, a) })
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agentmesh up log:\n%s", m.upLog.String())
		}
	})
}

func (m *acpMesh) testFollowUp(t *testing.T, a acpAgent) {
	p1 := acpPrompt(a, "What is the answer?", "turn-1", fakemodel.Answer)
	p2 := acpPrompt(a, "What was the answer again?", "turn-2", fakemodel.Answer)
	r := m.session(t, a, p1, func(id string, ch *wire.Chunk) {
		if ch == nil || ch.Type != wire.ChunkTurnEnd {
			return
		}
		switch *ch.Metadata.NumTurns {
		case 1:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rep, err := m.client.Send(ctx, tenant, id, p2)
			if err != nil || rep.Turn != 2 {
				t.Errorf("Send: %+v, %v", rep, err)
				m.end(t, id)
			}
		default:
			m.end(t, id)
		}
	})
	if got := stopReasons(r); !slices.Equal(got, []string{"end_turn", "end_turn"}) {
		t.Fatalf("turn ends %q, want two end_turn\n%s", got, r.describe())
	}
	if in := chunksOf(r, wire.ChunkInput); len(in) != 1 || in[0].Content != p2 {
		t.Errorf("input chunks %+v, want the follow-up", in)
	}
	if !strings.Contains(r.text(), "42") {
		t.Errorf("text %q lacks the answer", r.text())
	}
	reqs := m.requestsFor(p2)
	if len(reqs) == 0 {
		t.Fatalf("the fake saw no request for the follow-up")
	}
	if h := reqs[0].Text(); !strings.Contains(h, p1) || !strings.Contains(h, fakemodel.AnswerText) {
		t.Fatalf("the follow-up's model request lacks turn 1 (%q and %q): %+v", p1, fakemodel.AnswerText, reqs[0].Messages)
	}
	if r.final.State != wire.StateCancelled {
		t.Errorf("ended %s, want cancelled", r.final.State)
	}
}

func (m *acpMesh) testPermission(t *testing.T, a acpAgent, allow bool) {
	label := "deny"
	if allow {
		label = "allow"
	}
	p := acpPrompt(a, "Run the shell command 'echo hello-from-tool' and tell me what it printed.", "permission-"+label, fakemodel.ToolCall)
	var reply wire.PermissionReply
	r := m.session(t, a, p, func(id string, ch *wire.Chunk) {
		if ch == nil {
			return
		}
		switch ch.Type {
		case wire.ChunkPermissionRequested:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var err error
			if reply, err = m.client.Answer(ctx, tenant, id, ch.ToolID, allow, ""); err != nil {
				t.Errorf("Answer: %v", err)
				m.end(t, id)
			}
		case wire.ChunkTurnEnd:
			m.end(t, id)
		}
	})
	reqs := m.requestsFor(p)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nchunks:\n%s\nfake saw:\n%s", fmt.Sprintf(format, args...), r.describe(), describeRequests(reqs))
	}
	asked, resolved := chunksOf(r, wire.ChunkPermissionRequested), chunksOf(r, wire.ChunkPermissionResolved)
	if len(asked) != 1 || len(resolved) != 1 || resolved[0].ToolID != asked[0].ToolID {
		fail("want one permission_requested and its permission_resolved")
	}
	if out, _ := resolved[0].ToolOutput.(map[string]any); out["by"] != "client" || resolved[0].Content != reply.OptionID {
		fail("permission_resolved %+v, want by client with the option %q the reply named", resolved[0], reply.OptionID)
	}
	opts, _ := asked[0].ToolInput["options"].([]any)
	kinds := map[any]bool{}
	for _, o := range opts {
		if o, ok := o.(map[string]any); ok {
			kinds[o["kind"]] = true
		}
	}
	if !kinds["allow_once"] || !kinds["reject_once"] {
		fail("permission_requested offers %v, want allow_once and reject_once options", opts)
	}
	results := chunksOf(r, wire.ChunkToolResult)
	switch {
	case allow:
		if got := stopReasons(r); !slices.Equal(got, []string{"end_turn"}) {
			fail("turn ends %q, want end_turn", got)
		}
		if len(results) == 0 || results[len(results)-1].IsError {
			fail("no successful tool_result")
		}
		// The tool_use says what the call does: the command, from the
		// call's input or its title (issue 37; Claude's first update
		// of a shell call is "Terminal" with the input {}).
		uses := chunksOf(r, wire.ChunkToolUse)
		if len(uses) != 1 || uses[0].ToolID != results[len(results)-1].ToolID {
			fail("want one tool_use, for the call whose result came")
		}
		if named, _ := json.Marshal(map[string]any{"name": uses[0].ToolName, "input": uses[0].ToolInput}); !strings.Contains(string(named), fakemodel.ToolCommand) {
			fail("the tool_use does not name the command %q: %s", fakemodel.ToolCommand, named)
		}
		// Codex's rawOutput.stdout was once "" although the model got the
		// output, Gemini's update has none (testdata/acp/README.md): only
		// Claude's is checked.
		if out := fmt.Sprint(results[len(results)-1].ToolOutput); !a.hidesToolOutput && !strings.Contains(out, fakemodel.ToolOutput) {
			fail("tool_result %s lacks %q", out, fakemodel.ToolOutput)
		}
		if len(reqs) != 2 || reqs[1].Reply != "tool_done" || !strings.Contains(r.text(), fakemodel.ToolDoneText) {
			fail("the model did not get the tool's output (want a tool call, then %q)", fakemodel.ToolDoneText)
		}
	case a.denyEndsTurn:
		if got := stopReasons(r); !slices.Equal(got, []string{"cancelled"}) {
			fail("turn ends %q, want cancelled", got)
		}
		if len(chunksOf(r, wire.ChunkToolUse)) != 0 || len(results) != 0 || len(reqs) != 1 {
			fail("a refused call ran, or the model was asked again")
		}
	default:
		if got := stopReasons(r); !slices.Equal(got, []string{"end_turn"}) {
			fail("turn ends %q, want end_turn", got)
		}
		switch {
		case a.denyHidesCall && (len(chunksOf(r, wire.ChunkToolUse)) != 0 || len(results) != 0):
			fail("a refused call was reported")
		case !a.denyHidesCall && (len(results) == 0 || !results[len(results)-1].IsError):
			fail("no failed tool_result for the refused call")
		}
		if len(reqs) != 2 || !strings.Contains(r.text(), fakemodel.ToolMismatchText) {
			fail("the model did not go on after the refusal (want %q)", fakemodel.ToolMismatchText)
		}
	}
	t.Logf("answered %s with option %s", asked[0].ToolID, reply.OptionID)
}

// testInterrupt interrupts a turn whose model stream hangs. Claude's next
// prompt after a cancel returns the cancelled turn's stale result
// (testdata/acp/README.md), so the run ends after the interrupt.
func (m *acpMesh) testInterrupt(t *testing.T, a acpAgent) {
	p := acpPrompt(a, "What is the answer?", "interrupt", fakemodel.Stall)
	var wg sync.WaitGroup
	defer wg.Wait()
	r := m.session(t, a, p, func(id string, ch *wire.Chunk) {
		if ch == nil {
			wg.Go(func() {
				if err := m.waitForRequest(p, 60*time.Second); err != nil {
					t.Error(err)
					m.end(t, id)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if _, err := m.client.Interrupt(ctx, tenant, id); err != nil {
					t.Errorf("Interrupt: %v", err)
					m.end(t, id)
				}
			})
			return
		}
		if ch.Type == wire.ChunkTurnEnd {
			m.end(t, id)
		}
	})
	if got := stopReasons(r); !slices.Equal(got, []string{"cancelled"}) {
		t.Fatalf("turn ends %q, want cancelled\n%s", got, r.describe())
	}
	if r.final.State != wire.StateCancelled {
		t.Errorf("ended %s, want cancelled", r.final.State)
	}
}

// TestACPNodeClient is an editor's path: testdata/acp-client/check.mjs,
// with the ACP client library of the npm package
// @zed-industries/agent-client-protocol, spawns `agentmesh acp --profile
// codex-acp --server <up>` and makes a session: initialize, session/new,
// two prompts (the second answered from the first turn's history), a
// permission request its requestPermission handler allows, and a cancel
// of a hanging turn. Then the editor leaves, comes back on a new
// `agentmesh acp` and reopens the session with session/load, which
// replays every earlier turn before it answers (issue 37 acceptance 4):
// the four prompts as user messages, each turn's agent message as the
// editor saw it live, the shell call and its completion.
func TestACPNodeClient(t *testing.T) {
	modules := cacheModules(t, filepath.Join("@zed-industries", "agent-client-protocol", "package.json"))
	m := startACPMesh(t, "acp-node")
	a := acpAgents[slices.IndexFunc(acpAgents, func(a acpAgent) bool { return a.name == "codex-acp" })]

	dir := nodeScriptDir(t, t.TempDir(), "acp-client", modules)
	label := fmt.Sprintf("e2e acp node %d", time.Now().UnixNano())
	// The hanging prompt is cancelled once the model has it.
	cancelFile := filepath.Join(dir, "cancel-now")
	var wg sync.WaitGroup
	defer wg.Wait()
	stall := make(chan struct{})
	defer close(stall)
	wg.Go(func() {
		deadline := time.Now().Add(3 * time.Minute)
		for len(m.requestsFor(label+" stall")) == 0 {
			select {
			case <-stall:
				return
			case <-time.After(100 * time.Millisecond): // polling the fake's record
			}
			if time.Now().After(deadline) {
				return
			}
		}
		if err := os.WriteFile(cancelFile, nil, 0o644); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	node := exec.CommandContext(ctx, "node", "check.mjs")
	node.Dir = dir
	node.Env = environ(map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": m.env["HOME"], "TMPDIR": m.env["TMPDIR"], tagVar: m.tag + "/node",
		"AGENTMESH_TEST_BIN": m.bin, "AGENTMESH_TEST_NATS_URL": m.natsURL, "AGENTMESH_TEST_PROFILE": a.name,
		"AGENTMESH_TEST_TENANT": tenant, "AGENTMESH_TEST_LABEL": label, "AGENTMESH_TEST_CANCEL_FILE": cancelFile,
		"AGENTMESH_TEST_STALL": fakemodel.Marker(fakemodel.Stall), "AGENTMESH_TEST_TOOL": fakemodel.Marker(fakemodel.ToolCall),
	})
	node.WaitDelay = 10 * time.Second
	var out, stderr bytes.Buffer
	node.Stdout, node.Stderr = &out, &stderr
	err := node.Run()
	t.Logf("node check.mjs:\n%s%s", out.String(), stderr.String())
	if err != nil {
		t.Fatalf("node check.mjs: %v\nagentmesh up log:\n%s", err, m.upLog.String())
	}
	var res struct {
		OK          bool     `json:"ok"`
		Protocol    int      `json:"protocol_version"`
		Session     string   `json:"session_id"`
		StopReasons []string `json:"stop_reasons"`
		Texts       []string `json:"texts"`
		Prompts     []string `json:"prompts"`
		Permission  struct {
			Title  string `json:"title"`
			Option string `json:"option"`
		} `json:"permission"`
		Replay struct {
			Updates []replayed `json:"updates"`
			Late    int        `json:"late"`
		} `json:"replay"`
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("check.mjs's last line is not its JSON summary: %v", err)
	}
	if !res.OK || res.Session == "" || res.Protocol != 1 {
		t.Fatalf("summary %+v", res)
	}
	if !slices.Equal(res.StopReasons, []string{"end_turn", "end_turn", "end_turn", "cancelled"}) {
		t.Errorf("stop reasons %q, want end_turn ×3 then cancelled", res.StopReasons)
	}
	if len(res.Prompts) != 4 || len(res.Texts) != 4 {
		t.Fatalf("summary %+v: want four prompts", res)
	}
	for i := range 2 {
		if !strings.Contains(res.Texts[i], "42") {
			t.Errorf("prompt %d answered %q, want the answer", i+1, res.Texts[i])
		}
	}
	if reqs := m.requestsFor(res.Prompts[1]); len(reqs) == 0 || !strings.Contains(reqs[0].Text(), res.Prompts[0]) || !strings.Contains(reqs[0].Text(), fakemodel.AnswerText) {
		t.Errorf("the second prompt's model request lacks the first turn: %s", describeRequests(reqs))
	}
	if res.Permission.Option == "" || !strings.Contains(res.Texts[2], fakemodel.ToolDoneText) {
		t.Errorf("permission %+v, text %q: want an allowed call whose output the model got (%q)", res.Permission, res.Texts[2], fakemodel.ToolDoneText)
	}
	if reqs := m.requestsFor(res.Prompts[2]); len(reqs) != 2 || reqs[1].Reply != "tool_done" {
		t.Errorf("the tool prompt's model requests: %s", describeRequests(reqs))
	}
	checkReplay(t, res.Replay.Updates, res.Replay.Late, res.Prompts, res.Texts)
	m.stop()
	if t.Failed() {
		t.Logf("agentmesh up log:\n%s", m.upLog.String())
	}
}

// replayed is a session/update an editor got from session/load.
type replayed struct {
	Kind       string `json:"kind"`
	Text       string `json:"text"`
	ToolCallID string `json:"tool_call_id"`
	Title      string `json:"title"`
	Status     string `json:"status"`
}

// checkReplay checks what a session/load replayed before it answered
// (none came after, late): the prompts, in order, as user messages; after
// each of the first three, the agent's message as the editor got it live
// (texts); in the third turn a tool call and its completion.
func checkReplay(t *testing.T, updates []replayed, late int, prompts, texts []string) {
	t.Helper()
	if late != 0 {
		t.Errorf("%d session/update notifications came after the load answered", late)
	}
	var users []string
	agent := make([]string, len(prompts))
	calls := make([]map[string]string, len(prompts)) // tool call id: its last status
	turn, lastKind := -1, ""
	for _, u := range updates {
		switch u.Kind {
		case "user_message_chunk":
			if lastKind == u.Kind {
				users[len(users)-1] += u.Text
			} else if turn++; turn < len(prompts) {
				users = append(users, u.Text)
			}
		case "agent_message_chunk":
			if turn >= 0 && turn < len(prompts) {
				agent[turn] += u.Text
			}
		case "tool_call", "tool_call_update":
			if turn >= 0 && turn < len(prompts) {
				if calls[turn] == nil {
					calls[turn] = map[string]string{}
				}
				if st, ok := calls[turn][u.ToolCallID]; !ok || u.Status != "" || st == "" {
					calls[turn][u.ToolCallID] = u.Status
				}
			}
		}
		lastKind = u.Kind
	}
	if !slices.Equal(users, prompts) {
		t.Fatalf("the replay's user messages %q, want the prompts %q (replay %+v)", users, prompts, updates)
	}
	for i := range 3 {
		if agent[i] != texts[i] {
			t.Errorf("turn %d replayed the agent saying %q, live it said %q", i+1, agent[i], texts[i])
		}
	}
	completed := 0
	for _, st := range calls[2] {
		if st == "completed" {
			completed++
		}
	}
	if completed == 0 {
		t.Errorf("turn 3's replay has no completed tool call: %v (replay %+v)", calls[2], updates)
	}
}
