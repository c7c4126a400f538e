package gemini

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/workspace"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

const pinned = "gemini-2.5-flash"

// harness runs the adapter through the real subprocess path with the test
// binary as the CLI.
type harness struct {
	t        *testing.T
	a        *cli.Adapter[Request]
	root     string // workspace root
	work     string // the run's workspace, root/sub, symlinks resolved
	settings string // the retry settings directory
	record   string // where the fake records what it saw
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, root: t.TempDir(), settings: filepath.Join(t.TempDir(), "settings")}
	if err := os.Mkdir(filepath.Join(h.root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	var err error
	if h.work, err = filepath.EvalSymlinks(filepath.Join(h.root, "sub")); err != nil {
		t.Fatal(err)
	}
	h.record = filepath.Join(t.TempDir(), "record.json")
	// Until a test picks a transcript, the fake fails fast (it can never
	// fall through to running the tests).
	h.replayFiles("/nonexistent/fake-gemini-stdout", "", 0)
	return h
}

// replayFiles makes the fake replay these files and exit with code exit.
func (h *harness) replayFiles(stdout, stderr string, exit int) {
	h.t.Helper()
	cfg := DefaultConfig()
	cfg.WorkspaceRoot, cfg.Grace = h.root, time.Second
	f := conformance.Fake{Stdout: stdout, Stderr: stderr, Exit: exit, Record: h.record, FileEnv: []string{EnvSystemSettingsPath}}
	cfg, _ = f.Play(h.t, cfg)
	a, err := cli.New(spec(testSettings(h.t, h.settings)), cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.a = a
	os.Remove(h.record)
}

// transcript makes the fake replay testdata/cli/gemini/<name>.
func (h *harness) transcript(name string) {
	h.t.Helper()
	f := conformance.Replaying(h.t, conformance.Testdata(h.t, "cli", Name, name))
	h.replayFiles(f.Stdout, f.Stderr, f.Exit)
}

// validate encodes fields as the msgpack request and validates it.
func (h *harness) validate(fields map[string]any) Request {
	h.t.Helper()
	b, err := wire.Marshal(fields)
	if err != nil {
		h.t.Fatal(err)
	}
	req, err := h.a.Validate(b)
	if err != nil {
		h.t.Fatalf("Validate(%v): %v", fields, err)
	}
	return req.(Request)
}

// run streams one attempt in workspace "sub" and collects it.
func (h *harness) run(req Request, call adapter.Call) ([]wire.Chunk, error) {
	h.t.Helper()
	call.Request = req
	if call.Runtime == nil {
		call.Runtime = map[string]any{cli.RuntimeWorkspace: "sub"}
	}
	o := conformance.Collect(h.t, h.a, call)
	return o.Chunks, o.Err
}

// seen is what the fake recorded; ok is false if it never ran.
func (h *harness) seen() (conformance.Record, bool) {
	h.t.Helper()
	if r := conformance.ReadRecord(h.t, h.record); r != nil {
		return *r, true
	}
	return conformance.Record{}, false
}

// settings is the retry settings file the fake found (its content).
func settings(r conformance.Record) string { return r.Files[EnvSystemSettingsPath] }

func transcriptArgv(t testing.TB, name string) []string {
	t.Helper()
	for _, c := range conformance.Cases(t, Name) {
		if c.Name == name && c.Captured {
			return c.Argv[1:] // argv[0] is the binary
		}
	}
	t.Fatalf("no capture %s", name)
	return nil
}

// TestTranscriptsEndToEnd runs each transcript through the real subprocess
// path: the argv the adapter builds is exactly the one the transcript was
// captured with, the child runs in the contained workspace with the mapped
// retry setting and only allow-listed environment, and the normalized
// chunks and terminal error match the golden file.
func TestTranscriptsEndToEnd(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "fake-gemini-key-0000")
	t.Setenv("AGENTMESH_NATS_TOKEN", "runner-secret-must-not-leak")
	tests := []struct {
		name    string
		request map[string]any
	}{
		{"S1", map[string]any{"prompt": "What is the answer?"}},
		{"S2", map[string]any{"prompt": "Run the shell command 'echo hello-from-tool' and tell me what it printed.", "approval_mode": "yolo"}},
		{"S2-default-approval", map[string]any{"prompt": "Run the shell command 'echo hello-from-tool' and tell me what it printed."}},
		{"S3", map[string]any{"prompt": "What is the answer?"}},
		{"S4-noretry", map[string]any{"prompt": "What is the answer?"}},
		{"S5", map[string]any{"prompt": "What is the answer?"}},
		{"S6", map[string]any{"prompt": "What is the answer?"}},
		{"bad-settings-json", map[string]any{"prompt": "What is the answer?"}},
		{"S1-resume", map[string]any{"prompt": "What was the answer again?", "resume": "f9f8d0ce-8f8e-497e-b1f8-e1b327e8af6e"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.transcript(tt.name)
			chunks, err := h.run(h.validate(tt.request), adapter.Call{RunID: "run-1", Attempt: 1, Model: pinned, MaxAttempts: 3})
			conformance.MatchGolden(t, conformance.Testdata(t, "normalize", Name, tt.name, "want.jsonl"), chunks, err)
			rec, ok := h.seen()
			if !ok {
				t.Fatal("the fake CLI never ran")
			}
			if want := transcriptArgv(t, tt.name); !reflect.DeepEqual(rec.Argv, want) {
				t.Errorf("argv:\ngot  %q\nwant %q", rec.Argv, want)
			}
			if rec.Cwd != h.work {
				t.Errorf("cwd = %q, want the contained workspace %q", rec.Cwd, h.work)
			}
			if want := "{\"general\":{\"maxAttempts\":3}}\n"; settings(rec) != want {
				t.Errorf("retry settings = %q, want %q", settings(rec), want)
			}
			if p := rec.Env[EnvSystemSettingsPath]; filepath.Dir(p) != h.settings {
				t.Errorf("%s = %q, want a file in %s", EnvSystemSettingsPath, p, h.settings)
			}
			if rec.Env["GEMINI_API_KEY"] != "fake-gemini-key-0000" || rec.Env["GEMINI_TELEMETRY_ENABLED"] != "false" {
				t.Errorf("child env lacks the allowed key or the telemetry switch: %v", rec.Env)
			}
			if _, leaked := rec.Env["AGENTMESH_NATS_TOKEN"]; leaked {
				t.Error("the runner's secret reached the child")
			}
			if err != nil {
				we := wire.AsError(err)
				if we.ReturnCode == nil || !strings.Contains(we.StderrTail, "settings.json") {
					t.Errorf("process error %v: want a returncode and the stderr tail, got %+v", err, we)
				}
			}
		})
	}
}

// TestExitWithoutInBandError: a non-zero exit with no error event is a
// typed terminal error after the chunks already yielded, classed by the
// CLI's HTTP-status exit code, with the returncode and the stderr tail.
func TestExitWithoutInBandError(t *testing.T) {
	h := newHarness(t)
	dir := conformance.Testdata(t, "normalize", Name, "exit-without-error")
	h.replayFiles(filepath.Join(dir, "stdout.jsonl"), filepath.Join(dir, "stderr.txt"), 173)
	chunks, err := h.run(Request{Prompt: "What is the answer?"}, adapter.Call{Model: pinned, MaxAttempts: 1})
	if len(chunks) != 1 || chunks[0].Type != wire.ChunkSystem {
		t.Errorf("chunks = %+v, want the system chunk only", chunks)
	}
	var we *wire.Error
	if !errors.As(err, &we) || we.Class != wire.ProviderQuotaError || we.ReturnCode == nil || *we.ReturnCode != 173 {
		t.Fatalf("err = %#v, want ProviderQuotaError with returncode 173", err)
	}
	if !strings.Contains(we.StderrTail, "Resource has been exhausted") {
		t.Errorf("stderr tail = %q", we.StderrTail)
	}
	if !errors.Is(err, wire.ProviderError) {
		t.Errorf("%v is not a ProviderError", err)
	}
	if rec, _ := h.seen(); settings(rec) != "{\"general\":{\"maxAttempts\":1}}\n" {
		t.Errorf("retry settings = %q, want maxAttempts 1", settings(rec))
	}
}

// TestResumeRoundTrip: the first run's stream confirms a session id on a
// system chunk; a second run with that id in the resume field passes it as
// --resume, and its stream confirms the same id.
func TestResumeRoundTrip(t *testing.T) {
	h := newHarness(t)
	h.transcript("S1")
	first, err := h.run(h.validate(map[string]any{"prompt": "What is the answer?"}), adapter.Call{Model: pinned, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	id := conformance.ConfirmedSession(first)
	if id == "" {
		t.Fatalf("the first run confirmed no session: %+v", first)
	}
	if rec, _ := h.seen(); contains(rec.Argv, "--resume") {
		t.Errorf("the first run resumed: %q", rec.Argv)
	}

	h.transcript("S1-resume")
	second, err := h.run(h.validate(map[string]any{"prompt": "What was the answer again?", ResumeField: id}), adapter.Call{Model: pinned, MaxAttempts: 3, SessionID: id})
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := h.seen()
	want := []string{"-p", "What was the answer again?", "--output-format", "stream-json", "-m", pinned, "--resume", id}
	if !reflect.DeepEqual(rec.Argv, want) {
		t.Errorf("resume argv:\ngot  %q\nwant %q", rec.Argv, want)
	}
	if got := conformance.ConfirmedSession(second); got != id {
		t.Errorf("the resumed run confirmed %q, want %q", got, id)
	}
	if r := second[len(second)-1]; r.Type != wire.ChunkResult || r.Metadata.SessionID != id {
		t.Errorf("last chunk %+v: want the result carrying session %s", r, id)
	}
}

func contains(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

// TestArgv checks the argv, environment and retry setting built for
// requests beyond the transcripts: hostile prompts stay one element, the
// model mapping, the attempt mapping, and the file-bearing fields.
func TestArgv(t *testing.T) {
	tests := []struct {
		name        string
		request     map[string]any
		model       string
		maxAttempts int
		setup       func(work string)
		want        []string // "$W" is the workspace
		wantEnv     map[string]string
		wantTries   int
	}{
		{
			name:    "prompt with quotes, spaces and substitutions",
			request: map[string]any{"prompt": `it's "quoted"; $(rm -rf /) && echo $HOME`},
			model:   pinned, maxAttempts: 3,
			want:      []string{"-p", `it's "quoted"; $(rm -rf /) && echo $HOME`, "--output-format", "stream-json", "-m", pinned},
			wantTries: 3,
		},
		{
			name:    "prompt that looks like a flag",
			request: map[string]any{"prompt": "--approval-mode=yolo and more"},
			model:   pinned, maxAttempts: 2,
			want:      []string{"--prompt=--approval-mode=yolo and more", "--output-format", "stream-json", "-m", pinned},
			wantTries: 2,
		},
		{
			name:    "API resource model name, no retries",
			request: map[string]any{"prompt": "hi"},
			model:   "models/gemini-2.5-pro", maxAttempts: 1,
			want:      []string{"-p", "hi", "--output-format", "stream-json", "-m", "gemini-2.5-pro"},
			wantTries: 1,
		},
		{
			name:    "request model wins, CLI alias passes through; attempts clamped",
			request: map[string]any{"prompt": "hi", "model": "flash", "approval_mode": "plan"},
			model:   pinned, maxAttempts: 25,
			want:      []string{"-p", "hi", "--output-format", "stream-json", "-m", "flash", "--approval-mode", "plan"},
			wantTries: 10,
		},
		{
			name:      "no model at all, unset policy",
			request:   map[string]any{"prompt": "hi", "approval_mode": "default"},
			want:      []string{"-p", "hi", "--output-format", "stream-json", "--approval-mode", "default"},
			wantTries: 3,
		},
		{
			name:    "include directories and system prompt file",
			request: map[string]any{"prompt": "hi", "include_directories": []any{"lib", "docs/api"}, "system_md": "prompts/system.md"},
			model:   pinned, maxAttempts: 3,
			setup: func(work string) {
				os.MkdirAll(filepath.Join(work, "prompts"), 0o755)
				os.WriteFile(filepath.Join(work, "prompts", "system.md"), []byte("You are terse."), 0o644)
			},
			want:      []string{"-p", "hi", "--output-format", "stream-json", "-m", pinned, "--include-directories", "$W/lib", "--include-directories", "$W/docs/api"},
			wantEnv:   map[string]string{EnvSystemMD: "$W/prompts/system.md"},
			wantTries: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.transcript("S1")
			if tt.setup != nil {
				tt.setup(h.work)
			}
			if _, err := h.run(h.validate(tt.request), adapter.Call{Model: tt.model, MaxAttempts: tt.maxAttempts}); err != nil {
				t.Fatal(err)
			}
			rec, _ := h.seen()
			want := make([]string, len(tt.want))
			for i, w := range tt.want {
				want[i] = strings.ReplaceAll(w, "$W", h.work)
			}
			if !reflect.DeepEqual(rec.Argv, want) {
				t.Errorf("argv:\ngot  %q\nwant %q", rec.Argv, want)
			}
			for k, v := range tt.wantEnv {
				if got, want := rec.Env[k], strings.ReplaceAll(v, "$W", h.work); got != want {
					t.Errorf("env %s = %q, want %q", k, got, want)
				}
			}
			if _, set := rec.Env[EnvSystemMD]; set && tt.wantEnv[EnvSystemMD] == "" {
				t.Errorf("%s set without system_md", EnvSystemMD)
			}
			if want := string(SettingsContent(tt.wantTries)); settings(rec) != want {
				t.Errorf("retry settings = %q, want %q", settings(rec), want)
			}
		})
	}
}

// TestContainment: file-bearing fields that leave the workspace are
// rejected before the CLI starts.
func TestContainment(t *testing.T) {
	tests := []struct {
		name    string
		request map[string]any
	}{
		{"include dir with ..", map[string]any{"prompt": "hi", "include_directories": []any{"../other"}}},
		{"absolute include dir", map[string]any{"prompt": "hi", "include_directories": []any{"/etc"}}},
		{"include dir through a symlink", map[string]any{"prompt": "hi", "include_directories": []any{"out/x"}}},
		{"system prompt outside", map[string]any{"prompt": "hi", "system_md": "../../secret.md"}},
		{"system prompt through a symlink", map[string]any{"prompt": "hi", "system_md": "out/passwd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.transcript("S1")
			if err := os.Symlink(t.TempDir(), filepath.Join(h.work, "out")); err != nil {
				t.Fatal(err)
			}
			chunks, err := h.run(h.validate(tt.request), adapter.Call{Model: pinned, MaxAttempts: 3})
			if len(chunks) != 0 || !errors.Is(err, wire.AgenticRequestValidationError) || !errors.Is(err, workspace.ErrEscape) {
				t.Errorf("got %d chunks, err %v: want an escape validation error and nothing else", len(chunks), err)
			}
			if _, ran := h.seen(); ran {
				t.Error("the CLI was started")
			}
		})
	}
}

// TestWorkspaceEscape: the runtime workspace itself is contained.
func TestWorkspaceEscape(t *testing.T) {
	h := newHarness(t)
	h.transcript("S1")
	_, err := h.run(Request{Prompt: "hi"}, adapter.Call{Model: pinned, Runtime: map[string]any{cli.RuntimeWorkspace: "../.."}})
	if !errors.Is(err, workspace.ErrEscape) {
		t.Errorf("err = %v, want ErrEscape", err)
	}
	if _, ran := h.seen(); ran {
		t.Error("the CLI was started")
	}
}

// TestMissingBinary: ProviderExecutableNotFound with the install hint,
// before anything starts.
func TestMissingBinary(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Binary = "gemini-not-installed-here"
	cfg.WorkspaceRoot = t.TempDir()
	a, err := cli.New(spec(testSettings(t, t.TempDir())), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range a.Stream(context.Background(), adapter.Call{Request: Request{Prompt: "hi"}, Model: pinned}) {
		if !errors.Is(err, wire.ProviderExecutableNotFound) || !strings.Contains(err.Error(), InstallHint) {
			t.Errorf("err = %v, want ProviderExecutableNotFound naming %q", err, InstallHint)
		}
	}
}

// TestDeclaration checks what the adapter declares to the mesh.
func TestDeclaration(t *testing.T) {
	a, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() != "gemini" {
		t.Errorf("Name = %q", a.Name())
	}
	want := wire.Capabilities{Transport: wire.TransportSubprocess, Resumable: true, EmitsToolEvents: true, ReportsUsage: true, ResumeField: "resume"}
	if a.Capabilities() != want {
		t.Errorf("Capabilities = %+v, want %+v", a.Capabilities(), want)
	}
	if got := a.RuntimeKeys(); !reflect.DeepEqual(got, []string{"workspace"}) {
		t.Errorf("RuntimeKeys = %q", got)
	}
	cfg := DefaultConfig()
	if cfg.Binary != "gemini" || cfg.InstallHint != "npm install -g @google/gemini-cli@0.61.0" {
		t.Errorf("DefaultConfig binary/hint = %q, %q", cfg.Binary, cfg.InstallHint)
	}
	if want := []string{"GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_CLI_HOME"}; !reflect.DeepEqual(cfg.EnvAllow, want) || !reflect.DeepEqual(cfg.StateVars, []string{"GEMINI_CLI_HOME"}) {
		t.Errorf("EnvAllow = %q, want %q; StateVars %q", cfg.EnvAllow, want, cfg.StateVars)
	}
}

// TestSettingsSkipped: when the CLI says on stderr that it skipped the
// retry settings file, the run ends with a ProviderTransportError naming
// the file and the CLI's reason, whatever its stdout said, and the CLI is
// torn down.
func TestSettingsSkipped(t *testing.T) {
	h := newHarness(t)
	stderr := filepath.Join(t.TempDir(), "stderr.txt")
	warning := "Security Warning: Skipping system settings file '/x/settings.json': Parent directory '/tmp' is insecure: Directory '/tmp' is writable by group or others (mode: 41777)."
	if err := os.WriteFile(stderr, []byte("Warning: 256-color support not detected.\n"+warning+"\nRipgrep is not available.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.replayFiles(conformance.Testdata(t, "cli", Name, "S1.stdout.ndjson"), stderr, 0)
	_, err := h.run(Request{Prompt: "What is the answer?"}, adapter.Call{Model: pinned, MaxAttempts: 2})
	var we *wire.Error
	if !errors.As(err, &we) || we.Class != wire.ProviderTransportError {
		t.Fatalf("err = %v, want a ProviderTransportError", err)
	}
	rec, ran := h.seen()
	if !ran {
		t.Fatal("the fake CLI never ran")
	}
	for _, want := range []string{rec.Env[EnvSystemSettingsPath], "general.maxAttempts 2", "Parent directory '/tmp' is insecure"} {
		if !strings.Contains(we.Message, want) {
			t.Errorf("message %q lacks %q", we.Message, want)
		}
	}
	// Other stderr lines are no refusal.
	h.transcript("S1")
	if _, err := h.run(Request{Prompt: "What is the answer?"}, adapter.Call{Model: pinned, MaxAttempts: 2}); err != nil {
		t.Errorf("S1 with its own stderr: %v", err)
	}
}

// TestNoAcceptableSettingsDir: when no candidate directory passes the
// CLI's check, the run fails with a ProviderTransportError naming each
// candidate and why, and the CLI is never started.
func TestNoAcceptableSettingsDir(t *testing.T) {
	h := newHarness(t)
	h.transcript("S1")
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.WorkspaceRoot = h.root
	cfg, _ = conformance.Fake{Record: h.record}.Play(t, cfg)
	a, err := cli.New(spec(testSettings(t, filepath.Join(open, "a"), filepath.Join(open, "b"))), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.a = a
	_, err = h.run(Request{Prompt: "hi"}, adapter.Call{Model: pinned, MaxAttempts: 3})
	var we *wire.Error
	if !errors.As(err, &we) || we.Class != wire.ProviderTransportError || we.Retryable {
		t.Fatalf("err = %#v, want a non-retryable ProviderTransportError", err)
	}
	for _, want := range []string{filepath.Join(open, "a") + ":", filepath.Join(open, "b") + ":", "general.maxAttempts 3", SharedSettingsDir} {
		if !strings.Contains(we.Message, want) {
			t.Errorf("message %q lacks %q", we.Message, want)
		}
	}
	if _, ran := h.seen(); ran {
		t.Error("the CLI was started without its retry settings")
	}
}
