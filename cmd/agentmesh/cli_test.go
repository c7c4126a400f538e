package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/agentmesh/agentmesh/pkg/adapter/acp/acpfake"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(acpFakeEnv) == "1" {
		acpfake.Main() // the test binary as an ACP agent (session_test.go)
	}
	if os.Getenv(asMainEnv) == "1" {
		main() // the test binary as the agentmesh command, with its real signal handling
	}
	goleak.VerifyTestMain(m)
}

// asMainEnv makes the test binary run main.
const asMainEnv = "AGENTMESH_TEST_AS_MAIN"

// testIO returns a stdio on buffers with the environment env.
func testIO(env map[string]string) (*stdio, *servicetest.Buffer, *servicetest.Buffer) {
	var out, errOut servicetest.Buffer
	io := newStdio(&out, &errOut, func(k string) string { return env[k] })
	io.stdin = strings.NewReader("") // never the test's own stdin
	return io, &out, &errOut
}

func TestParseRun(t *testing.T) {
	tests := []struct {
		name       string
		in         []string
		env        map[string]string
		want       runFlags
		wantPrompt string
		wantCode   int // of a failure; 0 for success
	}{{
		name:       "defaults",
		in:         []string{"-p", "fixture", "hi"},
		want:       runFlags{clientFlags: clientFlags{server: "nats://127.0.0.1:4222", tenant: "default", principal: "local"}, profile: "fixture"},
		wantPrompt: "hi",
	}, {
		name: "environment",
		in:   []string{"--profile", "fixture", "hi"},
		env:  map[string]string{"AGENTMESH_NATS_URL": "nats://mesh:4222", "AGENTMESH_TENANT": "acme", "AGENTMESH_PRINCIPAL": "ann", "AGENTMESH_PREFIX": "stage"},
		want: runFlags{clientFlags: clientFlags{server: "nats://mesh:4222", tenant: "acme", principal: "ann", prefix: "stage"}, profile: "fixture"},

		wantPrompt: "hi",
	}, {
		name: "flags after the prompt, words joined",
		in:   []string{"hello", "-p", "fixture", "world", "--json", "--script", "slow", "--delay-ms", "50", "--deadline", "2s", "--conversation", "c1", "--server", "nats://x:1", "--run-id", "r-1"},
		want: runFlags{clientFlags: clientFlags{server: "nats://x:1", tenant: "default", principal: "local"}, profile: "fixture",
			json: true, script: "slow", delayMS: 50, deadline: 2 * time.Second, conversation: "c1", runID: "r-1"},
		wantPrompt: "hello world",
	}, {
		name:       "double dash",
		in:         []string{"-p", "fixture", "--", "-not-a-flag"},
		want:       runFlags{clientFlags: clientFlags{server: "nats://127.0.0.1:4222", tenant: "default", principal: "local"}, profile: "fixture"},
		wantPrompt: "-not-a-flag",
	},
		{name: "no profile", in: []string{"hi"}, wantCode: exitUsage},
		{name: "no prompt", in: []string{"-p", "fixture"}, wantCode: exitUsage},
		{name: "negative delay", in: []string{"-p", "fixture", "--delay-ms", "-1", "hi"}, wantCode: exitUsage},
		{name: "bad conversation", in: []string{"-p", "fixture", "--conversation", "a.b", "hi"}, wantCode: exitUsage},
		{name: "unknown flag", in: []string{"-p", "fixture", "--nope", "hi"}, wantCode: exitUsage},
		{name: "bad set", in: []string{"-p", "gemini", "--set", "novalue", "hi"}, wantCode: exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			io, _, _ := testIO(tt.env)
			io.stdin = strings.NewReader("from standard input\n")
			got, prompt, err := parseRun(tt.in, io)
			if tt.wantCode != 0 {
				var ee *exitError
				if !errors.As(err, &ee) || ee.code != tt.wantCode {
					t.Fatalf("parseRun(%q) error = %v, want exit code %d", tt.in, err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseRun(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) || prompt != tt.wantPrompt {
				t.Errorf("parseRun(%q) = %+v, %q; want %+v, %q", tt.in, got, prompt, tt.want, tt.wantPrompt)
			}
		})
	}
}

func TestRunRequest(t *testing.T) {
	f := runFlags{clientFlags: clientFlags{tenant: "t", principal: "p"}, profile: "fixture", script: "slow", delayMS: 5, deadline: 3 * time.Second}
	req, err := f.request("hi")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := wire.DecodeStrict(req.Request, &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 || m["prompt"] != "hi" || m["script"] != "slow" {
		t.Errorf("request = %v, want prompt, script and delay_ms", m)
	}
	if req.DeadlineMS != 3000 || req.Tenant != "t" || req.Principal != "p" || req.Profile != "fixture" {
		t.Errorf("run request = %+v", req)
	}
	f = runFlags{profile: "fixture"}
	req, _ = f.request("only")
	m = nil
	if err := wire.DecodeStrict(req.Request, &m); err != nil || len(m) != 1 {
		t.Errorf("request without options = %v (%v), want only the prompt", m, err)
	}
}

func TestParseUp(t *testing.T) {
	io, _, _ := testIO(nil)
	o, err := parseUp(nil, io)
	want := upOptions{listen: "127.0.0.1:4222", dataDir: ".agentmesh", http: "127.0.0.1:9465", gateway: "127.0.0.1:8080", console: true, fixtureDir: "testdata/fixture", profiles: "profiles", workspace: ".", sync: "always"}
	if err != nil || !reflect.DeepEqual(o, want) {
		t.Errorf("parseUp() = %+v, %v; want %+v", o, err, want)
	}
	o, err = parseUp([]string{"--listen", "0.0.0.0:0", "--http", "", "--gateway", "", "--console=false", "--demo", "--verbose", "--data-dir", "/tmp/x", "--sync", "1s"}, io)
	want = upOptions{listen: "0.0.0.0:0", dataDir: "/tmp/x", fixtureDir: "testdata/fixture", profiles: "profiles", workspace: ".", demo: true, verbose: true, sync: "1s"}
	if err != nil || !reflect.DeepEqual(o, want) {
		t.Errorf("parseUp(...) = %+v, %v; want %+v", o, err, want)
	}
	for arg, want := range map[string][]string{"fixture": {"fixture"}, "acp,pi": {"acp", "pi"}, " acp , pi": {"acp", "pi"}, "none": {}} {
		if o, err := parseUp([]string{"--runner-adapters", arg}, io); err != nil || !reflect.DeepEqual(o.runnerAdapters, want) {
			t.Errorf("parseUp(--runner-adapters %q) = %q, %v; want %q", arg, o.runnerAdapters, err, want)
		}
	}
	for _, args := range [][]string{{"--listen", "4222"}, {"--listen", "h:99999"}, {"extra"}, {"--data-dir", ""}, {"--gateway", "8080"},
		{"--runner-adapters", ""}, {"--runner-adapters", "acp,,pi"}, {"--runner-adapters", "acp,acp"}, {"--runner-adapters", "acp,none"},
		{"--sync", "never"}, {"--sync", "0s"}, {"--sync", "-1s"}} {
		if _, err := parseUp(args, io); err == nil {
			t.Errorf("parseUp(%q) succeeded, want a usage error", args)
		}
	}
	// The runner's and the gateway's variables are up's defaults, as
	// the service binaries read them; the flags win.
	env, _, _ := testIO(map[string]string{adaptersVar: "acp, pi", consoleVar: "false"})
	if o, err := parseUp(nil, env); err != nil || !reflect.DeepEqual(o.runnerAdapters, []string{"acp", "pi"}) || o.console {
		t.Errorf("parseUp() with %s and %s set = adapters %q, console %v, %v; want [acp pi], false", adaptersVar, consoleVar, o.runnerAdapters, o.console, err)
	}
	if o, err := parseUp([]string{"--runner-adapters", "none", "--console"}, env); err != nil || !reflect.DeepEqual(o.runnerAdapters, []string{}) || !o.console {
		t.Errorf("parseUp(--runner-adapters none --console) = adapters %q, console %v, %v; want the flags'", o.runnerAdapters, o.console, err)
	}
	for name, v := range map[string]string{adaptersVar: "acp,acp", consoleVar: "maybe"} {
		bad, _, _ := testIO(map[string]string{name: v})
		if _, err := parseUp(nil, bad); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("parseUp() with %s=%q: %v, want a usage error naming it", name, v, err)
		}
	}
	if _, port, _ := mesh.SplitListen("127.0.0.1:0"); port != -1 {
		t.Errorf("mesh.SplitListen(127.0.0.1:0) port = %d, want -1 (random)", port)
	}
}

func TestRunCommandLine(t *testing.T) {
	tests := []struct {
		name       string
		in         []string
		want       int
		wantStdout string
		wantStderr string
	}{
		{name: "no command", in: nil, want: exitUsage, wantStderr: "usage: agentmesh <command>"},
		{name: "help", in: []string{"--help"}, want: exitOK, wantStdout: "up         start an embedded"},
		{name: "unknown", in: []string{"launch"}, want: exitUsage, wantStderr: `unknown command "launch"`},
		{name: "command help", in: []string{"run", "-h"}, want: exitOK, wantStderr: "usage: agentmesh run -p <profile>"},
		{name: "status needs an id", in: []string{"status"}, want: exitUsage, wantStderr: "want one run id"},
		{name: "bad run id", in: []string{"cancel", "a.b"}, want: exitUsage, wantStderr: "run_id"},
		{name: "bad tenant", in: []string{"status", "--tenant", "a b", "r1"}, want: exitUsage, wantStderr: "--tenant"},
		{name: "bad inbox prefix", in: []string{"status", "--server", "nats://127.0.0.1:1", "--inbox-prefix", "_INBOX_acme.", "r1"}, want: exitUsage, wantStderr: `--inbox-prefix "_INBOX_acme."`},
		{name: "no server", in: []string{"run", "--server", "nats://127.0.0.1:1", "-p", "fixture", "hi"}, want: exitUsage, wantStderr: "connect to nats://127.0.0.1:1"},
		{name: "no server, status", in: []string{"status", "--server", "nats://u:secret@127.0.0.1:1", "r1"}, want: exitUsage, wantStderr: "connect to nats://[REDACTED]@127.0.0.1:1"},
		{name: "no server, a list", in: []string{"status", "--server", "nats://u:secret1@127.0.0.1:1,nats://u:secret2@127.0.0.1:2", "r1"}, want: exitUsage,
			wantStderr: "connect to nats://[REDACTED]@127.0.0.1:1,nats://[REDACTED]@127.0.0.1:2"},
		{name: "no server, a token", in: []string{"status", "--server", "nats://secret-token@[::1]:1", "r1"}, want: exitUsage, wantStderr: "connect to nats://[REDACTED]@[::1]:1"},
		{name: "unparsable list", in: []string{"status", "--server", "nats://u:secret1@127.0.0.1:1,nats://u:secret2@[::1", "r1"}, want: exitUsage, wantStderr: "[REDACTED]@[::1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			io, out, errOut := testIO(nil)
			if got := run(context.Background(), tt.in, io); got != tt.want {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", got, tt.want, errOut)
			}
			if !strings.Contains(out.String(), tt.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", out, tt.wantStdout)
			}
			if !strings.Contains(errOut.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tt.wantStderr)
			}
			if strings.Contains(errOut.String(), "secret") {
				t.Errorf("stderr shows the password: %q", errOut)
			}
		})
	}
}

