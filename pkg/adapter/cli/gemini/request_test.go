package gemini

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestDecode(t *testing.T) {
	const id = "f9f8d0ce-8f8e-497e-b1f8-e1b327e8af6e"
	tests := []conformance.DecodeCase[Request]{
		{Name: "prompt only", In: map[string]any{"prompt": "hi"}, Want: Request{Prompt: "hi"}},
		{
			Name: "every field",
			In: map[string]any{"prompt": "hi", "model": "gemini-2.5-pro", "approval_mode": "yolo", "resume": id,
				"include_directories": []any{"lib"}, "system_md": "sys.md"},
			Want: Request{Prompt: "hi", Model: "gemini-2.5-pro", ApprovalMode: ApprovalYolo, Resume: id,
				IncludeDirectories: []string{"lib"}, SystemMD: "sys.md"},
		},
		{Name: "nil optional fields", In: map[string]any{"prompt": "hi", "model": nil, "resume": nil, "include_directories": nil}, Want: Request{Prompt: "hi"}},
		{Name: "unknown field", In: map[string]any{"prompt": "hi", "max_turns": 3}, WantErr: []string{`unknown field "max_turns"`}},
		{Name: "missing prompt", In: map[string]any{"model": "flash"}, WantErr: []string{`"prompt": required`}},
		{Name: "empty prompt", In: map[string]any{"prompt": ""}, WantErr: []string{`"prompt": required`}},
		{Name: "prompt with NUL", In: map[string]any{"prompt": "a\x00b"}, WantErr: []string{`"prompt": contains a NUL byte`}},
		{Name: "prompt not a string", In: map[string]any{"prompt": 42}, WantErr: []string{`"prompt": want a string, got an integer`}},
		{Name: "bad approval mode", In: map[string]any{"prompt": "hi", "approval_mode": "always"}, WantErr: []string{`"approval_mode": "always" is not one of`}},
		{Name: "approval mode not a string", In: map[string]any{"prompt": "hi", "approval_mode": true}, WantErr: []string{`"approval_mode": want a string, got a boolean`}},
		{Name: "resume not a UUID", In: map[string]any{"prompt": "hi", "resume": "latest"}, WantErr: []string{`"resume": "latest" is not a session id`}},
		{Name: "resume that is a flag", In: map[string]any{"prompt": "hi", "resume": "--yolo"}, WantErr: []string{`"resume"`}},
		{Name: "model that is a flag", In: map[string]any{"prompt": "hi", "model": "--yolo"}, WantErr: []string{`"model": "--yolo" is not a model name`}},
		{Name: "model with a space", In: map[string]any{"prompt": "hi", "model": "gemini 2"}, WantErr: []string{`"model"`}},
		{Name: "include dirs not a list", In: map[string]any{"prompt": "hi", "include_directories": "lib"}, WantErr: []string{`"include_directories": want an array of strings, got a string`}},
		{Name: "include dir not a string", In: map[string]any{"prompt": "hi", "include_directories": []any{"lib", 3}}, WantErr: []string{`"include_directories"[1]: want a string`}},
		{Name: "include dir with a comma", In: map[string]any{"prompt": "hi", "include_directories": []any{"a/..,/etc"}}, WantErr: []string{`"include_directories"[0]: a comma`}},
		{Name: "include dir that is a flag", In: map[string]any{"prompt": "hi", "include_directories": []any{"-x"}}, WantErr: []string{`"include_directories"[0]: must not start with "-"`}},
		{Name: "empty system_md", In: map[string]any{"prompt": "hi", "system_md": ""}, WantErr: []string{`"system_md": must not be empty`}},
		{Name: "system_md not a string", In: map[string]any{"prompt": "hi", "system_md": []any{"x"}}, WantErr: []string{`"system_md": want a string, got an array`}},
		{
			Name:    "every problem named at once",
			In:      map[string]any{"prompt": 1, "approval_mode": "nope", "extra": "x", "resume": "1"},
			WantErr: []string{`"prompt": want a string`, `"approval_mode": "nope"`, `unknown field "extra"`, `"resume": "1"`},
		},
		{Name: "not a map", In: []any{"prompt"}, WantErr: []string{"not a map"}},
	}
	conformance.Decoding(t, Decode, tests)
}

func TestDecodeGarbage(t *testing.T) {
	conformance.DecodeRefuses(t, Decode, [][]byte{nil, {0xc1}, []byte("not msgpack")})
}

