package pi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/workspace"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// fake describes one run of the fake pi (conformance.Fake).
type fake struct {
	transcript string // capture name in testdata/cli/pi; "" for no stdout
	stderr     string
	exit       int
	hang       bool // sleep after stdout instead of exiting
}

// harness is an adapter whose binary is the test binary, with a workspace
// root holding the directory "sub".
type harness struct {
	t      *testing.T
	root   string
	record string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, root: root, record: filepath.Join(t.TempDir(), "record.json")}
}

func (h *harness) adapter(f fake) *cli.Adapter[Request] {
	h.t.Helper()
	cfg := DefaultConfig()
	cfg.WorkspaceRoot = h.root
	cfg.Grace = 500 * time.Millisecond
	fk := conformance.Fake{Exit: f.exit, Hang: f.hang, Record: h.record}
	if f.transcript != "" {
		fk.Stdout = conformance.Testdata(h.t, "cli", Name, f.transcript+".stdout.ndjson")
	}
	if f.stderr != "" {
		fk.Stderr = filepath.Join(h.t.TempDir(), "stderr.txt")
		if err := os.WriteFile(fk.Stderr, []byte(f.stderr), 0o600); err != nil {
			h.t.Fatal(err)
		}
	}
	cfg, _ = fk.Play(h.t, cfg)
	a, err := New(cfg)
	if err != nil {
		h.t.Fatalf("New: %v", err)
	}
	return a
}

// run validates req (a map) and streams one attempt of it.
func (h *harness) run(f fake, req map[string]any, call adapter.Call) ([]wire.Chunk, error) {
	h.t.Helper()
	a := h.adapter(f)
	v, err := a.Validate(conformance.Encode(h.t, req))
	if err != nil {
		h.t.Fatalf("Validate: %v", err)
	}
	call.Request = v
	if call.Runtime == nil {
		call.Runtime = map[string]any{cli.RuntimeWorkspace: "sub"}
	}
	if call.MaxAttempts == 0 {
		call.MaxAttempts = 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return conformance.Drain(h.t, a.Stream(ctx, call))
}

func (h *harness) recorded() *conformance.Record {
	h.t.Helper()
	r := conformance.ReadRecord(h.t, h.record)
	if r == nil {
		h.t.Fatal("the fake recorded nothing")
	}
	return r
}

func readArgv(t testing.TB, name string) []string {
	t.Helper()
	return capture(t, name).Argv
}

// TestStreamTranscripts runs every capture through the real subprocess
// path and compares the stream with its golden file.
func TestStreamTranscripts(t *testing.T) {
	for _, c := range conformance.Cases(t, Name) {
		if !c.Captured {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			h := newHarness(t)
			chunks, err := h.run(fake{transcript: c.Name, exit: c.Exit}, map[string]any{"prompt": "What is the answer?", "provider": "fake"},
				adapter.Call{Model: "fake-model"})
			conformance.MatchGolden(t, filepath.Join(c.Dir, "want.jsonl"), chunks, err)
		})
	}
}

