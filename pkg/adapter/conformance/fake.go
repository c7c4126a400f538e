package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
)

// FakeEnv turns a test binary into the fake CLI: its value is the JSON of a
// Fake. The suite sets it through the adapter's cli.Config.EnvSet,
// the only way a value reaches a child besides the allow-list.
const FakeEnv = "AGENTMESH_CONFORMANCE_FAKE"

// grandchildEnv turns the binary into the fake's grandchild; its value is
// grandchildPlain or grandchildIgnoreTerm.
const grandchildEnv = "AGENTMESH_CONFORMANCE_GRANDCHILD"

const (
	grandchildPlain      = "plain"
	grandchildIgnoreTerm = "ignore-term"
)

// Write modes of Fake.Write.
const (
	// WriteLines writes each line with one write, as a CLI prints.
	WriteLines = "lines"
	// WriteSplit cuts the output into small random writes, anywhere:
	// inside a JSON value, a string, or a UTF-8 sequence.
	WriteSplit = "split"
	// WriteConcat writes the values directly concatenated, with the
	// newlines between them removed.
	WriteConcat = "concat"
)

// Fake is what the fake CLI does. The zero value writes nothing and exits 0.
type Fake struct {
	// Stdout is the file replayed on stdout (a transcript's .stdout.ndjson).
	Stdout string `json:"stdout,omitempty"`
	// Write is how Stdout is written: WriteLines (default), WriteSplit or
	// WriteConcat.
	Write string `json:"write,omitempty"`
	// Tail is written after Stdout as it is (a broken partial line, a
	// JSON array).
	Tail string `json:"tail,omitempty"`
	// Stderr is a file written to stderr before stdout starts.
	Stderr string `json:"stderr,omitempty"`
	// StderrBytes of filler are written to stderr spread between the
	// stdout writes, so stdout streams while stderr is being written.
	StderrBytes int64 `json:"stderr_bytes,omitempty"`
	// Exit is the exit status after the output.
	Exit int `json:"exit,omitempty"`
	// Hang: after the output, sleep instead of exiting.
	Hang bool `json:"hang,omitempty"`
	// Grandchild: before any output, start a grandchild in the fake's own
	// process group that holds stdout and stderr open and sleeps.
	Grandchild bool `json:"grandchild,omitempty"`
	// IgnoreTerm: the fake (and its grandchild) ignore SIGTERM.
	IgnoreTerm bool `json:"ignore_term,omitempty"`
	// TermExit, if not 0: on SIGTERM the fake writes to stderr and exits
	// with this status, as a CLI that treats the signal as a failure.
	TermExit int `json:"term_exit,omitempty"`
	// Record is a file the fake writes its Record to before any output.
	Record string `json:"record,omitempty"`
	// FileEnv names environment variables that hold the path of a file
	// the CLI reads at start (a settings file the adapter writes): the
	// record keeps each file's content (Record.Files).
	FileEnv []string `json:"file_env,omitempty"`
}

// Record is what the fake saw, written as JSON to Fake.Record.
type Record struct {
	Argv []string          `json:"argv"`
	Cwd  string            `json:"cwd"`
	Env  map[string]string `json:"env"`
	// StdinDevNull: stdin was the null device.
	StdinDevNull bool `json:"stdin_devnull"`
	// Files holds, by variable of Fake.FileEnv that is set, the content
	// of the file it names, or "unreadable: <error>".
	Files      map[string]string `json:"files,omitempty"`
	Pid        int               `json:"pid"`
	Grandchild int               `json:"grandchild,omitempty"`
}

// Replaying returns the Fake that replays the capture at the path prefix
// base (testdata/cli/<cli>/<name>): base.stdout.ndjson on stdout,
// base.stderr.txt, if present, on stderr, and the status of base.exit,
// if present.
func Replaying(t testing.TB, base string) Fake {
	t.Helper()
	f := Fake{Stdout: base + ".stdout.ndjson"}
	if _, err := os.Stat(base + ".stderr.txt"); err == nil {
		f.Stderr = base + ".stderr.txt"
	}
	if b, err := os.ReadFile(base + ".exit"); err == nil {
		code, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s.exit: %v", base, err)
		}
		f.Exit = code
	}
	return f
}

// Play returns cfg with this test binary as its Binary, acting as f, and
// the path of the Record the fake will write (f.Record, or a new file in
// t.TempDir()). The test binary's TestMain must call FakeMain first.
func (f Fake) Play(t testing.TB, cfg cli.Config) (cli.Config, string) {
	t.Helper()
	if f.Record == "" {
		f.Record = filepath.Join(t.TempDir(), "record.json")
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	cfg = cloneConfig(cfg)
	cfg.Binary = executable(t)
	cfg.EnvSet[FakeEnv] = string(b)
	// The race runtime would otherwise sleep a second at each exit.
	cfg.EnvSet["GORACE"] = "atexit_sleep_ms=0"
	return cfg, f.Record
}

// ReadRecord returns the Record the fake wrote at path, or nil if the fake
// never started.
func ReadRecord(t testing.TB, path string) *Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("the fake's record: %v", err)
	}
	return &r
}

// FakeMain runs this process as the fake CLI (FakeEnv set) or as the
// fake's grandchild, and then reports ok with the exit code; otherwise it
// returns at once with ok false. Call it first thing in TestMain:
//
//	if code, ok := conformance.FakeMain(); ok {
//		os.Exit(code)
//	}
func FakeMain() (code int, ok bool) {
	if v := os.Getenv(grandchildEnv); v != "" {
		return grandchild(v), true
	}
	v := os.Getenv(FakeEnv)
	if v == "" {
		return 0, false
	}
	var f Fake
	if err := json.Unmarshal([]byte(v), &f); err != nil {
		fmt.Fprintln(os.Stderr, "fake cli: bad", FakeEnv+":", err)
		return 2, true
	}
	return f.run(), true
}

