package codex

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// fakeConfigTOML is an operator config.toml like the transcripts' one.
const fakeConfigTOML = `model = "gpt-5.5"
model_provider = "fake"
check_for_update_on_startup = false
[model_providers.fake]
name = "fake"
base_url = "http://127.0.0.1:18702/v1"
env_key = "FAKE_OPENAI_API_KEY"
wire_api = "responses"
[features]
plugins = false
`

// env is one fake run: the test binary as codex, replaying a transcript.
type env struct {
	t      *testing.T
	root   string // workspace root
	dir    string // the run's workspace, root/sub, symlinks resolved
	home   string // CODEX_HOME
	record string
}

func newEnv(t *testing.T, configTOML string) *env {
	t.Helper()
	e := &env{t: t, root: t.TempDir(), home: t.TempDir()}
	if err := os.Mkdir(filepath.Join(e.root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(e.root, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	e.dir = dir
	if configTOML != "" {
		if err := os.WriteFile(filepath.Join(e.home, "config.toml"), []byte(configTOML), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// adapter returns a Codex adapter whose binary is this test binary,
// replaying the named capture (testdata/cli/codex/<name>.*) or, for an
// x- case, testdata/normalize/codex/<name>/, and exiting with exit.
func (e *env) adapter(name string, exit int) *cli.Adapter[Request] {
	e.t.Helper()
	var f conformance.Fake
	if dir := conformance.Testdata(e.t, "normalize", Name, name); strings.HasPrefix(name, "x-") {
		f.Stdout = filepath.Join(dir, "stdout.jsonl")
		if _, err := os.Stat(filepath.Join(dir, "stderr.txt")); err == nil {
			f.Stderr = filepath.Join(dir, "stderr.txt")
		}
	} else {
		f = conformance.Replaying(e.t, conformance.Testdata(e.t, "cli", Name, name))
	}
	f.Exit = exit
	cfg := DefaultConfig()
	cfg.WorkspaceRoot = e.root
	cfg.Grace = 500 * time.Millisecond
	cfg.EnvSet = map[string]string{EnvCodexHome: e.home}
	cfg, e.record = f.Play(e.t, cfg)
	a, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// run validates req through the adapter and streams one attempt in the
// workspace "sub".
func (e *env) run(a *cli.Adapter[Request], req map[string]any, call adapter.Call) ([]wire.Chunk, error) {
	e.t.Helper()
	b, err := wire.Marshal(req)
	if err != nil {
		e.t.Fatal(err)
	}
	v, err := a.Validate(b)
	if err != nil {
		e.t.Fatalf("Validate: %v", err)
	}
	call.Request = v
	if call.Runtime == nil {
		call.Runtime = map[string]any{cli.RuntimeWorkspace: "sub"}
	}
	o := conformance.Collect(e.t, a, call)
	return o.Chunks, o.Err
}

// seen returns what the fake CLI recorded; ok is false if it never ran.
func (e *env) seen() (conformance.Record, bool) {
	e.t.Helper()
	if r := conformance.ReadRecord(e.t, e.record); r != nil {
		return *r, true
	}
	return conformance.Record{}, false
}

// TestAdapterTranscripts runs transcripts through the real subprocess path
// and compares the chunks with the goldens; an in-band error ends the
// stream with its one error chunk even though the CLI exits 1.
func TestAdapterTranscripts(t *testing.T) {
	tests := []struct {
		name string
		exit int
	}{
		{"S1", 0}, {"S2", 0}, {"S3", 1}, {"S3-noretry", 1}, {"S4", 1}, {"S5-noretry", 1}, {"S6", 0},
		{"S1-unknown-model", 0}, {"x-exit-without-error", 1}, {"x-error-without-turn-failed", 0}, {"x-unknown-event", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if want := conformance.Replaying(t, conformance.Testdata(t, "cli", Name, tt.name)).Exit; !strings.HasPrefix(tt.name, "x-") && want != tt.exit {
				t.Fatalf("test table says exit %d, transcript %d", tt.exit, want)
			}
			e := newEnv(t, fakeConfigTOML)
			model := "gpt-5.5"
			if tt.name == "S1-unknown-model" {
				model = "gpt-5-codex"
			}
			chunks, err := e.run(e.adapter(tt.name, tt.exit), map[string]any{"prompt": "What is the answer?"},
				adapter.Call{RunID: "r1", Model: model, MaxAttempts: 3})
			conformance.MatchGolden(t, conformance.Testdata(t, "normalize", Name, tt.name, "want.jsonl"), chunks, err)
			for _, p := range conformance.Check(Capabilities, chunks, err, conformance.Ran) {
				t.Errorf("stream rule: %s", p)
			}
			if tt.name == "x-exit-without-error" {
				var we *wire.Error
				if !errors.As(err, &we) || we.ReturnCode == nil || *we.ReturnCode != 1 || !strings.Contains(we.StderrTail, "401 Unauthorized") {
					t.Errorf("err = %#v, want a ProviderAuthError with returncode 1 and the stderr tail", err)
				}
			}
		})
	}
}

// TestAdapterArgv checks the exact command line, the working directory,
// stdin and the child's environment of a new thread.
func TestAdapterArgv(t *testing.T) {
	t.Setenv("AGENTMESH_NATS_CREDS", "secret-creds")
	t.Setenv(EnvAPIKey, "sk-test-allowed-0000")
	const prompt = `--help "quoted" 'single' $(rm -rf /) ; resume`
	e := newEnv(t, fakeConfigTOML)
	if err := os.WriteFile(filepath.Join(e.dir, "base.md"), []byte("base"), 0o644); err != nil {
		t.Fatal(err)
	}
	chunks, err := e.run(e.adapter("S1", 0), map[string]any{
		"prompt": prompt, "model": "gpt-5.5-mini", "sandbox": "read-only",
		"developer_instructions": "say \"hi\"\nthen stop", "model_instructions_file": "base.md",
	}, adapter.Call{RunID: "r1", Model: "gpt-5.5", MaxAttempts: 3})
	if err != nil || len(chunks) != 3 {
		t.Fatalf("chunks %v, err %v", chunks, err)
	}
	rec, ok := e.seen()
	if !ok {
		t.Fatal("the CLI did not run")
	}
	want := []string{"exec", "--json", "--skip-git-repo-check", "-C", e.dir, "-s", "read-only", "-m", "gpt-5.5-mini",
		"-c", `developer_instructions="say \"hi\"\nthen stop"`,
		"-c", `model_instructions_file="` + filepath.Join(e.dir, "base.md") + `"`,
		"-c", "model_providers.fake.request_max_retries=0", "-c", "model_providers.fake.stream_max_retries=2",
		"--", prompt}
	if !slices.Equal(rec.Argv, want) {
		t.Errorf("argv\n got %q\nwant %q", rec.Argv, want)
	}
	if rec.Cwd != e.dir {
		t.Errorf("cwd = %q, want %q", rec.Cwd, e.dir)
	}
	if !rec.StdinDevNull {
		t.Error("stdin is not /dev/null")
	}
	envHas := func(kv string) bool {
		k, v, _ := strings.Cut(kv, "=")
		val, ok := rec.Env[k]
		return ok && val == v
	}
	if !envHas(EnvAPIKey+"=sk-test-allowed-0000") || !envHas(EnvCodexHome+"="+e.home) {
		t.Errorf("env %q lacks the allowed key or CODEX_HOME", rec.Env)
	}
	for _, kv := range rec.Env {
		if strings.HasPrefix(kv, "AGENTMESH_NATS_CREDS=") {
			t.Errorf("env leaks %q", kv)
		}
	}
}

// TestAdapterRetrySwitch maps the attempt policy onto the provider's retry
// settings, and passes none when config.toml does not define the provider.
func TestAdapterRetrySwitch(t *testing.T) {
	retryArgs := func(n string) []string {
		return []string{"-c", "model_providers.fake.request_max_retries=0", "-c", "model_providers.fake.stream_max_retries=" + n}
	}
	tests := []struct {
		name        string
		config      string
		maxAttempts int
		want        []string // the -c flags after -m
	}{
		{"one attempt", fakeConfigTOML, 1, retryArgs("0")},
		{"three attempts", fakeConfigTOML, 3, retryArgs("2")},
		{"five attempts", fakeConfigTOML, 5, retryArgs("4")},
		{"unset policy is the default", fakeConfigTOML, 0, retryArgs("2")},
		{"no config.toml", "", 3, nil},
		{"built-in provider", "model_provider = \"openai\"\n", 3, nil},
		{"undefined provider", "model_provider = \"elsewhere\"\n[model_providers.fake]\nname = \"fake\"\n", 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.config)
			if _, err := e.run(e.adapter("S1", 0), map[string]any{"prompt": "p"}, adapter.Call{Model: "gpt-5.5", MaxAttempts: tt.maxAttempts}); err != nil {
				t.Fatal(err)
			}
			rec, _ := e.seen()
			want := append([]string{"exec", "--json", "--skip-git-repo-check", "-C", e.dir, "-s", "workspace-write", "-m", "gpt-5.5"}, tt.want...)
			want = append(want, "--", "p")
			if !slices.Equal(rec.Argv, want) {
				t.Errorf("argv\n got %q\nwant %q", rec.Argv, want)
			}
		})
	}
}

// TestAdapterResumeRoundTrip replays S1, takes the confirmed thread id
// from its system chunk as the router would, and resumes it: the second
// argv carries the id, the second stream confirms it, and the usage is
// the run's own (the cumulative total less the rollout's).
func TestAdapterResumeRoundTrip(t *testing.T) {
	e := newEnv(t, fakeConfigTOML)
	first, err := e.run(e.adapter("S1", 0), map[string]any{"prompt": "What is the answer?"}, adapter.Call{RunID: "r1", Model: "gpt-5.5", MaxAttempts: 3})
	if err != nil || len(first) == 0 || first[0].Type != wire.ChunkSystem {
		t.Fatalf("first run: %v, %v", first, err)
	}
	id := first[0].Metadata.SessionID
	if id == "" {
		t.Fatal("first run published no session id")
	}
	// The rollout Codex wrote for the thread (what the resume needs).
	src := conformance.Testdata(t, "normalize", Name, "S1-resume", "codex_home", "sessions")
	copyTree(t, src, filepath.Join(e.home, "sessions"))

	second, err := e.run(e.adapter("S1-resume", 0), map[string]any{"prompt": "What was the answer again?", ResumeField: id},
		adapter.Call{RunID: "r2", Model: "gpt-5.5", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := e.seen()
	want := []string{"exec", "resume", "--json", "--skip-git-repo-check", "-m", "gpt-5.5",
		"-c", `sandbox_mode="workspace-write"`,
		"-c", "model_providers.fake.request_max_retries=0", "-c", "model_providers.fake.stream_max_retries=2",
		id, "--", "What was the answer again?"}
	if !slices.Equal(rec.Argv, want) {
		t.Errorf("resume argv\n got %q\nwant %q", rec.Argv, want)
	}
	if rec.Cwd != e.dir {
		t.Errorf("resume cwd = %q, want the workspace %q", rec.Cwd, e.dir)
	}
	if len(second) == 0 || second[0].Type != wire.ChunkSystem || second[0].Metadata.SessionID != id {
		t.Fatalf("second run does not confirm %s: %v", id, second)
	}
	last := second[len(second)-1]
	wantUsage := wire.Usage{InputTokens: 30290 - 20014, OutputTokens: 60 - 40}
	if last.Type != wire.ChunkResult || last.Metadata.Usage == nil || *last.Metadata.Usage != wantUsage {
		t.Errorf("result %+v, want usage %+v", last, wantUsage)
	}

	// Without the rollout the run's own usage is unknown: none, not the total.
	e2 := newEnv(t, fakeConfigTOML)
	third, err := e2.run(e2.adapter("S1-resume", 0), map[string]any{"prompt": "again", ResumeField: id}, adapter.Call{Model: "gpt-5.5"})
	if err != nil {
		t.Fatal(err)
	}
	if last := third[len(third)-1]; last.Type != wire.ChunkResult || last.Metadata.Usage != nil {
		t.Errorf("result without a baseline = %+v, want no usage", last)
	}
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAdapterRefusesBeforeStart: a missing binary and escaping paths fail
// with their typed errors and the CLI never starts.
func TestAdapterRefusesBeforeStart(t *testing.T) {
	outside := t.TempDir()
	tests := []struct {
		name    string
		req     map[string]any
		runtime map[string]any
		binary  string
		setup   func(e *env)
		wantErr error
	}{
		{name: "missing binary", req: map[string]any{"prompt": "p"}, binary: "codex-not-installed-here", wantErr: wire.ProviderExecutableNotFound},
		{name: "workspace traversal", req: map[string]any{"prompt": "p"}, runtime: map[string]any{"workspace": "../x"}, wantErr: wire.AgenticRequestValidationError},
		{name: "absolute workspace", req: map[string]any{"prompt": "p"}, runtime: map[string]any{"workspace": outside}, wantErr: wire.AgenticRequestValidationError},
		{name: "instructions file through a symlink", req: map[string]any{"prompt": "p", "model_instructions_file": "link/x.md"},
			setup: func(e *env) {
				if err := os.Symlink(outside, filepath.Join(e.dir, "link")); err != nil {
					t.Fatal(err)
				}
			}, wantErr: wire.AgenticRequestValidationError},
		{name: "bad pinned model", req: map[string]any{"prompt": "p"}, wantErr: wire.AgenticRequestValidationError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, fakeConfigTOML)
			if tt.setup != nil {
				tt.setup(e)
			}
			a := e.adapter("S1", 0)
			if tt.binary != "" {
				cfg := DefaultConfig()
				cfg.Binary, cfg.WorkspaceRoot = tt.binary, e.root
				var err error
				if a, err = New(cfg); err != nil {
					t.Fatal(err)
				}
			}
			call := adapter.Call{Model: "gpt-5.5", Runtime: tt.runtime}
			if tt.name == "bad pinned model" {
				call.Model = "--oss"
			}
			chunks, err := e.run(a, tt.req, call)
			if !errors.Is(err, tt.wantErr) || len(chunks) != 0 {
				t.Fatalf("chunks %v, err %v; want only %v", chunks, err, tt.wantErr)
			}
			if tt.binary != "" && !strings.Contains(err.Error(), InstallHint) {
				t.Errorf("err %q lacks the install hint", err)
			}
			if _, ran := e.seen(); ran {
				t.Error("the CLI was started")
			}
		})
	}
}