func TestCLIModel(t *testing.T) {
	tests := []struct {
		name           string
		requested, pin string
		want           string
		wantErr        wire.Class
	}{
		{name: "pinned", pin: "gemini-2.5-flash", want: "gemini-2.5-flash"},
		{name: "request wins", requested: "gemini-2.5-pro", pin: "gemini-2.5-flash", want: "gemini-2.5-pro"},
		{name: "API resource name", pin: "models/gemini-2.5-flash", want: "gemini-2.5-flash"},
		{name: "provider prefix", pin: "gemini/gemini-2.5-flash", want: "gemini-2.5-flash"},
		{name: "google prefix", requested: "google/gemini-2.5-pro", want: "gemini-2.5-pro"},
		{name: "CLI alias", requested: "flash-lite", pin: "gemini-2.5-flash", want: "flash-lite"},
		{name: "auto", pin: "auto", want: "auto"},
		{name: "none", want: ""},
		{name: "pinned flag", pin: "--yolo", wantErr: wire.ProfileError},
		{name: "requested prefix only", requested: "models/", pin: "gemini-2.5-flash", wantErr: wire.AgenticRequestValidationError},
		{name: "pinned with space", pin: "gemini 2.5", wantErr: wire.ProfileError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CLIModel(tt.requested, tt.pin)
			if tt.wantErr != "" {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("err = %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("CLIModel(%q, %q) = %q, %v; want %q", tt.requested, tt.pin, got, err, tt.want)
			}
		})
	}
}

func TestCLIAttempts(t *testing.T) {
	for _, tt := range []struct{ in, want int }{{1, 1}, {2, 2}, {3, 3}, {10, 10}, {11, 10}, {0, wire.DefaultMaxAttempts}, {-4, wire.DefaultMaxAttempts}} {
		if got := CLIAttempts(tt.in); got != tt.want {
			t.Errorf("CLIAttempts(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// testSettings keeps the settings files in dirs, under the CLI's rule
// with two test-only changes: this process's user is the accepted owner
// instead of root, and the directories above the test's temp root (the
// system temp dir, world-writable on most machines) count as accepted.
// Everything from the test's own temp directories down is checked as the
// CLI checks it.
func testSettings(t testing.TB, dirs ...string) settingsFiles {
	return settingsFiles{dirs: func() []string { return dirs }, rule: testRule(t)}
}

func testRule(t testing.TB) rule {
	return rule{owner: uint32(os.Geteuid()), above: filepath.Dir(t.TempDir())}
}

// TestSettingsFiles: one immutable file per value, recreated after a
// cleaner removed it or someone changed it, and never in a directory
// the CLI's check refuses.
func TestSettingsFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	sf := testSettings(t, dir)
	p, err := sf.path(2)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(p) != SettingsFileName(2) {
		t.Errorf("file %s, want %s", p, SettingsFileName(2))
	}
	check := func() {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil || string(b) != "{\"general\":{\"maxAttempts\":2}}\n" {
			t.Fatalf("settings file = %q, %v", b, err)
		}
		if err := sf.rule.refusal(p); err != nil {
			t.Fatalf("the rule refuses the file it was given: %v", err)
		}
	}
	check()
	if p2, _ := sf.path(2); p2 != p {
		t.Errorf("second path %q, want the same file %q", p2, p)
	}
	if p3, _ := sf.path(3); p3 == p {
		t.Error("two values share one file")
	}
	os.Remove(p)
	if _, err := sf.path(2); err != nil {
		t.Fatal(err)
	}
	check()
	os.Chmod(p, 0o600)
	os.WriteFile(p, []byte(`{"general":{"maxAttempts":10}}`), 0o600)
	if _, err := sf.path(2); err != nil {
		t.Fatal(err)
	}
	check()
	os.Chmod(p, 0o622) // right content, but others may write it
	if _, err := sf.path(2); err != nil {
		t.Fatal(err)
	}
	check()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("%d files in the settings directory, want 2 (no leftovers)", len(entries))
	}

	// A directory the CLI refuses is skipped, and nothing is created
	// below it; the next candidate is used.
	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777|fs.ModeSticky) // sticky, as /tmp: the CLI refuses it all the same
	below := filepath.Join(open, "agentmesh", "gemini")
	_, err = testSettings(t, below).path(1)
	if err == nil || !strings.Contains(err.Error(), open+": writable by group or others (mode 01777)") {
		t.Errorf("err = %v, want the sticky world-writable %s named", err, open)
	}
	if _, serr := os.Stat(filepath.Join(open, "agentmesh")); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("a directory was created below the refused %s (%v)", open, serr)
	}
	fallback := filepath.Join(t.TempDir(), "fallback")
	p, err = testSettings(t, below, fallback).path(1)
	if err != nil || filepath.Dir(p) != fallback {
		t.Errorf("path = %q, %v; want a file in the fallback %s", p, err, fallback)
	}

	// A runner that is not the owner the CLI accepts cannot create an
	// acceptable directory: refused before anything is created.
	base := t.TempDir()
	notOwner := rule{owner: uint32(os.Geteuid()) + 1, above: base}
	missing := filepath.Join(base, "missing")
	_, err = settingsFiles{dirs: func() []string { return []string{missing} }, rule: notOwner}.path(1)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("err = %v, want a refusal of the missing directory", err)
	}
	if _, serr := os.Stat(missing); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("%s was created (%v)", missing, serr)
	}
}