func (f Fake) run() int {
	switch {
	case f.IgnoreTerm:
		signal.Ignore(syscall.SIGTERM)
	case f.TermExit != 0:
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		go func() {
			<-sig
			fmt.Fprintln(os.Stderr, "fake cli: terminated by SIGTERM; failing with status", f.TermExit)
			os.Exit(f.TermExit)
		}()
	}
	wd, _ := os.Getwd()
	rec := Record{Argv: os.Args[1:], Cwd: wd, Env: map[string]string{}, Pid: os.Getpid()}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		rec.Env[k] = v
	}
	if in, err := os.Stdin.Stat(); err == nil {
		if null, err := os.Stat(os.DevNull); err == nil {
			rec.StdinDevNull = os.SameFile(in, null)
		}
	}
	for _, k := range f.FileEnv {
		if os.Getenv(k) == "" {
			continue
		}
		if rec.Files == nil {
			rec.Files = map[string]string{}
		}
		if b, err := os.ReadFile(os.Getenv(k)); err != nil {
			rec.Files[k] = "unreadable: " + err.Error()
		} else {
			rec.Files[k] = string(b)
		}
	}
	if err := f.writeRecord(rec); err != nil {
		fmt.Fprintln(os.Stderr, "fake cli: record:", err)
		return 2
	}
	if f.Grandchild {
		pid, err := startGrandchild(f.IgnoreTerm)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake cli: grandchild:", err)
			return 2
		}
		rec.Grandchild = pid
		if err := f.writeRecord(rec); err != nil {
			fmt.Fprintln(os.Stderr, "fake cli: record:", err)
			return 2
		}
	}
	if f.Stderr != "" {
		b, err := os.ReadFile(f.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake cli:", err)
			return 2
		}
		os.Stderr.Write(b)
	}
	var out []byte
	if f.Stdout != "" {
		var err error
		if out, err = os.ReadFile(f.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "fake cli:", err)
			return 2
		}
	}
	segs := segments(out, f.Write)
	if f.Tail != "" {
		segs = append(segs, []byte(f.Tail))
	}
	filler := newFiller(f.StderrBytes, len(segs))
	for _, s := range segs {
		if err := filler.next(); err != nil {
			return 4 // stderr was not drained to the end: visible as a failing exit
		}
		if _, err := os.Stdout.Write(s); err != nil {
			return 3 // the reader went away
		}
		if f.Write == WriteSplit {
			time.Sleep(50 * time.Microsecond) // let the reader see each piece on its own
		}
	}
	if err := filler.rest(); err != nil {
		return 4
	}
	if f.Hang {
		time.Sleep(time.Hour)
	}
	return f.Exit
}

// writeRecord replaces the record file at once (write, then rename), so a
// reader never sees half of it.
func (f Fake) writeRecord(rec Record) error {
	if f.Record == "" {
		return nil
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := f.Record + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, f.Record)
}

// segments cuts out into the writes of mode.
func segments(out []byte, mode string) [][]byte {
	var lines [][]byte
	for l := range bytes.SplitAfterSeq(out, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, l)
		}
	}
	switch mode {
	case WriteConcat:
		var b []byte
		for _, l := range lines {
			b = append(b, bytes.TrimRight(l, "\r\n")...)
		}
		return [][]byte{b}
	case WriteSplit:
		r := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
		all := bytes.Join(lines, nil)
		var segs [][]byte
		for len(all) > 0 {
			n := min(1+r.IntN(16), len(all))
			segs = append(segs, all[:n])
			all = all[n:]
		}
		return segs
	}
	return lines
}

// filler spreads n bytes of stderr over the stdout writes.
type filler struct {
	left, per int64
	buf       []byte
}

func newFiller(n int64, writes int) *filler {
	f := &filler{left: n}
	if n > 0 {
		f.per = n / int64(max(writes, 1))
		line := []byte("fake cli: a diagnostic line that nobody reads, repeated to fill the pipe\n")
		f.buf = bytes.Repeat(line, (64<<10)/len(line))
	}
	return f
}

// next writes this write's share of the filler.
func (f *filler) next() error { return f.write(min(f.per, f.left)) }

// rest writes what is left.
func (f *filler) rest() error { return f.write(f.left) }

func (f *filler) write(n int64) error {
	f.left -= n
	for n > 0 {
		k := min(n, int64(len(f.buf)))
		if _, err := os.Stderr.Write(f.buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// startGrandchild starts this binary again as a grandchild in the fake's
// process group, holding stdout and stderr as a tool subprocess would, and
// returns its pid once it has set up its signals.
func startGrandchild(ignoreTerm bool) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer ready.Close()
	mode := grandchildPlain
	if ignoreTerm {
		mode = grandchildIgnoreTerm
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), grandchildEnv+"="+mode)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{readyW} // fd 3
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return 0, err
	}
	// The fake never waits for it: when the fake ends, the grandchild is
	// an orphan that only the group teardown can end.
	if _, err := ready.Read(make([]byte, 1)); err != nil {
		return 0, fmt.Errorf("grandchild %d never became ready: %v", cmd.Process.Pid, err)
	}
	return cmd.Process.Pid, nil
}

func grandchild(mode string) int {
	if mode == grandchildIgnoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	ready := os.NewFile(3, "ready")
	ready.Write([]byte{1})
	ready.Close()
	time.Sleep(time.Hour)
	return 0
}
