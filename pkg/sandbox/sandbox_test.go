package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestParseEgress(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string // "" for ok, else a part of the error
	}{
		{[]string{"api.anthropic.com:443", "127.0.0.1:8080"}, ""},
		{[]string{"API.Example.COM.:443"}, ""},
		{[]string{"api.anthropic.com"}, "want host:port"},
		{[]string{"api.anthropic.com:0"}, "port must be 1-65535"},
		{[]string{"10.0.0.5:11434"}, "IPv4 loopback"},
		{[]string{"[::1]:80"}, "IPv4 loopback"},
		{[]string{"bad_host:80"}, "not a host name"},
		{[]string{"a.example:1", "A.example:1"}, "named twice"},
	} {
		_, err := ParseEgress(tc.in)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("ParseEgress(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestEgressOf(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.anthropic.com":            "api.anthropic.com:443",
		"http://127.0.0.1:4010/v1":             "127.0.0.1:4010",
		"http://user:pw@proxy.example/x":       "proxy.example:80",
		"https://generativelanguage.goog:8443": "generativelanguage.goog:8443",
	} {
		if got, err := EgressOf(in); err != nil || got != want {
			t.Errorf("EgressOf(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"api.anthropic.com", "ftp://x.example"} {
		if _, err := EgressOf(in); err == nil {
			t.Errorf("EgressOf(%q) took it", in)
		}
	}
}

// TestConfineRefusesAViewThatExposesAHiddenPath: a state directory the
// child's environment names, which contains a hidden path, fails the run
// before anything starts.
func TestConfineRefusesAViewThatExposesAHiddenPath(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	secret := filepath.Join(home, "creds")
	if err := os.WriteFile(secret, []byte("seed"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Hidden: []string{secret}}, Policy{StateVars: []string{"CLI_STATE"}})
	if errors.Is(err, ErrUnavailable) {
		t.Fatalf("the sandbox is unavailable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/true")
	cmd.Dir, cmd.Env = ws, []string{"PATH=/usr/bin:/bin", "CLI_STATE=" + home}
	if _, err := s.Confine(cmd); err == nil || !strings.Contains(err.Error(), "would expose "+secret) {
		t.Fatalf("Confine = %v, want a refusal naming %s", err, secret)
	}
}

// TestMissingStateDirIsMade: a state directory the child's environment
// names that does not exist yet is made and bound, so what the CLI keeps
// there (a session a later run loads) outlives the run, where it would
// have gone to the run's private view and been lost.
func TestMissingStateDirIsMade(t *testing.T) {
	state := filepath.Join(t.TempDir(), "not", "yet")
	s, err := New(Config{}, Policy{StateVars: []string{"CLI_STATE"}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `echo kept > "$CLI_STATE/session"`)
	cmd.Dir, cmd.Env = t.TempDir(), []string{"PATH=/usr/bin:/bin", "CLI_STATE=" + state}
	confinedOutput(t, s, cmd)
	if b, err := os.ReadFile(filepath.Join(state, "session")); err != nil || string(b) != "kept\n" {
		t.Errorf("the run's state: %q, %v; want it kept in %s", b, err, state)
	}
}

// TestWorkspaceRootIsPrivate: a run whose workspace is the hidden root of
// every workspace gets an empty directory of its own there.
func TestWorkspaceRootIsPrivate(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "other-run.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Hidden: []string{root}}, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "ls -A; touch mine")
	cmd.Dir, cmd.Env = root, []string{"PATH=/usr/bin:/bin"}
	if out := confinedOutput(t, s, cmd); out != "" {
		t.Errorf("the run saw %q in its private workspace, want nothing", out)
	}
	if _, err := os.Stat(filepath.Join(root, "mine")); err == nil {
		t.Error("the run's write reached the workspace root")
	}
}

// confinedOutput runs cmd confined by s and returns what it printed.
func confinedOutput(t *testing.T, s *Sandbox, cmd *exec.Cmd) string {
	t.Helper()
	out := startConfined(t, s, cmd)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return out.String()
}

// startConfined starts cmd confined by s, its output in the builder
// returned; the confinement is released when the test ends.
func startConfined(t *testing.T, s *Sandbox, cmd *exec.Cmd) *strings.Builder {
	t.Helper()
	c, err := s.Confine(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Release)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Started(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	return &out
}

// TestInitBinary: the small agentmesh-sandbox-init binary, built from
// cmd/agentmesh-sandbox-init, is a run's pid 1 and runs its CLI confined
// (a binary that did not register the init would print its usage and
// exit 2); a missing one fails Check and New, naming it.
func TestInitBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), InitBinary)
	build := exec.Command("go", "build", "-o", bin, "github.com/agentmesh/agentmesh/cmd/agentmesh-sandbox-init")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	s, err := New(Config{Init: bin}, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "tr '\\0' '\\n' </proc/1/cmdline | head -n 1; echo $PPID")
	cmd.Dir, cmd.Env = t.TempDir(), []string{"PATH=/usr/bin:/bin"}
	if got, want := confinedOutput(t, s, cmd), InitBinary+"\n1\n"; got != want {
		t.Errorf("confined through %s, the run printed %q, want %q (pid 1 the init, the CLI its child)", bin, got, want)
	}
	missing := filepath.Join(t.TempDir(), InitBinary)
	if _, err := New(Config{Init: missing}, Policy{}); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), missing) {
		t.Errorf("New with a missing init = %v, want ErrUnavailable naming %s", err, missing)
	}
	if _, err := New(Config{Init: InitBinary}, Policy{}); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "absolute path") {
		t.Errorf("New with a relative init = %v, want ErrUnavailable asking for an absolute path", err)
	}
}