func TestParseHelp(t *testing.T) {
	io, _, errOut := testIO(nil)
	if _, err := parse(newFlagSet("x", "[flags]", io), []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("parse(-h) = %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(errOut.String(), "usage: agentmesh x [flags]") {
		t.Errorf("stderr = %q, want the usage", errOut)
	}
}

func TestRunSetFields(t *testing.T) {
	io, _, _ := testIO(nil)
	f, prompt, err := parseRun([]string{"-p", "gemini", "--set", "approval_mode=yolo", "--set", "include_directories=[\"a\"]", "--workspace", "w", "go"}, io)
	if err != nil {
		t.Fatal(err)
	}
	req, m := requestOf(t, f, prompt)
	if m["approval_mode"] != "yolo" || m["prompt"] != "go" || fmt.Sprint(m["include_directories"]) != "[a]" || req.Runtime["workspace"] != "w" {
		t.Fatalf("request = %v, runtime %v", m, req.Runtime)
	}
}

// TestGroupHelpListsSubcommandFlags: a group command's --help prints,
// after its own usage, each subcommand's usage and flags, and exits 0
// having run none of them (no mesh is reachable here).
func TestGroupHelpListsSubcommandFlags(t *testing.T) {
	for _, group := range []string{"artifacts", "workspace", "consent", "redaction", "exports", "keys", "runs", "sandbox", "budget", "quota"} {
		io, out, errOut := testIO(map[string]string{"AGENTMESH_NATS_URL": "nats://127.0.0.1:1"})
		if code := run(context.Background(), []string{group, "--help"}, io); code != exitOK {
			t.Errorf("%s --help: exit %d, want 0; stderr:\n%s", group, code, errOut)
			continue
		}
		help := errOut.String()
		first, _, _ := strings.Cut(help, "\n")
		_, subs, ok := strings.Cut(first, "<")
		subs, _, _ = strings.Cut(subs, ">")
		if !ok || subs == "" {
			t.Errorf("%s --help: first line %q names no subcommands", group, first)
			continue
		}
		for sub := range strings.SplitSeq(subs, "|") {
			if !strings.Contains(help, "usage: agentmesh "+group+" "+sub) {
				t.Errorf("%s --help lacks %s's usage:\n%s", group, sub, help)
			}
		}
		if group != "sandbox" && group != "redaction" && !strings.Contains(help, "-tenant") {
			t.Errorf("%s --help lists no flags:\n%s", group, help)
		}
		if out.String() != "" || strings.Contains(help, "connect to nats:") {
			t.Errorf("%s --help ran something: stdout %q, stderr:\n%s", group, out, help)
		}
	}
}

// TestRunPromptFromStdinOrFile: "-" reads the prompt from standard input
// and @FILE from the file, whole (past argv's 128 KiB), as the run's
// request; a missing file, one over the bound and one that is not text
// are usage errors naming it; "-" among other words, and a prompt word
// that only begins with @ among others, stay literal.
func TestRunPromptFromStdinOrFile(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("a long prompt line\n", 200<<10/18) // over 128 KiB
	file := filepath.Join(dir, "prompt.md")
	if err := os.WriteFile(file, []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	tooBig := filepath.Join(dir, "too-big")
	if err := os.WriteFile(tooBig, make([]byte, maxPrompt+1), 0o644); err != nil {
		t.Fatal(err)
	}
	binary := filepath.Join(dir, "binary")
	if err := os.WriteFile(binary, []byte{0xff, 0xfe, 0x00}, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args       []string
		stdin      string
		want, fail string
	}{
		{args: []string{"-"}, stdin: big, want: big},
		{args: []string{"@" + file}, want: big},
		{args: []string{"say", "-"}, want: "say -"},
		{args: []string{"mail", "@alice"}, want: "mail @alice"},
		{args: []string{"@" + filepath.Join(dir, "missing")}, fail: "missing"},
		{args: []string{"@" + tooBig}, fail: "over"},
		{args: []string{"@" + binary}, fail: "not UTF-8"},
		{args: []string{"-"}, stdin: "", fail: "a prompt is required"},
	} {
		io, _, _ := testIO(nil)
		io.stdin = strings.NewReader(tt.stdin)
		f, prompt, err := parseRun(append([]string{"-p", "fixture"}, tt.args...), io)
		if tt.fail != "" {
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), tt.fail) {
				t.Errorf("run %q: %v, want a usage error saying %q", tt.args, err, tt.fail)
			}
			continue
		}
		if err != nil || prompt != tt.want {
			t.Errorf("run %q: prompt of %d bytes, %v; want %d bytes", tt.args, len(prompt), err, len(tt.want))
			continue
		}
		req, err := f.request(prompt)
		var m map[string]any
		if err != nil || wire.DecodeStrict(req.Request, &m) != nil || m["prompt"] != tt.want {
			t.Errorf("run %q: the request's prompt is not the prompt read (%v)", tt.args, err)
		}
	}
}