func TestStreamArgvAndWorkspace(t *testing.T) {
	t.Setenv(EnvAPIKey, "sk-fake-0000")
	t.Setenv(EnvAgentDir, "/srv/pi-agent")
	t.Setenv("NATS_TOKEN", "runner-secret")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-other-profile")
	nasty := `Say "hi" $(rm -rf /) ; echo 'x' && ` + "`id`\n-p --session"
	tests := []struct {
		name string
		req  map[string]any
		call adapter.Call
		want []string
	}{
		{name: "transcript S1", req: map[string]any{"prompt": "What is the answer?", "provider": "fake"},
			call: adapter.Call{Model: "fake-model"}, want: readArgv(t, "S1")[1:]},
		{name: "transcript S1-resume", req: map[string]any{"prompt": "What was the answer again?", "provider": "fake",
			"resume": "01a22a8d-7f7d-7689-a314-843817dab2e1"},
			call: adapter.Call{Model: "fake-model"}, want: readArgv(t, "S1-resume")[1:]},
		{name: "prompt is one element", req: map[string]any{"prompt": nasty},
			call: adapter.Call{Model: "fake/fake-model"},
			want: []string{"--mode", "json", "-p", "--model", "fake/fake-model", nasty}},
		{name: "request model wins", req: map[string]any{"prompt": "hi", "model": "other"},
			call: adapter.Call{Model: "fake-model"}, want: []string{"--mode", "json", "-p", "--model", "other", "hi"}},
		{name: "no model at all", req: map[string]any{"prompt": "hi"},
			want: []string{"--mode", "json", "-p", "hi"}},
		{name: "every flag", req: map[string]any{"prompt": "hi", "provider": "fake", "thinking": "high",
			"tools": []any{"read", "grep"}, "system_prompt": "FAKE-PI-SYSTEM", "append_system_prompt": "-starts with a dash"},
			call: adapter.Call{Model: "fake-model"},
			want: []string{"--mode", "json", "-p", "--provider", "fake", "--model", "fake-model", "--thinking", "high",
				"--tools", "read,grep", "--system-prompt", "FAKE-PI-SYSTEM", "--append-system-prompt", "-starts with a dash", "hi"}},
		{name: "no tools", req: map[string]any{"prompt": "hi", "no_tools": true},
			want: []string{"--mode", "json", "-p", "--no-tools", "hi"}},
		{name: "injected session", req: map[string]any{"prompt": "hi"},
			call: adapter.Call{SessionID: "01a22a8d-7f7d-7689-a314-843817dab2e1"},
			want: []string{"--mode", "json", "-p", "--session", "01a22a8d-7f7d-7689-a314-843817dab2e1", "hi"}},
		{name: "caller's session wins", req: map[string]any{"prompt": "hi", "resume": "01a22a8e-462f-73b1-8dcb-e666044940f3"},
			call: adapter.Call{SessionID: "01a22a8d-7f7d-7689-a314-843817dab2e1"},
			want: []string{"--mode", "json", "-p", "--session", "01a22a8e-462f-73b1-8dcb-e666044940f3", "hi"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			if _, err := h.run(fake{transcript: "S1"}, tt.req, tt.call); err != nil {
				t.Fatalf("stream: %v", err)
			}
			rec := h.recorded()
			if !slices.Equal(rec.Argv, tt.want) {
				t.Errorf("argv = %q, want %q", rec.Argv, tt.want)
			}
			wantCwd, err := filepath.EvalSymlinks(filepath.Join(h.root, "sub"))
			if err != nil {
				t.Fatal(err)
			}
			if rec.Cwd != wantCwd {
				t.Errorf("cwd = %q, want the contained workspace %q", rec.Cwd, wantCwd)
			}
			env := rec.Env
			for k, want := range map[string]string{EnvAPIKey: "sk-fake-0000", EnvAgentDir: "/srv/pi-agent", EnvOffline: "1", EnvTelemetry: "0"} {
				if env[k] != want {
					t.Errorf("child %s = %q, want %q", k, env[k], want)
				}
			}
			for _, k := range []string{"NATS_TOKEN", "ANTHROPIC_API_KEY"} {
				if v, ok := env[k]; ok {
					t.Errorf("child received %s=%q", k, v)
				}
			}
		})
	}
}

// TestStreamResumeRoundTrip replays S1, then S1-resume with the session the
// first run confirmed, as the router injects it.
func TestStreamResumeRoundTrip(t *testing.T) {
	h := newHarness(t)
	first, err := h.run(fake{transcript: "S1"}, map[string]any{"prompt": "What is the answer?", "provider": "fake"},
		adapter.Call{Model: "fake-model"})
	if err != nil {
		t.Fatalf("first run: %v", err)
	}
	id := confirmedSession(t, first)
	if id == "" {
		t.Fatal("the first run confirmed no session id")
	}
	if slices.Contains(h.recorded().Argv, "--session") {
		t.Errorf("the first run resumed: %q", h.recorded().Argv)
	}
	second, err := h.run(fake{transcript: "S1-resume"}, map[string]any{"prompt": "What was the answer again?", "provider": "fake", ResumeField: id},
		adapter.Call{Model: "fake-model", SessionID: id})
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	args := h.recorded().Argv
	if i := slices.Index(args, "--session"); i < 0 || i+1 >= len(args) || args[i+1] != id {
		t.Errorf("second argv = %q, want --session %s", args, id)
	}
	if got := confirmedSession(t, second); got != id {
		t.Errorf("second run confirmed session %q, want %q", got, id)
	}
	last := second[len(second)-1]
	if last.Type != wire.ChunkResult || last.Metadata.SessionID != id {
		t.Errorf("second run's last chunk = %+v, want a result carrying session %s", last, id)
	}
}

// confirmedSession is the session id of the first system chunk that has
// one (conformance.ConfirmedSession); that chunk carries no
// provider_session_id.
func confirmedSession(t testing.TB, chunks []wire.Chunk) string {
	t.Helper()
	for _, c := range chunks {
		if c.Type == wire.ChunkSystem && c.Metadata.ProviderSessionID != "" {
			t.Errorf("system chunk carries provider_session_id %q", c.Metadata.ProviderSessionID)
		}
	}
	return conformance.ConfirmedSession(chunks)
}