// TestReadOnlyVars: a file a policy's read-only variable names is there
// inside at its own path and cannot be changed; one that is hidden, or
// under a hidden path, fails the run before it starts.
func TestReadOnlyVars(t *testing.T) {
	dir := t.TempDir()
	settings := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(settings, []byte(`{"maxAttempts":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{}, Policy{ReadOnlyVars: []string{"CLI_SETTINGS"}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `cat "$CLI_SETTINGS"; echo; { echo changed >"$CLI_SETTINGS"; } 2>/dev/null || echo refused`)
	cmd.Dir, cmd.Env = t.TempDir(), []string{"PATH=/usr/bin:/bin", "CLI_SETTINGS=" + settings}
	if got, want := confinedOutput(t, s, cmd), "{\"maxAttempts\":1}\nrefused\n"; got != want {
		t.Errorf("the run printed %q, want %q", got, want)
	}
	if b, _ := os.ReadFile(settings); string(b) != `{"maxAttempts":1}` {
		t.Errorf("the settings file is now %q", b)
	}
	// Several paths, separated as PATH's are: each is there, read-only;
	// what lies beside them is not.
	skills := filepath.Join(dir, "skills")
	if err := os.Mkdir(skills, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{filepath.Join(skills, "a.md"): "skill", filepath.Join(dir, "secret.json"): "key"} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd = exec.Command("/bin/sh", "-c", `cat "$DIR/settings.json" "$DIR/skills/a.md"; echo; cat "$DIR/secret.json" 2>/dev/null || echo absent; { echo x >"$DIR/skills/b.md"; } 2>/dev/null || echo refused`)
	cmd.Dir, cmd.Env = t.TempDir(), []string{"PATH=/usr/bin:/bin", "DIR=" + dir, "CLI_SETTINGS=" + settings + string(filepath.ListSeparator) + skills}
	if got, want := confinedOutput(t, s, cmd), "{\"maxAttempts\":1}skill\nabsent\nrefused\n"; got != want {
		t.Errorf("the run with a list printed %q, want %q", got, want)
	}
	hidden, err := New(Config{Hidden: []string{dir}}, Policy{ReadOnlyVars: []string{"CLI_SETTINGS"}})
	if err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command("/bin/true")
	cmd.Dir, cmd.Env = t.TempDir(), []string{"PATH=/usr/bin:/bin", "CLI_SETTINGS=" + settings}
	if _, err := hidden.Confine(cmd); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("Confine of a read-only variable under a hidden path = %v, want a refusal naming %s", err, dir)
	}
}

// TestInstallThroughASymlinkedDirectory: a CLI started by a path that
// goes through a symlinked directory (a checkout whose .cache links to
// another disk) runs, at that path.
func TestInstallThroughASymlinkedDirectory(t *testing.T) {
	real, link := filepath.Join(t.TempDir(), "cache"), filepath.Join(t.TempDir(), "cache")
	if err := os.MkdirAll(filepath.Join(real, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "bin", "cli"), []byte("#!/bin/sh\necho ran \"$0\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{}, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(link, "bin", "cli")
	cmd := exec.Command(bin)
	cmd.Dir, cmd.Env = t.TempDir(), []string{"PATH=/usr/bin:/bin"}
	if got, want := confinedOutput(t, s, cmd), "ran "+bin+"\n"; got != want {
		t.Errorf("the run printed %q, want %q", got, want)
	}
}

// TestRunsHoldHostIDsOfTheirOwn: under a root runner, a run's 0 is a host
// uid and gid of the sandbox's range, another than a concurrent run's;
// the run owns its workspace inside and what it writes there is root's
// on the disk, for the runner to read.
func TestRunsHoldHostIDsOfTheirOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a runner that is not root maps its own uid")
	}
	const base = 1_900_000_000
	s, err := New(Config{UIDBase: base, UIDCount: 8}, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "given"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := `read -r in out n </proc/self/uid_map; echo "$in $out"; read -r in out n </proc/self/gid_map; echo "$in $out"
stat -c '%u %g' . given; echo y >>given && echo z >made && echo wrote`
	first := exec.Command("/bin/sh", "-c", script+"; sleep 1")
	first.Dir, first.Env = ws, []string{"PATH=/usr/bin:/bin"}
	out1 := startConfined(t, s, first)
	// A second run while the first holds its id.
	second := exec.Command("/bin/sh", "-c", `read -r in out n </proc/self/uid_map; echo "$in $out"`)
	second.Dir, second.Env = t.TempDir(), []string{"PATH=/usr/bin:/bin"}
	out2 := confinedOutput(t, s, second)
	if err := first.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out1.String())
	}
	lines := strings.Split(strings.TrimSpace(out1.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("the run printed %q", out1.String())
	}
	uid := strings.Fields(lines[0])
	if uid[0] != "0" || uid[1] == "0" || !strings.HasPrefix(uid[1], "19000000") {
		t.Errorf("the run's uid map is %q, want 0 to a host uid of %d..%d", lines[0], base, base+7)
	}
	if lines[1] != lines[0] {
		t.Errorf("the run's gid map is %q, want %q", lines[1], lines[0])
	}
	if lines[2] != "0 0" || lines[3] != "0 0" || lines[4] != "wrote" {
		t.Errorf("the run saw its workspace as %q and its file as %q, and %q; want both its own (0 0) and written", lines[2], lines[3], lines[4])
	}
	if strings.TrimSpace(out2) == lines[0] {
		t.Errorf("two runs at once share the host uid %s", out2)
	}
	for _, name := range []string{"given", "made"} {
		fi, err := os.Stat(filepath.Join(ws, name))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
			t.Errorf("on the disk %s is %d:%d, want root's", name, st.Uid, st.Gid)
		}
	}
}

// TestMissingPathDirectory: a directory of the child's PATH that does
// not exist binds nothing (not its parent, as a binary's directory).
func TestMissingPathDirectory(t *testing.T) {
	parent := t.TempDir()
	if err := os.WriteFile(filepath.Join(parent, "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{}, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `cat "$1" 2>/dev/null || echo hidden`, "sh", filepath.Join(parent, "secret"))
	cmd.Dir, cmd.Env = t.TempDir(), []string{"PATH=" + filepath.Join(parent, "bin") + ":/usr/bin:/bin"}
	if got := confinedOutput(t, s, cmd); got != "hidden\n" {
		t.Errorf("the run printed %q, want the parent of a missing PATH directory hidden", got)
	}
}
