package claudecode_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// fake is one adapter whose binary is this test binary replaying a
// transcript, with a workspace root holding the run workspace "sub".
type fake struct {
	a      *cli.Adapter[claudecode.Request]
	root   string // the resolved workspace root
	record string // where the fake writes what it saw
}

func newFake(t *testing.T, transcript string) *fake {
	t.Helper()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := claudecode.DefaultConfig()
	cfg.WorkspaceRoot = root
	cfg.Grace = time.Second
	cfg, rec := conformance.Replaying(t, conformance.Testdata(t, "cli", claudecode.Name, transcript)).Play(t, cfg)
	a, err := claudecode.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	return &fake{a: a, root: realRoot, record: rec}
}

// validated encodes fields as msgpack and validates them through the
// adapter, as the router and runner do.
func validated(t *testing.T, a adapter.Adapter, fields map[string]any) any {
	t.Helper()
	b, err := wire.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	req, err := a.Validate(b)
	if err != nil {
		t.Fatalf("validate %v: %v", fields, err)
	}
	return req
}

// run streams one call and returns its chunks and terminal error.
func (f *fake) run(t *testing.T, fields map[string]any) ([]wire.Chunk, error) {
	t.Helper()
	call := adapter.Call{RunID: "run-1", Request: validated(t, f.a, fields), Runtime: map[string]any{"workspace": "sub"},
		Attempt: 1, Model: "claude-sonnet-4-5", MaxAttempts: 3}
	o := conformance.Collect(t, f.a, call)
	return o.Chunks, o.Err
}

func (f *fake) seen(t *testing.T) conformance.Record {
	t.Helper()
	r := conformance.ReadRecord(t, f.record)
	if r == nil {
		t.Fatal("the fake CLI left no record")
	}
	return *r
}

// TestAdapterTranscripts runs every transcript through the real subprocess
// path and checks that the chunks and the terminal error match the golden.
func TestAdapterTranscripts(t *testing.T) {
	for _, name := range transcripts(t) {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, name)
			got, err := f.run(t, map[string]any{"prompt": "What is the answer?"})
			conformance.MatchGolden(t, wantPath(t, name), got, err)
		})
	}
}