func TestStreamFailures(t *testing.T) {
	tests := []struct {
		name        string
		fake        fake
		maxAttempts int
		wantTypes   []wire.ChunkType
		wantClass   wire.Class // of the error chunk, or of the final error
		wantContent string     // in the error chunk
		wantErr     error      // the final error; nil: none
		wantCode    int
		wantStderr  string
	}{
		{name: "401 exit 0: one error chunk, no extra error", fake: fake{transcript: "S3"},
			wantTypes: []wire.ChunkType{wire.ChunkSystem, wire.ChunkSystem, wire.ChunkError},
			wantClass: wire.ProviderAuthError, wantContent: "HTTP 401 authentication_error: invalid x-api-key"},
		{name: "500 without retries", fake: fake{transcript: "S5-noretry"},
			wantTypes: []wire.ChunkType{wire.ChunkSystem, wire.ChunkSystem, wire.ChunkError},
			wantClass: wire.ProviderError, wantContent: "HTTP 500 api_error: Internal server error"},
		{name: "429: the attempt policy stops pi's retries and pi", fake: fake{transcript: "S4", hang: true}, maxAttempts: 2,
			// the retry within the policy is Pi's notice (a system chunk)
			wantTypes: []wire.ChunkType{wire.ChunkSystem, wire.ChunkSystem, wire.ChunkSystem, wire.ChunkError},
			wantClass: wire.ProviderQuotaError, wantContent: "(after 2 attempts; the run allows 2)"},
		{name: "429: pi gives up first", fake: fake{transcript: "S4"}, maxAttempts: 10,
			wantTypes: []wire.ChunkType{wire.ChunkSystem, wire.ChunkSystem, wire.ChunkSystem, wire.ChunkSystem, wire.ChunkSystem, wire.ChunkError},
			wantClass: wire.ProviderQuotaError, wantContent: "HTTP 429 rate_limit_error: Number of request tokens has exceeded your per-minute rate limit (after 4 attempts)"},
		{name: "non-zero exit without an in-band error", fake: fake{stderr: "No session found matching 'x'\n", exit: 1},
			wantErr: wire.ProviderProcessError, wantClass: wire.ProviderProcessError, wantCode: 1, wantStderr: "No session found matching"},
		{name: "no api key", fake: fake{stderr: "Error: No API key found for fake.\n", exit: 1},
			wantErr: wire.ProviderAuthError, wantClass: wire.ProviderAuthError, wantCode: 1, wantStderr: "No API key found"},
		{name: "chunks stay observable before a non-zero exit", fake: fake{transcript: "S1", stderr: "crash", exit: 2},
			wantTypes: []wire.ChunkType{wire.ChunkSystem, wire.ChunkSystem, wire.ChunkText, wire.ChunkText},
			wantErr:   wire.ProviderProcessError, wantClass: wire.ProviderProcessError, wantCode: 2, wantStderr: "crash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			start := time.Now()
			chunks, err := h.run(tt.fake, map[string]any{"prompt": "What is the answer?"}, adapter.Call{Model: "fake-model", MaxAttempts: tt.maxAttempts})
			if tt.fake.hang && time.Since(start) > 10*time.Second {
				t.Errorf("took %v: pi was not stopped when the attempt policy was spent", time.Since(start))
			}
			var types []wire.ChunkType
			for _, c := range chunks {
				types = append(types, c.Type)
			}
			if !slices.Equal(types, tt.wantTypes) {
				t.Errorf("chunk types = %v, want %v", types, tt.wantTypes)
			}
			for _, p := range conformance.Check(Capabilities, chunks, err, conformance.Ran) {
				t.Errorf("stream rule: %s", p)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("final error %v, want none after the error chunk", err)
				}
				last := chunks[len(chunks)-1]
				if last.Metadata.ErrorClass != tt.wantClass || !strings.Contains(last.Content, tt.wantContent) {
					t.Errorf("error chunk = %q (%s), want %q (%s)", last.Content, last.Metadata.ErrorClass, tt.wantContent, tt.wantClass)
				}
				return
			}
			var we *wire.Error
			if !errors.Is(err, tt.wantErr) || !errors.As(err, &we) {
				t.Fatalf("final error = %v, want %v", err, tt.wantErr)
			}
			if we.Class != tt.wantClass || we.ReturnCode == nil || *we.ReturnCode != tt.wantCode || !strings.Contains(we.StderrTail, tt.wantStderr) {
				t.Errorf("final error = %+v (returncode %v), want class %s, returncode %d, stderr with %q", we, we.ReturnCode, tt.wantClass, tt.wantCode, tt.wantStderr)
			}
		})
	}
}

