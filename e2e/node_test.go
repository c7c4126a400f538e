//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
)

// nodeSDKWant is what the fixture profile answers check.mjs's prompt "hi".
const nodeSDKWant = "echo: hi"

// The tool round trip check.mjs makes on nodeToolsProfile, an openai
// profile whose model API is a fake serving the recorded round trip
// (openAIRoundTrip): the call the model makes and its answer to the
// result check.mjs sends back.
const (
	nodeToolsProfile = "openai-tools"
	nodeToolCallID   = "call_Rt7Yh2Kp9Lm4Nq8Ws1Ez5Xc3"
	nodeToolArgs     = `{"path":"answer.txt"}`
	nodeToolAnswer   = "answer.txt says: 42."
)

var (
	upNATSLine    = regexp.MustCompile(`msg="agentmesh up" nats=(\S+)`)
	upGatewayLine = regexp.MustCompile(`msg="gateway listening" addr=(\S+)`)
)

// upAddrs waits for `agentmesh up --gateway` to log its NATS URL and its
// gateway's address, and returns them.
func upAddrs(t *testing.T, upLog *servicetest.Buffer) (natsURL, gatewayAddr string) {
	t.Helper()
	natstest.Eventually(t, 60*time.Second, func() error {
		log := upLog.String()
		n, g := upNATSLine.FindStringSubmatch(log), upGatewayLine.FindStringSubmatch(log)
		if n == nil || g == nil {
			return fmt.Errorf("agentmesh up has not logged its NATS URL and gateway address yet:\n%s", log)
		}
		natsURL, gatewayAddr = n[1], g[1]
		return nil
	})
	return natsURL, gatewayAddr
}