func ptr(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func jsonOf(t *testing.T, chunks []wire.Chunk) string {
	t.Helper()
	if chunks == nil {
		chunks = []wire.Chunk{}
	}
	b, err := json.Marshal(chunks)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAdapterArgv checks the exact command line, the working directory, the
// retry switch and the child environment.
func TestAdapterArgv(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("NATS_CREDS", "runner-secret")
	t.Setenv("OPENAI_API_KEY", "sk-other-profile")
	tricky := `-rf "quoted" 'single' $(rm -rf /) ; echo $HOME` + "\n second line"
	tests := []struct {
		name   string
		fields map[string]any
		want   []string
	}{
		{
			name:   "plain",
			fields: map[string]any{"prompt": "What is the answer?"},
			want: []string{"-p", "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-5",
				"--", "What is the answer?"},
		},
		{
			name:   "tricky prompt stays one element",
			fields: map[string]any{"prompt": tricky},
			want: []string{"-p", "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-5",
				"--", tricky},
		},
		{
			name: "every flag",
			fields: map[string]any{
				"prompt": "Run it", "model": "claude-sonnet-4-5", "system_prompt": "SYS", "append_system_prompt": "APPEND",
				"permission_mode": "acceptEdits", "allowed_tools": []any{"Bash", "Read(./src/**)"},
				"disallowed_tools": []any{"WebFetch"}, "include_partial_messages": true,
				"resume": "9fb97433-4d57-4a95-a009-78c8b500afd5",
			},
			want: []string{"-p", "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-5",
				"--system-prompt", "SYS", "--append-system-prompt", "APPEND", "--permission-mode", "acceptEdits",
				"--allowedTools", "Bash", "--allowedTools", "Read(./src/**)", "--disallowedTools", "WebFetch",
				"--include-partial-messages", "--resume", "9fb97433-4d57-4a95-a009-78c8b500afd5",
				"--", "Run it"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, "S1")
			if _, err := f.run(t, tt.fields); err != nil {
				t.Fatal(err)
			}
			r := f.seen(t)
			if !slices.Equal(r.Argv, tt.want) {
				t.Errorf("argv = %q\nwant   %q", r.Argv, tt.want)
			}
			if want := filepath.Join(f.root, "sub"); r.Cwd != want {
				t.Errorf("cwd = %q, want %q", r.Cwd, want)
			}
			if got := r.Env[claudecode.EnvMaxRetries]; got != "2" {
				t.Errorf("%s = %q, want 2 (MaxAttempts 3 - 1)", claudecode.EnvMaxRetries, got)
			}
			if r.Env["ANTHROPIC_API_KEY"] != "sk-ant-test-0000" || r.Env["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:1" {
				t.Errorf("allowed variables not passed: %v", r.Env)
			}
			allowed := []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM", "USER",
				"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR", claudecode.EnvMaxRetries,
				conformance.FakeEnv, "GORACE"}
			for k := range claudecode.DefaultConfig().EnvSet {
				allowed = append(allowed, k)
			}
			for k := range r.Env {
				if !slices.Contains(allowed, k) {
					t.Errorf("child received %s, which is not allowed", k)
				}
			}
		})
	}
}

// TestAdapterRetrySwitch maps the attempt policy onto CLAUDE_CODE_MAX_RETRIES.
func TestAdapterRetrySwitch(t *testing.T) {
	for _, tt := range []struct {
		maxAttempts int
		want        string
	}{{1, "0"}, {3, "2"}, {5, "4"}, {0, "2"}} {
		inv, err := claudecode.Invoke(claudecode.Request{Prompt: "hi"}, adapter.Call{MaxAttempts: tt.maxAttempts}, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := inv.Env[claudecode.EnvMaxRetries]; got != tt.want {
			t.Errorf("MaxAttempts %d: %s = %q, want %q", tt.maxAttempts, claudecode.EnvMaxRetries, got, tt.want)
		}
	}
}

// TestAdapterModel: an empty request model takes the pinned one; a
// different one is refused; no model at all leaves the CLI's default.
func TestAdapterModel(t *testing.T) {
	tests := []struct {
		name      string
		req, pin  string
		wantModel string
		wantErr   error
	}{
		{name: "pinned", pin: "claude-sonnet-4-5", wantModel: "claude-sonnet-4-5"},
		{name: "same", req: "claude-sonnet-4-5", pin: "claude-sonnet-4-5", wantModel: "claude-sonnet-4-5"},
		{name: "no pin", req: "claude-opus-4-1", wantModel: "claude-opus-4-1"},
		{name: "neither"},
		{name: "conflict", req: "claude-opus-4-1", pin: "claude-sonnet-4-5", wantErr: wire.AgenticRequestValidationError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := claudecode.Invoke(claudecode.Request{Prompt: "hi", Model: tt.req}, adapter.Call{Model: tt.pin}, "")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			got := ""
			if i := slices.Index(inv.Args, "--model"); i >= 0 {
				got = inv.Args[i+1]
			}
			if got != tt.wantModel {
				t.Errorf("--model %q, want %q (argv %q)", got, tt.wantModel, inv.Args)
			}
		})
	}
}

// TestAdapterResumeRoundTrip runs S1, takes the session id its stream
// confirmed, resumes it, and checks that the second invocation carries the
// id and its stream confirms the same session.
func TestAdapterResumeRoundTrip(t *testing.T) {
	first := newFake(t, "S1")
	chunks, err := first.run(t, map[string]any{"prompt": "What is the answer?"})
	if err != nil {
		t.Fatal(err)
	}
	id := conformance.ConfirmedSession(chunks)
	if id == "" {
		t.Fatalf("S1 published no session id: %s", jsonOf(t, chunks))
	}
	if slices.Contains(first.seen(t).Argv, "--resume") {
		t.Errorf("a fresh run passed --resume")
	}

	second := newFake(t, "S1-resume")
	field := claudecode.Capabilities.ResumeField
	chunks, err = second.run(t, map[string]any{"prompt": "What was the answer again?", field: id})
	if err != nil {
		t.Fatal(err)
	}
	argv := second.seen(t).Argv
	i := slices.Index(argv, "--resume")
	if i < 0 || i+1 >= len(argv) || argv[i+1] != id {
		t.Errorf("resume argv = %q, want --resume %s", argv, id)
	}
	if got := conformance.ConfirmedSession(chunks); got != id {
		t.Errorf("resumed stream confirmed session %q, want %q", got, id)
	}
	if last := chunks[len(chunks)-1]; last.Type != wire.ChunkResult || last.Metadata.SessionID != id {
		t.Errorf("last chunk = %+v, want the result carrying session %s", last, id)
	}
}

// TestAdapterExitWithoutInbandError: the CLI refusing to run as root exits
// 1 with only stderr; that is a typed process error with the return code
// and the stderr tail, and no chunk.
func TestAdapterExitWithoutInbandError(t *testing.T) {
	f := newFake(t, "S1-skip-permissions-as-root")
	chunks, err := f.run(t, map[string]any{"prompt": "What is the answer?"})
	if len(chunks) != 0 {
		t.Errorf("chunks = %s, want none", jsonOf(t, chunks))
	}
	var we *wire.Error
	if !errors.As(err, &we) || we.Class != wire.ProviderProcessError {
		t.Fatalf("err = %v, want ProviderProcessError", err)
	}
	if we.ReturnCode == nil || *we.ReturnCode != 1 {
		t.Errorf("returncode = %v, want 1", ptr(we.ReturnCode))
	}
	if !strings.Contains(we.StderrTail, "root/sudo privileges") {
		t.Errorf("stderr tail = %q", we.StderrTail)
	}
}

// TestAdapterInbandErrorExit: S3-noretry exits 1 after its error result;
// the stream is the system chunk and the one error chunk, and the exit
// adds no second error.
func TestAdapterInbandErrorExit(t *testing.T) {
	f := newFake(t, "S3-noretry")
	chunks, err := f.run(t, map[string]any{"prompt": "What is the answer?"})
	if err != nil {
		t.Errorf("err = %v, want none after the error chunk", err)
	}
	if len(chunks) != 2 || chunks[1].Type != wire.ChunkError || chunks[1].Metadata.ErrorClass != wire.ProviderAuthError {
		t.Errorf("chunks = %s, want system then one ProviderAuthError error chunk", jsonOf(t, chunks))
	}
}

// TestAdapterMissingBinary: ProviderExecutableNotFound with the install
// hint, before anything starts.
func TestAdapterMissingBinary(t *testing.T) {
	cfg := claudecode.DefaultConfig()
	cfg.Binary = "claude-not-installed-here"
	cfg.WorkspaceRoot = t.TempDir()
	a, err := claudecode.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	call := adapter.Call{Request: validated(t, a, map[string]any{"prompt": "hi"}), MaxAttempts: 3}
	for _, err := range a.Stream(context.Background(), call) {
		if !errors.Is(err, wire.ProviderExecutableNotFound) || !strings.Contains(err.Error(), claudecode.InstallHint) {
			t.Errorf("err = %v, want ProviderExecutableNotFound with %q", err, claudecode.InstallHint)
		}
	}
}

// TestAdapterDeclaration checks the name, capabilities, runtime keys and
// default configuration.
func TestAdapterDeclaration(t *testing.T) {
	a, err := claudecode.New(claudecode.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := adapter.CheckCapabilities(a.Name(), a.Capabilities()); err != nil {
		t.Fatal(err)
	}
	want := wire.Capabilities{Transport: wire.TransportSubprocess, Resumable: true, EmitsToolEvents: true,
		ReportsUsage: true, ResumeField: "resume"}
	if a.Name() != "claude-code" || a.Capabilities() != want {
		t.Errorf("name %q, capabilities %+v", a.Name(), a.Capabilities())
	}
	if !slices.Equal(a.RuntimeKeys(), []string{"workspace"}) {
		t.Errorf("runtime keys = %v", a.RuntimeKeys())
	}
	cfg := claudecode.DefaultConfig()
	if cfg.Binary != "claude" || cfg.InstallHint != "npm install -g @anthropic-ai/claude-code@2.1.197" {
		t.Errorf("binary %q, hint %q", cfg.Binary, cfg.InstallHint)
	}
	if !slices.Equal(cfg.EnvAllow, []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR"}) {
		t.Errorf("env allow = %v", cfg.EnvAllow)
	}
}