// TestRule: the CLI's check, file by file, as Gemini CLI 0.61.0 applies
// it (see cliRule).
func TestRule(t *testing.T) {
	mk := func(t *testing.T, dirMode, fileMode fs.FileMode) (dir, file string) {
		t.Helper()
		dir = filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		file = filepath.Join(dir, "settings.json")
		if err := os.WriteFile(file, []byte("{}"), 0o400); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, dirMode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(file, fileMode); err != nil {
			t.Fatal(err)
		}
		return dir, file
	}
	tests := []struct {
		name              string
		dirMode, fileMode fs.FileMode
		want              string // "" accepted, else a part of the refusal
	}{
		{"private", 0o700, 0o400, ""},
		{"readable by all", 0o755, 0o644, ""},
		{"group-writable directory", 0o770, 0o400, "parent directory"},
		{"sticky world-writable directory", 0o777 | fs.ModeSticky, 0o400, "mode 01777"},
		{"world-writable file", 0o700, 0o602, "writable by group or others (mode 0602)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, file := mk(t, tt.dirMode, tt.fileMode)
			err := testRule(t).refusal(file)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("refusal = %v, want %q", err, tt.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		if err := testRule(t).refusal(filepath.Join(t.TempDir(), "none.json")); err != nil {
			t.Errorf("refusal = %v; the CLI has nothing to refuse", err)
		}
	})
	t.Run("other owner", func(t *testing.T) {
		_, file := mk(t, 0o700, 0o400)
		other := testRule(t)
		other.owner++
		if err := other.refusal(file); err == nil || !strings.Contains(err.Error(), "owned by uid") {
			t.Errorf("refusal = %v, want the owner named", err)
		}
	})
	t.Run("not a file", func(t *testing.T) {
		dir, _ := mk(t, 0o700, 0o400)
		if err := testRule(t).refusal(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("refusal = %v", err)
		}
	})
	t.Run("symlink into a refused directory", func(t *testing.T) {
		_, target := mk(t, 0o777, 0o400)
		dir, _ := mk(t, 0o700, 0o400)
		link := filepath.Join(dir, "link.json")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		if err := testRule(t).refusal(link); err == nil || !strings.Contains(err.Error(), "resolved to") {
			t.Errorf("refusal = %v, want the resolved path refused", err)
		}
	})
	// The real rule on the system temp directory, which the CLI refuses
	// when it is world-writable (sticky or not), as on most machines.
	t.Run("system temp dir", func(t *testing.T) {
		fi, err := os.Stat(os.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o002 == 0 {
			t.Skipf("%s is not world-writable here (mode %v)", os.TempDir(), fi.Mode())
		}
		_, file := mk(t, 0o700, 0o400)
		err = cliRule.refusal(file)
		if err == nil {
			t.Fatalf("the CLI's rule accepts %s", file)
		}
		// As root the temp dir is what fails; as anyone else, already the
		// owner of the test's own directory.
		if os.Geteuid() == 0 && !strings.Contains(err.Error(), "parent directory "+filepath.Clean(os.TempDir())+": writable by group or others") {
			t.Errorf("refusal = %v, want the temp dir named", err)
		}
	})
}

func TestClassify(t *testing.T) {
	tests := []struct {
		code   int
		stderr string
		want   wire.Class
	}{
		{145, "", wire.ProviderAuthError},
		{147, "", wire.ProviderAuthError},
		{41, "", wire.ProviderAuthError},
		{173, "", wire.ProviderQuotaError},
		{244, "Attempt 1 failed with status 500", wire.ProviderProcessError},
		{1, `_ApiError: {"error":{"code":401,"message":"API key not valid."}}`, wire.ProviderAuthError},
		{1, "RetryableQuotaError: Resource has been exhausted (e.g. check quota).", wire.ProviderQuotaError},
		{144, "The input token count (2000000) exceeds the maximum number of tokens allowed", wire.ProviderContextError},
		{52, "Error in settings.json: Expected double-quoted property name", wire.ProviderProcessError},
		// Stack-trace line numbers are not statuses.
		{1, "at file:///x/chunk.js:401429:24", wire.ProviderProcessError},
	}
	for _, tt := range tests {
		if got := Classify(tt.code, tt.stderr); got != tt.want {
			t.Errorf("Classify(%d, %q) = %s, want %s", tt.code, tt.stderr, got, tt.want)
		}
	}
}