// nodeSDKCheck is one check's result as check.mjs prints it.
type nodeSDKCheck struct {
	Text   string         `json:"text"`
	Usage  map[string]any `json:"usage"`
	IDs    []string       `json:"ids"`
	Status int            `json:"status"`
	Call   *struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"call"`
}

// openAIRoundTrip is a fake OpenAI Responses API (POST /v1/responses)
// replaying testdata/remote/openai/tool-roundtrip.json: its first
// recorded stream (a function call) for a request that carries no
// function_call_output, its second (the answer) for one that does. It
// keeps every request body, and the path of any other request.
type openAIRoundTrip struct {
	*httptest.Server
	mu    sync.Mutex
	reqs  []string
	stray []string
}

func startOpenAIRoundTrip(t *testing.T, repo string) *openAIRoundTrip {
	t.Helper()
	rec, err := replay.Load(filepath.Join(repo, "testdata", "remote", "openai", "tool-roundtrip.json"))
	if err != nil || len(rec) != 2 {
		t.Fatalf("tool-roundtrip.json: %v, %d responses, want 2", err, len(rec))
	}
	m := &openAIRoundTrip{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		m.mu.Lock()
		if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" || err != nil {
			m.stray = append(m.stray, r.Method+" "+r.URL.Path)
			m.mu.Unlock()
			http.NotFound(w, r)
			return
		}
		m.reqs = append(m.reqs, string(b))
		m.mu.Unlock()
		resp := rec[0]
		if bytes.Contains(b, []byte(`"function_call_output"`)) {
			resp = rec[1]
		}
		resp.Write(w)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *openAIRoundTrip) requests() (reqs, stray []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs), slices.Clone(m.stray)
}

// nodeSDKProfiles writes a profiles directory: the shipped fixture profile
// and nodeToolsProfile, the openai adapter against baseURL.
func nodeSDKProfiles(t *testing.T, repo, dir, baseURL string) string {
	t.Helper()
	fixture, err := os.ReadFile(filepath.Join(repo, "profiles", "fixture.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "fixture.yaml"), string(fixture))
	write(t, filepath.Join(dir, nodeToolsProfile+".yaml"), `# The openai adapter against the e2e test's fake model API.
schema: 1
name: `+nodeToolsProfile+`
adapter: openai
transport: remote
model: gpt-5.5
pricing: {input: "1.25", output: "10", cache_read: "0.125", reasoning: "10"}
base_url: `+baseURL+`
allow_loopback: true
omit_temperature: true
`)
	return dir
}

// TestNodeSDK runs the official Node OpenAI SDK (the npm package openai,
// which make e2e-cli installs into .cache/cli beside the CLIs) against the
// HTTP gateway of `agentmesh up --gateway`, with a key from `agentmesh keys
// create`: testdata/node-sdk/check.mjs makes a chat completion, the same
// streamed with usage, a response, the same streamed, lists the models
// and calls with a wrong key, all on the fixture profile; then, on an
// openai profile whose model API is a fake replaying a recorded tool
// round trip, it answers the model's tool call in both shapes: chat,
// plain and streamed, the reply's message sent back as it came, and
// Responses, continued by previous_response_id and with the reply's
// output items inline. Under make e2e-cli (E2E_CLI_CACHE set) node and
// the package must be there; otherwise the test skips without them.
func TestNodeSDK(t *testing.T) {
	modules := nodeSDKModules(t)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	// Started first, so it stops after up.
	model := startOpenAIRoundTrip(t, repo)
	bin := buildAgentmesh(t, repo, root)
	tag := fmt.Sprintf("node-sdk-%d-%d", os.Getpid(), time.Now().UnixNano())
	// Registered first, so it runs last: after up has stopped, no process
	// of up or node survives.
	t.Cleanup(func() { checkReaped(t, tag+"/") })

	home := mkdir(t, root, "home")
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": home, "TMPDIR": mkdir(t, root, "tmp")}
	upLog, stop := startUp(t, bin, merge(env, map[string]string{tagVar: tag + "/up"}),
		"--listen", "127.0.0.1:0", "--http", "", "--gateway", "127.0.0.1:0",
		"--data-dir", filepath.Join(root, "data"),
		"--profiles-dir", nodeSDKProfiles(t, repo, mkdir(t, root, "profiles"), model.URL+"/v1"),
		"--fixture-dir", filepath.Join(repo, "testdata", "fixture"),
		"--workspace-root", mkdir(t, root, "work"))
	natsURL, gatewayAddr := upAddrs(t, upLog)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	keys := exec.CommandContext(ctx, bin, "keys", "create", "--tenant", "node-sdk", "--principal", "e2e")
	keys.Env = environ(merge(env, map[string]string{"AGENTMESH_NATS_URL": natsURL}))
	var keysErr bytes.Buffer
	keys.Stderr = &keysErr
	out, err := keys.Output()
	if err != nil {
		t.Fatalf("agentmesh keys create: %v\n%s", err, keysErr.String())
	}
	key := strings.TrimSpace(string(out))

	dir := nodeScriptDir(t, root, "node-sdk", modules)
	node := exec.CommandContext(ctx, "node", "check.mjs")
	node.Dir = dir
	node.Env = environ(merge(env, map[string]string{
		"AGENTMESH_TEST_GATEWAY_URL": "http://" + gatewayAddr, "OPENAI_API_KEY": key, "AGENTMESH_TEST_TOOLS_MODEL": nodeToolsProfile,
		tagVar: tag + "/node",
	}))
	node.WaitDelay = 10 * time.Second
	var nodeOut, nodeErr bytes.Buffer
	node.Stdout, node.Stderr = &nodeOut, &nodeErr
	err = node.Run()
	t.Logf("node check.mjs:\n%s%s", nodeOut.String(), nodeErr.String())
	if err != nil {
		stop()
		t.Fatalf("node check.mjs: %v\nagentmesh up log:\n%s", err, upLog.String())
	}

	var res struct {
		OK     bool                    `json:"ok"`
		SDK    string                  `json:"sdk"`
		Node   string                  `json:"node"`
		Checks map[string]nodeSDKCheck `json:"checks"`
	}
	lines := strings.Split(strings.TrimSpace(nodeOut.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("check.mjs's last line is not its JSON results: %v", err)
	}
	if !res.OK {
		t.Fatalf("check.mjs: ok is false")
	}
	for _, name := range []string{"chat", "chat_stream", "responses", "responses_stream"} {
		c, ok := res.Checks[name]
		switch {
		case !ok:
			t.Errorf("%s: no result", name)
		case c.Text != nodeSDKWant:
			t.Errorf("%s: text %q, want %q", name, c.Text, nodeSDKWant)
		case c.Usage == nil:
			t.Errorf("%s: no usage", name)
		}
	}
	for _, name := range []string{"chat_tools", "chat_tools_stream", "responses_tools_previous", "responses_tools_inline"} {
		c, ok := res.Checks[name]
		switch {
		case !ok:
			t.Errorf("%s: no result", name)
		case c.Call == nil || c.Call.ID != nodeToolCallID || c.Call.Name != "fs_read" || c.Call.Arguments != nodeToolArgs:
			t.Errorf("%s: call %+v, want %s fs_read(%s)", name, c.Call, nodeToolCallID, nodeToolArgs)
		case c.Text != nodeToolAnswer:
			t.Errorf("%s: text %q, want %q", name, c.Text, nodeToolAnswer)
		}
	}
	if ids := res.Checks["models"].IDs; !slices.Contains(ids, "fixture") || !slices.Contains(ids, nodeToolsProfile) {
		t.Errorf("models: %q does not list fixture and %s", ids, nodeToolsProfile)
	}
	if got := res.Checks["wrong_key"].Status; got != 401 {
		t.Errorf("wrong_key: status %d, want 401", got)
	}
	if len(res.Checks) != 10 {
		t.Errorf("check.mjs ran %d checks, want 10", len(res.Checks))
	}
	// Four round trips, each a call and an answer; every answer went to
	// the model with the tool's result as the call's output.
	reqs, stray := model.requests()
	answers := 0
	for _, r := range reqs {
		if strings.Contains(r, `"function_call_output"`) {
			answers++
			if !strings.Contains(r, `"call_id":"`+nodeToolCallID+`"`) || !strings.Contains(r, `"output":"42\n"`) {
				t.Errorf("a request with the tool's result does not carry it as the call's output: %s", r)
			}
		}
	}
	if len(reqs) != 8 || answers != 4 {
		t.Errorf("the model API got %d requests, %d with a tool result; want 8, 4 (four round trips)", len(reqs), answers)
	}
	if len(stray) > 0 {
		t.Errorf("requests the fake model API does not serve: %q", stray)
	}
	stop()
	if strings.Contains(upLog.String(), key) {
		t.Error("up's log holds the key")
	}
	if t.Failed() {
		t.Logf("agentmesh up log:\n%s", upLog.String())
		return
	}
	t.Logf("openai %s on node %s: every check passed", res.SDK, res.Node)
}

// nodeScriptDir copies the scripts of testdata/<name> (*.mjs) into
// root/<name> beside a link to modules and returns that folder: the
// scripts beside the installed packages, as in any Node project (an ES
// module resolves its imports from the node_modules next to it; NODE_PATH
// is for require only).
func nodeScriptDir(t *testing.T, root, name, modules string) string {
	t.Helper()
	dir := mkdir(t, root, name)
	scripts, err := filepath.Glob(filepath.Join("testdata", name, "*.mjs"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no script in testdata/%s: %v", name, err)
	}
	for _, p := range scripts {
		script, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, filepath.Base(p)), string(script))
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// nodeSDKModules returns the node_modules folder that holds the openai
// package (cacheModules).
func nodeSDKModules(t *testing.T) string {
	t.Helper()
	return cacheModules(t, filepath.Join("openai", "package.json"))
}

// cacheModules returns the node_modules folder of $E2E_CLI_CACHE, which
// make e2e-cli sets, or else of ../.cache/cli, after checking that node
// is on PATH and that each of want (paths below the folder) exists.
// Without one the test fails under make e2e-cli and skips otherwise.
func cacheModules(t *testing.T, want ...string) string {
	t.Helper()
	cache, required := os.LookupEnv("E2E_CLI_CACHE")
	if !required {
		cache = filepath.Join("..", ".cache", "cli")
	}
	modules, err := filepath.Abs(filepath.Join(cache, "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + "; `make e2e-cli` installs the pinned packages into .cache/cli"
		if required {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node is not on PATH")
	}
	for _, w := range want {
		if _, err := os.Stat(filepath.Join(modules, w)); err != nil {
			missing("%s is not installed in %s", w, modules)
		}
	}
	return modules
}