func TestStreamRefusesBeforeLaunch(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	var traverse string // set by a setup: a relative path from the workspace to secret
	tests := []struct {
		name    string
		req     map[string]any
		runtime map[string]any
		setup   func(ws string)
		wantErr error
	}{
		{name: "workspace traversal", req: map[string]any{"prompt": "hi"}, runtime: map[string]any{"workspace": "../x"}, wantErr: workspace.ErrEscape},
		{name: "absolute workspace", req: map[string]any{"prompt": "hi"}, runtime: map[string]any{"workspace": "/tmp"}, wantErr: workspace.ErrEscape},
		{name: "system prompt names a file outside", req: map[string]any{"prompt": "hi", "system_prompt": secret}, wantErr: workspace.ErrEscape},
		{name: "system prompt names a symlink leading outside", req: map[string]any{"prompt": "hi", "append_system_prompt": "link.txt"},
			setup: func(ws string) {
				if err := os.Symlink(secret, filepath.Join(ws, "link.txt")); err != nil {
					t.Fatal(err)
				}
			}, wantErr: workspace.ErrEscape},
		{name: "system prompt traverses to a file", req: map[string]any{"prompt": "hi"},
			setup: func(ws string) {
				rel, err := filepath.Rel(ws, secret)
				if err != nil || !strings.HasPrefix(rel, "..") {
					t.Fatalf("rel %q: %v", rel, err)
				}
				traverse = rel
			}, wantErr: workspace.ErrEscape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			traverse = ""
			if tt.setup != nil {
				tt.setup(filepath.Join(h.root, "sub"))
			}
			if traverse != "" {
				tt.req["system_prompt"] = traverse
			}
			chunks, err := h.run(fake{transcript: "S1"}, tt.req, adapter.Call{Runtime: tt.runtime})
			if len(chunks) != 0 || !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %d chunks and %v, want no chunk and %v", len(chunks), err, tt.wantErr)
			}
			if _, serr := os.Stat(h.record); serr == nil {
				t.Error("the CLI was started")
			}
		})
	}
}

func TestStreamSystemPromptFileInWorkspace(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.root, "sub", "SYSTEM.md"), []byte("be brief"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := h.run(fake{transcript: "S1"}, map[string]any{"prompt": "hi", "system_prompt": "SYSTEM.md", "append_system_prompt": "plain text, not a file"}, adapter.Call{}); err != nil {
		t.Fatalf("stream: %v", err)
	}
	want := []string{"--mode", "json", "-p", "--system-prompt", "SYSTEM.md", "--append-system-prompt", "plain text, not a file", "hi"}
	if got := h.recorded().Argv; !slices.Equal(got, want) {
		t.Errorf("argv = %q, want %q", got, want)
	}
}

func TestStreamMissingBinary(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Binary = "pi-not-installed-" + strconv.Itoa(os.Getpid())
	cfg.WorkspaceRoot = t.TempDir()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := a.Validate(conformance.Encode(t, map[string]any{"prompt": "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := conformance.Drain(t, a.Stream(context.Background(), adapter.Call{Request: req, MaxAttempts: 3}))
	var we *wire.Error
	if len(chunks) != 0 || !errors.Is(err, wire.ProviderExecutableNotFound) || !errors.As(err, &we) || !strings.Contains(we.Message, InstallHint) {
		t.Fatalf("got %d chunks and %v, want ProviderExecutableNotFound with %q", len(chunks), err, InstallHint)
	}
}

func TestNewDeclaration(t *testing.T) {
	a, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := wire.Capabilities{Transport: wire.TransportSubprocess, Resumable: true, EmitsToolEvents: true, ReportsUsage: true, ResumeField: "resume"}
	if a.Name() != "pi" || a.Capabilities() != want || !slices.Equal(a.RuntimeKeys(), []string{"workspace"}) {
		t.Errorf("got %s %+v %v", a.Name(), a.Capabilities(), a.RuntimeKeys())
	}
	if err := adapter.CheckCapabilities(a.Name(), a.Capabilities()); err != nil {
		t.Error(err)
	}
	cfg := DefaultConfig()
	if cfg.Binary != "pi" || cfg.InstallHint != "npm install -g @mariozechner/pi-coding-agent@0.73.1" ||
		!slices.Equal(cfg.EnvAllow, []string{"PI_CODING_AGENT_DIR", "FAKE_PI_API_KEY"}) {
		t.Errorf("DefaultConfig = %+v", cfg)
	}
}
