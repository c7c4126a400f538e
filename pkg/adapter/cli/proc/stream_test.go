package proc_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// grace is the shortened grace period most tests use; TestStreamDefaultGrace
// keeps the real one.
const grace = 200 * time.Millisecond

// safety bounds every test's context, so that a hang fails the test with
// context.DeadlineExceeded instead of stalling the suite.
const safety = 30 * time.Second

const installHint = "npm install -g @example/fake-cli"

// fakeSpec runs the test binary as the fake CLI name. Env is the child's
// whole environment: the allow-listed base plus FAKE_AGENT, and GORACE so
// that a race-enabled fake does not sleep a second at exit.
func fakeSpec(name string, args ...string) proc.Spec {
	return proc.Spec{
		Binary:      exe,
		InstallHint: installHint,
		Args:        args,
		Env:         proc.AllowEnv(nil, map[string]string{"FAKE_AGENT": name, "GORACE": fakeGORACE}),
		Grace:       grace,
	}
}

func script(steps ...string) proc.Spec { return fakeSpec("script", steps...) }

// result is what one Stream produced.
type result struct {
	maps []map[string]any
	err  error
	pid  int // the child's pid, from OnStart; 0 if it never started
}

// each is called for every map; returning false stops the loop (an early
// consumer close).
type each func(i int, m map[string]any) bool

// collect ranges over Stream, checking the iterator's contract as it goes:
// a value or an error per step, never both, never anything after the error.
func collect(t *testing.T, ctx context.Context, spec proc.Spec, fn each) result {
	t.Helper()
	var r result
	onStart := spec.OnStart
	spec.OnStart = func(pid int) {
		r.pid = pid
		if onStart != nil {
			onStart(pid)
		}
	}
	for m, err := range proc.Stream(ctx, spec) {
		if r.err != nil {
			t.Errorf("yielded (%v, %v) after the error %v", m, err, r.err)
		}
		if err != nil {
			if m != nil {
				t.Errorf("error %v yielded with the value %v", err, m)
			}
			r.err = err
			continue
		}
		if m == nil {
			t.Error("yielded a nil map without an error")
		}
		r.maps = append(r.maps, m)
		if fn != nil && !fn(len(r.maps)-1, m) {
			break
		}
	}
	return r
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), safety)
	t.Cleanup(cancel)
	return ctx
}

// decodeAll parses each JSON text as the map the stream should yield.
func decodeAll(t *testing.T, texts ...string) []map[string]any {
	t.Helper()
	out := []map[string]any{}
	for _, s := range texts {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("decode %q: %v", s, err)
		}
		out = append(out, m)
	}
	return out
}

func equalMaps(got, want []map[string]any) bool {
	if len(got) == 0 && len(want) == 0 {
		return true
	}
	return reflect.DeepEqual(got, want)
}

// checkGone fails the test for every pid still running, and kills it so a
// failure leaves nothing behind.
func checkGone(t *testing.T, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if pid <= 0 {
			t.Errorf("no pid to check (%d)", pid)
			continue
		}
		if err := gone(pid); err != nil {
			t.Error(err)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func wireError(t *testing.T, err error) *wire.Error {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) {
		t.Fatalf("err = %v (%T), want a *wire.Error", err, err)
	}
	return we
}

func TestStreamArgvWithoutShell(t *testing.T) {
	dir := t.TempDir()
	args := []string{
		"with space", `"double quoted"`, `'single quoted'`, "$(touch x)", "`touch y`",
		"a;b", "x && touch z", "line1\nline2", "", "*", "$HOME", "--flag=value with space",
		"ünïcødé ✓", `back\slash`, "> out.txt", "|cat",
	}
	spec := fakeSpec("argv", args...)
	spec.Dir = dir
	r := collect(t, testContext(t), spec, nil)
	if r.err != nil {
		t.Fatalf("err = %v", r.err)
	}
	if len(r.maps) != 1 {
		t.Fatalf("got %d maps, want 1", len(r.maps))
	}
	raw, _ := json.Marshal(r.maps[0]["argv"])
	var got []string
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, args) {
		t.Errorf("argv:\n got %q\nwant %q", got, args)
	}
	if cwd := r.maps[0]["cwd"]; cwd != dir {
		t.Errorf("cwd = %v, want %s", cwd, dir)
	}
	for _, name := range []string{"x", "y", "z", "out.txt"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s was created: an argument reached a shell", name)
		}
	}
	checkGone(t, r.pid)
}

