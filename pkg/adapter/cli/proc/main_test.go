package proc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// exe is the absolute path of this test binary, which doubles as every fake
// CLI (STYLE item 9): run with FAKE_AGENT=<name> in its environment, TestMain
// runs fakeAgents[name] instead of the tests.
var exe string

func TestMain(m *testing.M) {
	var err error
	if exe, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, "proc test: executable:", err)
		os.Exit(2)
	}
	if name := os.Getenv("FAKE_AGENT"); name != "" {
		fake, ok := fakeAgents[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "no fake agent %q\n", name)
			os.Exit(2)
		}
		os.Exit(fake(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// fakeAgents are the small programs the test binary can be. Each gets its
// argv (after the binary) and returns the exit code.
var fakeAgents = map[string]func(args []string) int{
	"argv":       fakeArgv,
	"script":     fakeScript,
	"split":      fakeSplit,
	"concat":     fakeConcat,
	"flood":      fakeFlood,
	"grandchild": fakeGrandchild,
	"sleeper":    fakeSleeper,
	"ignoreterm": fakeIgnoreTerm,
	"env":        fakeEnv,
	"stdin":      fakeStdin,
}

// fakeGORACE is the fakes' GORACE: a race-enabled binary otherwise sleeps a
// second at exit.
const fakeGORACE = "atexit_sleep_ms=0"

// lifetime bounds every fake that would otherwise run until it is killed, so
// a broken teardown cannot leave processes behind for long.
const lifetime = 2 * time.Minute

func printJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	_, _ = os.Stdout.Write(append(b, '\n'))
}

// fakeArgv echoes its argv and working directory as one JSON object.
func fakeArgv(args []string) int {
	wd, _ := os.Getwd()
	if args == nil {
		args = []string{}
	}
	printJSON(map[string]any{"argv": args, "cwd": wd})
	return 0
}

// fakeScript runs its arguments as steps: "out:TEXT" and "err:TEXT" write
// TEXT verbatim to stdout or stderr, "sleep:DURATION" pauses, "ignore-term"
// ignores SIGTERM, "kill:SIGNUM" signals itself, "exit:CODE" exits.
func fakeScript(args []string) int {
	for _, step := range args {
		op, arg, _ := strings.Cut(step, ":")
		switch op {
		case "out":
			_, _ = os.Stdout.WriteString(arg)
		case "err":
			_, _ = os.Stderr.WriteString(arg)
		case "sleep":
			d, err := time.ParseDuration(arg)
			if err != nil {
				panic(err)
			}
			time.Sleep(d)
		case "ignore-term":
			signal.Ignore(syscall.SIGTERM)
		case "kill":
			n, _ := strconv.Atoi(arg)
			_ = syscall.Kill(os.Getpid(), syscall.Signal(n))
			time.Sleep(lifetime)
		case "exit":
			n, _ := strconv.Atoi(arg)
			return n
		default:
			panic("fake script: unknown step " + step)
		}
	}
	return 0
}

// splitObjects are what fakeSplit prints, one per line, each multi-byte
// rune of them split across writes.
var splitObjects = []string{
	`{"type":"system","text":"héllo wörld"}`,
	`{"type":"text","text":"日本語のテキスト — “quoted” ✓"}`,
	`{"type":"emoji","text":"🎉🚀 family: 👨‍👩‍👧 flag: 🇳🇱","nested":{"k":["ü",1,true,null]}}`,
	`{"type":"escape","text":"\u00e9\ud83c\udf89 \" \\ \n"}`,
}

// fakeSplit prints splitObjects in writes of one to three bytes with pauses,
// so the reader sees values, and runes, arrive in pieces.
func fakeSplit([]string) int {
	b := []byte(strings.Join(splitObjects, "\n") + "\n")
	for i, n := 0, 1; i < len(b); n = n%3 + 1 {
		j := min(i+n, len(b))
		_, _ = os.Stdout.Write(b[i:j])
		i = j
		time.Sleep(500 * time.Microsecond)
	}
	return 0
}

// concatOutput is directly concatenated JSON, with blank lines, CRLF and
// other whitespace between and after the values.
const concatOutput = "{\"a\":1}{\"b\":2}\n\n  \t{\"c\":\"x\"}\r\n \n{\"d\":[1,2]} {\"e\":{}}{\"f\":\"}{\"}\n\n   \n"

func fakeConcat([]string) int {
	_, _ = os.Stdout.WriteString(concatOutput)
	return 0
}

// floodChunk is one MiB of stderr filler, free of anything Classify looks
// for, so a classification test can tell what was retained.
var floodChunk = bytes.Repeat([]byte(strings.Repeat("x", 63)+"\n"), 1<<20/64)

const floodMiB = 50

// fakeFlood writes 50 MiB to stderr, one object to stdout after each MiB,
// then "err:TEXT" if given and exits with the code in args[0].
func fakeFlood(args []string) int {
	for i := range floodMiB {
		_, _ = os.Stderr.Write(floodChunk)
		printJSON(map[string]int{"i": i})
	}
	code := 0
	if len(args) > 0 {
		code, _ = strconv.Atoi(args[0])
	}
	if len(args) > 1 {
		_, _ = os.Stderr.WriteString(args[1])
	}
	return code
}

// fakeGrandchild starts a sleeper in its own process group, prints
// {"pid","grandchild"} once the sleeper is ready, then streams ticks.
// Options: "ticks=N" (default: until killed), "exit=N", "bad" (print a
// non-object after the pids), "ignore" (ignore SIGTERM), "gignore" (the
// sleeper ignores SIGTERM), "hold" (the sleeper inherits stdout and stderr),
// "escape" (the sleeper leaves our group with setsid and inherits stderr
// only: a daemon the teardown cannot reach).
func fakeGrandchild(args []string) int {
	ticks, code := -1, 0
	var bad, hold, gignore, escape bool
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "ticks":
			ticks, _ = strconv.Atoi(v)
		case "exit":
			code, _ = strconv.Atoi(v)
		case "bad":
			bad = true
		case "hold":
			hold = true
		case "ignore":
			signal.Ignore(syscall.SIGTERM)
		case "gignore":
			gignore = true
		case "escape":
			escape = true
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	// No SysProcAttr: the sleeper stays in our process group, as a CLI's
	// own helpers do.
	cmd := exec.Command(exe)
	cmd.Env = []string{"FAKE_AGENT=sleeper", "GORACE=" + fakeGORACE}
	if gignore {
		cmd.Args = append(cmd.Args, "ignore")
	}
	cmd.ExtraFiles = []*os.File{w} // fd 3: closed by the sleeper when it is ready
	if hold {
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	}
	if escape {
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	_ = w.Close()
	_, _ = io.Copy(io.Discard, r) // EOF once the sleeper has closed fd 3
	printJSON(map[string]int{"pid": os.Getpid(), "grandchild": cmd.Process.Pid})
	_, _ = os.Stderr.WriteString("grandchild started\n")
	if bad {
		_, _ = os.Stdout.WriteString("[1]\n")
	}
	deadline := time.Now().Add(lifetime)
	for i := 0; (ticks < 0 || i < ticks) && time.Now().Before(deadline); i++ {
		time.Sleep(20 * time.Millisecond)
		printJSON(map[string]int{"tick": i})
	}
	return code
}

// fakeSleeper sleeps until it is killed (or for lifetime); with "ignore" it
// ignores SIGTERM. It signals readiness by closing fd 3.
func fakeSleeper(args []string) int {
	if len(args) > 0 && args[0] == "ignore" {
		signal.Ignore(syscall.SIGTERM)
	}
	_ = os.NewFile(3, "ready").Close()
	time.Sleep(lifetime)
	return 0
}

// fakeIgnoreTerm ignores SIGTERM, prints its pid and then streams ticks
// until it is killed.
func fakeIgnoreTerm([]string) int {
	signal.Ignore(syscall.SIGTERM)
	printJSON(map[string]int{"pid": os.Getpid()})
	deadline := time.Now().Add(lifetime)
	for i := 0; time.Now().Before(deadline); i++ {
		time.Sleep(20 * time.Millisecond)
		printJSON(map[string]int{"tick": i})
	}
	return 0
}

// fakeEnv dumps its environment as {"env":{KEY:VALUE}}.
func fakeEnv([]string) int {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	printJSON(map[string]any{"env": env})
	return 0
}

// fakeStdin reads stdin to EOF and reports how many bytes it got and
// whether stdin is /dev/null.
func fakeStdin([]string) int {
	n, err := io.Copy(io.Discard, os.Stdin)
	devnull := false
	if fi, serr := os.Stdin.Stat(); serr == nil {
		if dn, derr := os.Stat(os.DevNull); derr == nil {
			devnull = os.SameFile(fi, dn)
		}
	}
	out := map[string]any{"stdin_bytes": n, "devnull": devnull}
	if err != nil {
		out["error"] = err.Error()
	}
	printJSON(out)
	return 0
}

// gone reports nil if pid no longer runs: it does not exist, or it is a
// zombie (an orphan reparented to an init that does not reap is dead for
// our purposes).
func gone(pid int) error {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	b, rerr := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if rerr == nil {
		// The state is the first field after the ")" that ends the command name.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return nil
		}
	}
	return fmt.Errorf("pid %d is still running (kill 0: %v)", pid, err)
}