func TestStreamFraming(t *testing.T) {
	tests := []struct {
		name string
		in   proc.Spec
		want []string
	}{
		{name: "split writes and runes", in: fakeSpec("split"), want: splitObjects},
		{name: "concatenated and blank lines", in: fakeSpec("concat"), want: []string{
			`{"a":1}`, `{"b":2}`, `{"c":"x"}`, `{"d":[1,2]}`, `{"e":{}}`, `{"f":"}{"}`,
		}},
		{name: "no output", in: script(), want: nil},
		{name: "whitespace only", in: script("out:\n \r\n\t\n"), want: nil},
		{name: "final object without newline", in: script(`out:{"a":1}`, "sleep:20ms", `out:{"b":`, "sleep:20ms", `out:2}`),
			want: []string{`{"a":1}`, `{"b":2}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := collect(t, testContext(t), tt.in, nil)
			if r.err != nil {
				t.Fatalf("err = %v", r.err)
			}
			if want := decodeAll(t, tt.want...); !equalMaps(r.maps, want) {
				t.Errorf("maps:\n got %v\nwant %v", r.maps, want)
			}
			checkGone(t, r.pid)
		})
	}
}

func TestStreamNotAMap(t *testing.T) {
	tests := []struct {
		name string
		in   string // written after {"ok":1}
	}{
		{name: "number", in: "42\n"},
		{name: "number at EOF", in: "42"},
		{name: "string", in: `"text"` + "\n"},
		{name: "true", in: "true\n"},
		{name: "null", in: "null\n"},
		{name: "array", in: `[{"a":1}]` + "\n"},
		{name: "empty array", in: "[]"},
		{name: "stray brace", in: "}\n"},
		{name: "missing colon", in: `{"a" 1}` + "\n"},
		{name: "trailing comma", in: `{"a":1,}` + "\n"},
		{name: "plain text", in: "Error: something went wrong\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := collect(t, testContext(t), script(`out:{"ok":1}`+"\n", "out:"+tt.in, `out:{"after":1}`+"\n"), nil)
			if !errors.Is(r.err, wire.ProviderProtocolError) {
				t.Fatalf("err = %v, want a ProviderProtocolError", r.err)
			}
			if want := decodeAll(t, `{"ok":1}`); !equalMaps(r.maps, want) {
				t.Errorf("maps = %v, want %v (everything before the bad value, nothing after)", r.maps, want)
			}
			checkGone(t, r.pid)
		})
	}
}

func TestStreamTail(t *testing.T) {
	repairTo := func(m map[string]any, ok bool) func([]byte) (map[string]any, bool) {
		return func([]byte) (map[string]any, bool) { return m, ok }
	}
	echoTail := func(tail []byte) (map[string]any, bool) {
		return map[string]any{"repaired": string(tail)}, true
	}
	tests := []struct {
		name     string
		out      string
		repair   func([]byte) (map[string]any, bool)
		want     []string
		wantTail string // what the repair must have been given; "" = not called
		wantErr  error
	}{
		{name: "no repair", out: `{"a":1}` + "\n" + `{"b":"cut`, want: []string{`{"a":1}`}, wantErr: wire.ProviderProtocolError},
		{name: "repaired", out: `{"a":1}` + "\n  " + `{"b":"cut`, repair: echoTail,
			want: []string{`{"a":1}`, `{"repaired":"{\"b\":\"cut"}`}, wantTail: `{"b":"cut`},
		{name: "repair refuses", out: `{"a":1}` + "\n" + `{"b":[1,`, repair: repairTo(nil, false),
			want: []string{`{"a":1}`}, wantTail: `{"b":[1,`, wantErr: wire.ProviderProtocolError},
		{name: "repair ok without a map", out: `{"a":1}` + "\n" + `{"b"`, repair: repairTo(nil, true),
			want: []string{`{"a":1}`}, wantTail: `{"b"`, wantErr: wire.ProviderProtocolError},
		{name: "cut scalar", out: `{"a":1}` + "\ntru", repair: echoTail,
			want: []string{`{"a":1}`, `{"repaired":"tru"}`}, wantTail: "tru"},
		{name: "cut inside a multi-byte rune", out: `{"a":"日本` + "\xe8\xaa", want: nil, wantErr: wire.ProviderProtocolError},
		{name: "complete final value", out: `{"a":1}{"b":2}`, repair: echoTail, want: []string{`{"a":1}`, `{"b":2}`}},
		{name: "whitespace tail", out: `{"a":1}` + "\n\n  ", repair: echoTail, want: []string{`{"a":1}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var gotTail string
			called := false
			spec := script("out:" + tt.out)
			if tt.repair != nil {
				spec.TailRepair = func(tail []byte) (map[string]any, bool) {
					called, gotTail = true, string(tail)
					return tt.repair(tail)
				}
			}
			r := collect(t, testContext(t), spec, nil)
			if tt.wantErr == nil && r.err != nil || tt.wantErr != nil && !errors.Is(r.err, tt.wantErr) {
				t.Errorf("err = %v, want %v", r.err, tt.wantErr)
			}
			if want := decodeAll(t, tt.want...); !equalMaps(r.maps, want) {
				t.Errorf("maps = %v, want %v", r.maps, want)
			}
			if called != (tt.wantTail != "") || gotTail != tt.wantTail {
				t.Errorf("repair called %v with %q, want %q", called, gotTail, tt.wantTail)
			}
			checkGone(t, r.pid)
		})
	}
}

func TestStreamNotFound(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "cli")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho '{}'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   string
	}{
		{name: "not on PATH", in: "agentmesh-no-such-cli-4b1d"},
		{name: "missing path", in: filepath.Join(dir, "missing", "cli")},
		{name: "directory", in: dir},
		{name: "not executable", in: notExec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := fakeSpec("argv")
			spec.Binary = tt.in
			started := false
			spec.OnStart = func(int) { started = true }
			r := collect(t, testContext(t), spec, nil)
			if !errors.Is(r.err, wire.ProviderExecutableNotFound) {
				t.Fatalf("err = %v, want ProviderExecutableNotFound", r.err)
			}
			if we := wireError(t, r.err); we.Class != wire.ProviderExecutableNotFound || we.Retryable {
				t.Errorf("class %s retryable %v, want ProviderExecutableNotFound, not retryable", we.Class, we.Retryable)
			}
			if !strings.Contains(r.err.Error(), installHint) {
				t.Errorf("message %q lacks the install hint %q", r.err, installHint)
			}
			if started || len(r.maps) > 0 {
				t.Errorf("a process started (OnStart %v, %d maps)", started, len(r.maps))
			}
		})
	}
}

// TestStreamMissingDir: a working directory that has vanished is not a
// missing binary; the install hint would send the operator the wrong way.
func TestStreamMissingDir(t *testing.T) {
	spec := fakeSpec("argv")
	spec.Dir = filepath.Join(t.TempDir(), "gone")
	r := collect(t, testContext(t), spec, nil)
	if !errors.Is(r.err, wire.ProviderTransportError) || errors.Is(r.err, wire.ProviderExecutableNotFound) {
		t.Fatalf("err = %v, want a ProviderTransportError that is not ProviderExecutableNotFound", r.err)
	}
	if !strings.Contains(r.err.Error(), spec.Dir) {
		t.Errorf("err = %v, want it to name the directory", r.err)
	}
}

func TestStreamExit(t *testing.T) {
	before := []string{`{"n":1}`, `{"n":2}`}
	tests := []struct {
		name     string
		stderr   string
		exit     string // "exit:N" or "kill:N"
		wantCode int
		want     wire.Class
	}{
		{name: "process", stderr: "panic: something broke\n", exit: "exit:3", wantCode: 3, want: wire.ProviderProcessError},
		{name: "quota 429", stderr: "API Error: 429 Too Many Requests\n", exit: "exit:1", wantCode: 1, want: wire.ProviderQuotaError},
		{name: "quota gemini status", stderr: "[API Error: RESOURCE_EXHAUSTED]\n", exit: "exit:173", wantCode: 173, want: wire.ProviderQuotaError},
		{name: "rate limit", stderr: "rate_limit_error: slow down\n", exit: "exit:1", wantCode: 1, want: wire.ProviderQuotaError},
		{name: "auth", stderr: "401 Unauthorized: Invalid API key\n", exit: "exit:1", wantCode: 1, want: wire.ProviderAuthError},
		{name: "auth forbidden", stderr: "Error: Forbidden\n", exit: "exit:2", wantCode: 2, want: wire.ProviderAuthError},
		{name: "context", stderr: "prompt is too long: 210000 tokens > 200000 maximum\n", exit: "exit:1", wantCode: 1, want: wire.ProviderContextError},
		{name: "context window", stderr: "exceeds the model's context window\n", exit: "exit:1", wantCode: 1, want: wire.ProviderContextError},
		{name: "no stderr", exit: "exit:9", wantCode: 9, want: wire.ProviderProcessError},
		{name: "killed by a signal", stderr: "about to die\n", exit: "kill:9", wantCode: 128 + 9, want: wire.ProviderProcessError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			steps := []string{}
			for _, s := range before {
				steps = append(steps, "out:"+s+"\n")
			}
			steps = append(steps, "err:"+tt.stderr, tt.exit)
			r := collect(t, testContext(t), script(steps...), nil)
			if want := decodeAll(t, before...); !equalMaps(r.maps, want) {
				t.Errorf("maps = %v, want %v before the error", r.maps, want)
			}
			we := wireError(t, r.err)
			if we.Class != tt.want {
				t.Errorf("class = %s, want %s (err %v)", we.Class, tt.want, r.err)
			}
			if !errors.Is(r.err, wire.ProviderError) {
				t.Errorf("err = %v does not match ProviderError", r.err)
			}
			if we.ReturnCode == nil || *we.ReturnCode != tt.wantCode {
				t.Errorf("ReturnCode = %v, want %d", we.ReturnCode, tt.wantCode)
			}
			if we.StderrTail != tt.stderr {
				t.Errorf("StderrTail = %q, want %q", we.StderrTail, tt.stderr)
			}
			checkGone(t, r.pid)
		})
	}
}

// TestStreamStderrTail: the wire error's tail is redacted and bounded to
// wire.MaxErrorText, keeping the end of what was retained.
func TestStreamStderrTail(t *testing.T) {
	filler := strings.Repeat("log line without anything special\n", 3000) // ~100 KiB
	last := "fatal: OPENAI_API_KEY=sk-live-0123456789abcdef rejected\n"
	r := collect(t, testContext(t), script("err:"+filler, "err:"+last, "exit:4"), nil)
	we := wireError(t, r.err)
	if len(we.StderrTail) > wire.MaxErrorText {
		t.Errorf("len(StderrTail) = %d, want <= %d", len(we.StderrTail), wire.MaxErrorText)
	}
	if strings.Contains(we.StderrTail, "sk-live") || !strings.HasSuffix(we.StderrTail, "rejected\n") {
		t.Errorf("StderrTail ends %q: want the redacted end of stderr", we.StderrTail[max(0, len(we.StderrTail)-200):])
	}
}

// TestStreamStderrLine: StderrLine sees every line of the kept head of
// stderr, in order, without line ends, the last one even without a
// newline, and nothing past StderrLimit; every call is made before Stream
// returns.
func TestStreamStderrLine(t *testing.T) {
	tests := []struct {
		name  string
		limit int
		steps []string
		want  []string
	}{
		{"lines", 0, []string{"err:one\ntwo\r\n", "err:thr", "err:ee\n\nlast", "exit:0"}, []string{"one", "two", "three", "", "last"}},
		{"limit", 8, []string{"err:1234\n5678\n90\n", "exit:3"}, []string{"1234", "567"}},
		{"none", 0, []string{"out:{}", "exit:0"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := script(tt.steps...)
			spec.StderrLimit = tt.limit
			var mu sync.Mutex
			var got []string
			spec.StderrLine = func(line string) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, line)
			}
			r := collect(t, testContext(t), spec, nil)
			mu.Lock()
			defer mu.Unlock()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("lines = %q, want %q (err %v)", got, tt.want, r.err)
			}
		})
	}
}

// TestStreamStderrFlood: 50 MiB of stderr while stdout streams neither
// blocks the child nor is kept beyond the limit.
func TestStreamStderrFlood(t *testing.T) {
	tests := []struct {
		name      string
		limit     int
		args      []string
		wantLimit int  // bytes of stderr Classify must see, for a non-zero exit
		wantErr   bool // a non-zero exit
	}{
		{name: "exit zero", args: []string{"0"}},
		{name: "default limit", args: []string{"1", "error: context length exceeded\n"}, wantLimit: proc.DefaultStderrLimit, wantErr: true},
		{name: "small limit", limit: 1000, args: []string{"1"}, wantLimit: 1000, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := fakeSpec("flood", tt.args...)
			spec.StderrLimit = tt.limit
			var seen string
			classified := false
			spec.Classify = func(code int, stderr string) wire.Class {
				classified, seen = true, stderr
				return proc.Classify(code, stderr)
			}
			r := collect(t, testContext(t), spec, nil)
			if len(r.maps) != floodMiB {
				t.Errorf("got %d maps, want %d", len(r.maps), floodMiB)
			}
			for i, m := range r.maps {
				if m["i"] != float64(i) {
					t.Errorf("map %d = %v", i, m)
					break
				}
			}
			if !tt.wantErr {
				if r.err != nil || classified {
					t.Errorf("err = %v, classified %v; want neither", r.err, classified)
				}
				return
			}
			if !classified || len(seen) != tt.wantLimit || seen != string(floodChunk[:tt.wantLimit]) {
				t.Errorf("Classify saw %d bytes (called %v), want the first %d", len(seen), classified, tt.wantLimit)
			}
			// Only the first bytes are kept (docs/contract.md §4.8), so a message after
			// the flood is not part of the classification.
			we := wireError(t, r.err)
			if we.Class != wire.ProviderProcessError || len(we.StderrTail) > wire.MaxErrorText {
				t.Errorf("class %s, %d bytes of tail; want ProviderProcessError, <= %d", we.Class, len(we.StderrTail), wire.MaxErrorText)
			}
			// The tail is the end of stderr, so the CLI's last words after
			// the flood are in it.
			if len(tt.args) > 1 && !strings.HasSuffix(we.StderrTail, tt.args[1]) {
				t.Errorf("StderrTail ends %q, want the last line %q", we.StderrTail[max(0, len(we.StderrTail)-80):], tt.args[1])
			}
			checkGone(t, r.pid)
		})
	}
}

func TestStreamEnv(t *testing.T) {
	t.Setenv("AGENTMESH_NATS_URL", "nats://secret@x")
	t.Setenv("OPENAI_API_KEY", "sk-test-not-for-the-child")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-allowed")
	t.Setenv("LANG", "C.UTF-8")
	tests := []struct {
		name    string
		env     []string
		want    map[string]string
		wantOut []string
	}{
		{
			name: "allow-list and set",
			env: proc.AllowEnv([]string{"ANTHROPIC_API_KEY", "NOT_SET_ANYWHERE"},
				map[string]string{"FAKE_AGENT": "env", "LANG": "en_US.UTF-8", "EXTRA": "a=b c"}),
			want:    map[string]string{"ANTHROPIC_API_KEY": "sk-ant-allowed", "LANG": "en_US.UTF-8", "EXTRA": "a=b c", "PATH": os.Getenv("PATH")},
			wantOut: []string{"AGENTMESH_NATS_URL", "OPENAI_API_KEY", "NOT_SET_ANYWHERE"},
		},
		{
			name:    "complete environment",
			env:     []string{"FAKE_AGENT=env", "ONLY=this"},
			want:    map[string]string{"FAKE_AGENT": "env", "ONLY": "this"},
			wantOut: []string{"AGENTMESH_NATS_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PATH", "HOME", "LANG"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := fakeSpec("env")
			spec.Env = tt.env
			r := collect(t, testContext(t), spec, nil)
			if r.err != nil || len(r.maps) != 1 {
				t.Fatalf("err = %v, %d maps", r.err, len(r.maps))
			}
			got, _ := r.maps[0]["env"].(map[string]any)
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("child %s = %v, want %q", k, got[k], v)
				}
			}
			for _, k := range tt.wantOut {
				if v, ok := got[k]; ok {
					t.Errorf("child has %s=%v, want it absent", k, v)
				}
			}
		})
	}
}

func TestStreamStdin(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB, more than a pipe holds
	tests := []struct {
		name        string
		in          *strings.Reader
		wantBytes   float64
		wantDevNull bool
	}{
		{name: "default /dev/null", wantDevNull: true},
		{name: "reader", in: strings.NewReader("hello\nworld"), wantBytes: 11},
		{name: "large reader", in: strings.NewReader(big), wantBytes: float64(len(big))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := fakeSpec("stdin")
			if tt.in != nil {
				spec.Stdin = tt.in
			}
			r := collect(t, testContext(t), spec, nil)
			if r.err != nil || len(r.maps) != 1 {
				t.Fatalf("err = %v, %d maps", r.err, len(r.maps))
			}
			m := r.maps[0]
			if m["stdin_bytes"] != tt.wantBytes || m["devnull"] != tt.wantDevNull {
				t.Errorf("child saw %v, want %v bytes, devnull %v", m, tt.wantBytes, tt.wantDevNull)
			}
		})
	}
}

// TestStreamTeardown: on every way a stream ends, the child and its
// grandchild (same process group) are gone when Stream returns.
func TestStreamTeardown(t *testing.T) {
	errCause := errors.New("caller cancelled")
	modes := []struct {
		name     string
		args     []string
		timeout  time.Duration // a deadline this long after the first map, if > 0
		cancel   bool          // cancel with errCause after the first map
		stop     bool          // break out of the loop after the first map
		wantErr  error         // nil: no error at all
		wantMaps int           // at least this many maps
	}{
		{name: "normal EOF", args: []string{"ticks=3"}, wantMaps: 4},
		{name: "parser failure", args: []string{"bad"}, wantErr: wire.ProviderProtocolError, wantMaps: 1},
		{name: "deadline", timeout: 300 * time.Millisecond, wantErr: context.DeadlineExceeded, wantMaps: 1},
		{name: "cancel", cancel: true, wantErr: errCause, wantMaps: 1},
		{name: "early close", stop: true, wantMaps: 1},
	}
	variants := []struct {
		name string
		args []string
	}{
		{name: "plain"},
		{name: "child ignores SIGTERM", args: []string{"ignore"}},
		{name: "grandchild ignores SIGTERM", args: []string{"gignore"}},
		{name: "grandchild holds stdout", args: []string{"hold"}},
	}
	for _, mode := range modes {
		for _, v := range variants {
			t.Run(mode.name+"/"+v.name, func(t *testing.T) {
				t.Parallel()
				late := newLateDeadline(testContext(t))
				ctx, cancel := context.WithCancelCause(late)
				defer cancel(nil)
				grandchild := 0
				r := collect(t, ctx, fakeSpec("grandchild", append(mode.args, v.args...)...), func(i int, m map[string]any) bool {
					if i == 0 {
						f, _ := m["grandchild"].(float64)
						grandchild = int(f)
						if mode.timeout > 0 {
							late.arm(mode.timeout)
						}
						if mode.cancel {
							cancel(errCause)
						}
						return !mode.stop
					}
					return true
				})
				switch {
				case mode.wantErr == nil && r.err != nil:
					t.Errorf("err = %v, want none", r.err)
				case mode.wantErr != nil && !errors.Is(r.err, mode.wantErr):
					t.Errorf("err = %v, want %v", r.err, mode.wantErr)
				}
				if len(r.maps) < mode.wantMaps {
					t.Errorf("got %d maps, want at least %d", len(r.maps), mode.wantMaps)
				}
				checkGone(t, r.pid, grandchild)
			})
		}
	}
}

// lateDeadline is a context whose deadline is set only when arm is called,
// so a test's deadline passes a fixed time after the child's first output
// however long a loaded machine took to start the child. Its Err is
// context.DeadlineExceeded once that deadline passed, as a
// context.WithDeadline's is; it ends with its parent too.
type lateDeadline struct {
	context.Context
	done chan struct{}
	mu   sync.Mutex
	at   time.Time
	err  error
}

func newLateDeadline(parent context.Context) *lateDeadline {
	l := &lateDeadline{Context: parent, done: make(chan struct{})}
	context.AfterFunc(parent, func() { l.end(parent.Err()) })
	return l
}

// arm sets the deadline d from now.
func (l *lateDeadline) arm(d time.Duration) {
	l.mu.Lock()
	l.at = time.Now().Add(d)
	l.mu.Unlock()
	time.AfterFunc(d, func() { l.end(context.DeadlineExceeded) })
}

func (l *lateDeadline) end(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
		close(l.done)
	}
}

func (l *lateDeadline) Deadline() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.at, !l.at.IsZero()
}

func (l *lateDeadline) Done() <-chan struct{} { return l.done }

func (l *lateDeadline) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// TestStreamDrainTimeout: a process that left the group (setsid) and holds
// stderr cannot be stopped by us; the non-zero exit is still reported, with
// what stderr had, after waiting DrainTimeout for the drain.
func TestStreamDrainTimeout(t *testing.T) {
	spec := fakeSpec("grandchild", "escape", "ticks=1", "exit=3")
	spec.DrainTimeout = 300 * time.Millisecond
	escapee := 0
	t.Cleanup(func() {
		if escapee > 0 {
			_ = syscall.Kill(escapee, syscall.SIGKILL) // it escaped our teardown by design
		}
	})
	var last time.Time
	r := collect(t, testContext(t), spec, func(i int, m map[string]any) bool {
		if i == 0 {
			f, _ := m["grandchild"].(float64)
			escapee = int(f)
		}
		last = time.Now()
		return true
	})
	took := time.Since(last)
	we := wireError(t, r.err)
	if we.Class != wire.ProviderProcessError || we.ReturnCode == nil || *we.ReturnCode != 3 {
		t.Errorf("err = %v, want a ProviderProcessError with returncode 3", r.err)
	}
	if we.StderrTail != "grandchild started\n" {
		t.Errorf("StderrTail = %q", we.StderrTail)
	}
	if took < spec.DrainTimeout {
		t.Errorf("returned %v after the last map, want at least the drain timeout %v", took, spec.DrainTimeout)
	}
	if len(r.maps) != 2 {
		t.Errorf("got %d maps, want 2", len(r.maps))
	}
	checkGone(t, r.pid)
	if err := gone(escapee); err == nil {
		t.Error("the escaped grandchild is gone: the test no longer shows a survivor")
	}
}

// TestStreamEscalation: a child that ignores SIGTERM is killed once the
// grace has passed, and not before.
func TestStreamEscalation(t *testing.T) {
	var stopped time.Time
	r := collect(t, testContext(t), fakeSpec("ignoreterm"), func(int, map[string]any) bool {
		stopped = time.Now()
		return false
	})
	took := time.Since(stopped)
	if r.err != nil {
		t.Errorf("err = %v", r.err)
	}
	if took < grace {
		t.Errorf("stopping took %v, want at least the grace %v", took, grace)
	}
	checkGone(t, r.pid)
}

// TestStreamDefaultGrace keeps the real 5 s grace: a child that ignores
// SIGTERM must be given all of it before SIGKILL. This is a correctness
// property of the teardown (docs/contract.md §4.8), not a performance assertion, and the
// one slow test of the package.
func TestStreamDefaultGrace(t *testing.T) {
	if testing.Short() {
		t.Skip("waits the full 5 s grace")
	}
	t.Parallel()
	spec := fakeSpec("ignoreterm")
	spec.Grace = 0 // the default
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	var stopped time.Time
	r := collect(t, ctx, spec, func(i int, _ map[string]any) bool {
		if i == 0 {
			stopped = time.Now()
			cancel()
		}
		return true
	})
	took := time.Since(stopped)
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", r.err)
	}
	if took < proc.DefaultGrace-100*time.Millisecond {
		t.Errorf("stopping took %v, want about the default grace %v", took, proc.DefaultGrace)
	}
	checkGone(t, r.pid)
}

// TestStreamPrimaryError: whatever happens while tearing down, the error
// that ended the stream is the one reported.
func TestStreamPrimaryError(t *testing.T) {
	errCause := errors.New("caller went away")
	tests := []struct {
		name    string
		in      proc.Spec
		timeout time.Duration
		cancel  bool // cancel with errCause after the first map
		stop    bool // break after the first map
		wantErr error
		notErr  error
	}{
		{
			name: "parser failure, then non-zero exit",
			in:   script(`out:{"a":1}`+"\n[1]\n", "err:rate limit exceeded\n", "exit:7"),
			// The protocol error, not the quota error of the exit.
			wantErr: wire.ProviderProtocolError, notErr: wire.ProviderQuotaError,
		},
		{
			name:    "cancel, then non-zero exit",
			in:      script("ignore-term", `out:{"a":1}`+"\n", "sleep:100ms", "err:quota exceeded\n", "exit:5"),
			cancel:  true,
			wantErr: errCause, notErr: wire.ProviderError,
		},
		{
			name:    "deadline cuts a value",
			in:      script(`out:{"a":1}`+"\n"+`{"partial":`, "sleep:1m"),
			timeout: time.Second,
			wantErr: context.DeadlineExceeded, notErr: wire.ProviderProtocolError,
		},
		{
			name:    "deadline, child ignores SIGTERM and exits non-zero",
			in:      script("ignore-term", `out:{"a":1}`+"\n", "sleep:2s", "err:401 unauthorized\n", "exit:1"),
			timeout: time.Second,
			wantErr: context.DeadlineExceeded, notErr: wire.ProviderError,
		},
		{
			name:   "early close, then non-zero exit",
			in:     script(`out:{"a":1}`+"\n", "sleep:50ms", "err:boom\n", "exit:3"),
			stop:   true,
			notErr: wire.ProviderError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			ctx, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			r := collect(t, ctx, tt.in, func(int, map[string]any) bool {
				if tt.cancel {
					cancel(errCause)
				}
				return !tt.stop
			})
			if tt.wantErr == nil && r.err != nil || tt.wantErr != nil && !errors.Is(r.err, tt.wantErr) {
				t.Errorf("err = %v, want %v", r.err, tt.wantErr)
			}
			if r.err != nil && errors.Is(r.err, tt.notErr) {
				t.Errorf("err = %v must not be a %v", r.err, tt.notErr)
			}
			if len(r.maps) != 1 {
				t.Errorf("got %d maps, want 1", len(r.maps))
			}
			checkGone(t, r.pid)
		})
	}
}

// TestStreamConsumerUnwinds: a loop body that panics, or calls
// runtime.Goexit as t.Fatal does, still leaves no process behind.
func TestStreamConsumerUnwinds(t *testing.T) {
	tests := []struct {
		name string
		exit func()
	}{
		{name: "panic", exit: func() { panic("consumer bug") }},
		{name: "Goexit", exit: runtime.Goexit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := fakeSpec("grandchild")
			var pid, grandchild int
			spec.OnStart = func(p int) { pid = p }
			done := make(chan any)
			go func() {
				defer func() { done <- recover() }()
				for m, err := range proc.Stream(testContext(t), spec) {
					if err != nil {
						return
					}
					f, _ := m["grandchild"].(float64)
					grandchild = int(f)
					tt.exit()
				}
			}()
			if p := <-done; tt.name == "panic" && p == nil {
				t.Error("the consumer's panic was swallowed")
			}
			checkGone(t, pid, grandchild)
		})
	}
}

// TestStreamConcurrentIteration: one Seq may be ranged over by several
// goroutines, each running its own child.
func TestStreamConcurrentIteration(t *testing.T) {
	spec := fakeSpec("argv", "x")
	spec.Grace = 0 // leave the defaults to Stream
	seq := proc.Stream(testContext(t), spec)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			n := 0
			for _, err := range seq {
				if err != nil {
					t.Error(err)
				}
				n++
			}
			if n != 1 {
				t.Errorf("got %d values, want 1", n)
			}
		})
	}
	wg.Wait()
}

func TestStreamContextDoneBeforeStart(t *testing.T) {
	errCause := errors.New("run cancelled while queued")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errCause)
	spec := fakeSpec("argv")
	started := false
	spec.OnStart = func(int) { started = true }
	r := collect(t, ctx, spec, nil)
	if !errors.Is(r.err, errCause) {
		t.Errorf("err = %v, want %v", r.err, errCause)
	}
	if started {
		t.Error("a process was started for a context that had already ended")
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want wire.Class
	}{
		{name: "empty", in: "", want: wire.ProviderProcessError},
		{name: "generic", in: "segmentation fault", want: wire.ProviderProcessError},
		{name: "too many requests", in: "HTTP 429 Too Many Requests", want: wire.ProviderQuotaError},
		{name: "overloaded", in: `{"type":"overloaded_error"}`, want: wire.ProviderQuotaError},
		{name: "quota upper case", in: "QUOTA EXCEEDED", want: wire.ProviderQuotaError},
		{name: "invalid key", in: "Invalid API key provided", want: wire.ProviderAuthError},
		{name: "authentication", in: "authentication_error", want: wire.ProviderAuthError},
		{name: "context_length", in: "context_length_exceeded", want: wire.ProviderContextError},
		{name: "maximum context", in: "This model's maximum context length is 8192 tokens", want: wire.ProviderContextError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := proc.Classify(1, tt.in); got != tt.want {
				t.Errorf("Classify(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}
