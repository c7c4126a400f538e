package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/workspace"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// FakeCLIEnv, set to any non-empty value in a process's environment, makes
// the bench test binary act as the fake CLI: its TestMain calls FakeCLI
// instead of running tests.
const FakeCLIEnv = "AGENTMESH_BENCH_FAKE_CLI"

// CLIModel is the model of CLIProfile, which the adapter passes to the fake
// as --model and the fake reports back on its init line.
const CLIModel = "claude-sonnet-4-5"

// cliSession is the session id on every line the fake writes.
const cliSession = "b0b0b0b0-0000-4000-8000-000000000001"

// FakeCLI is a Claude Code CLI that answers at once: it writes to stdout, as
// fast as the pipe takes them, the stream-json lines `claude -p
// --output-format stream-json --verbose` prints for one answer (shapes as
// in testdata/cli/claude-code/S1.stdout.ndjson): a system/init line with a
// session id, then one `assistant` event per text block, then a successful
// `result`. args is the command line after the binary; its last element,
// the prompt, is the workload as "<chunks> <chunk bytes>" (see cliPrompt):
// that many assistant events of one text block of that many bytes each.
// It returns the process's exit status: 0, or 2 for a prompt it cannot
// read and 1 if stdout fails, each with a line on stderr.
func FakeCLI(args []string, stdout, stderr io.Writer) int {
	var n, size int
	if len(args) == 0 {
		fmt.Fprintln(stderr, "fake cli: no prompt")
		return 2
	}
	if _, err := fmt.Sscanf(args[len(args)-1], "%d %d", &n, &size); err != nil || n < 0 || size < 1 {
		fmt.Fprintf(stderr, "fake cli: prompt %q is not \"<chunks> <chunk bytes>\"\n", args[len(args)-1])
		return 2
	}
	model := CLIModel
	for i, a := range args[:len(args)-1] {
		if a == "--model" && i+1 < len(args)-1 {
			model = args[i+1]
		}
	}
	cwd, _ := os.Getwd()
	text := textChunk(size).Content
	// A bufio.Writer's error is sticky: Flush reports any failed Write.
	out := bufio.NewWriterSize(stdout, 64<<10)
	out.Write(cliInitLine(cwd, model))
	line, id, uuid := cliAssistantLine(model, text)
	for i := range n {
		putDigits(line[id:id+8], i)
		putDigits(line[uuid:uuid+12], i)
		out.Write(line)
	}
	out.Write(cliResultLine(text, n))
	if err := out.Flush(); err != nil {
		fmt.Fprintln(stderr, "fake cli: stdout:", err)
		return 1
	}
	return 0
}

// jsonString is s as a JSON string literal.
func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

func cliInitLine(cwd, model string) []byte {
	return fmt.Appendf(nil, `{"type":"system","subtype":"init","cwd":%s,"session_id":%s,"tools":["Bash","Edit","Read","Write"],`+
		`"mcp_servers":[],"model":%s,"permissionMode":"default","slash_commands":[],"apiKeySource":"ANTHROPIC_API_KEY",`+
		`"claude_code_version":%s,"output_style":"default","agents":[],"skills":[],"plugins":[],"uuid":"b0b0b0b0-0000-4000-8000-0000000000ff"}`+"\n",
		jsonString(cwd), jsonString(cliSession), jsonString(model), jsonString(claudecode.Version))
}

// cliAssistantLine returns one assistant event carrying text, with a
// message id and an event uuid whose counters are 8 and 12 zero digits at
// the returned offsets, for the caller to number each line in place.
func cliAssistantLine(model, text string) (line []byte, id, uuid int) {
	line = fmt.Appendf(nil, `{"type":"assistant","message":{"id":"msg_bench%s","type":"message","role":"assistant","model":%s,`+
		`"content":[{"type":"text","text":%s}],"stop_reason":null,"stop_sequence":null,`+
		`"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":16,"service_tier":"standard"},`+
		`"context_management":null},"parent_tool_use_id":null,"session_id":%s,"uuid":"b0b0b0b0-0000-4000-8000-%s"}`+"\n",
		strings.Repeat("0", 8), jsonString(model), jsonString(text), jsonString(cliSession), strings.Repeat("0", 12))
	id = bytes.Index(line, []byte(`"msg_bench`)) + len(`"msg_bench`)
	uuid = bytes.LastIndex(line, []byte(`-8000-`)) + len(`-8000-`)
	return line, id, uuid
}

func cliResultLine(text string, n int) []byte {
	return fmt.Appendf(nil, `{"type":"result","subtype":"success","is_error":false,"api_error_status":null,"duration_ms":1,"duration_api_ms":1,`+
		`"num_turns":1,"result":%s,"stop_reason":"end_turn","session_id":%s,"total_cost_usd":0,`+
		`"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":%d},"uuid":"b0b0b0b0-0000-4000-8000-0000000000fe"}`+"\n",
		jsonString(text), jsonString(cliSession), 16*n)
}

// putDigits writes n in decimal into b, right-aligned and zero-padded; the
// highest digits are lost if b is too short.
func putDigits(b []byte, n int) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
}

// cliPrompt is the prompt that makes the fake CLI emit w's chunks.
func cliPrompt(w Workload) string { return fmt.Sprintf("%d %d", w.Chunks, w.ChunkBytes) }

// cliLines is how many stdout lines the fake writes for w: init, the
// assistant events, result.
func cliLines(w Workload) int { return w.Chunks + 2 }

// CLI is the claude-code adapter (claudecode.New) with this test binary as
// its binary and FakeCLIEnv in the child's environment, so every run of it
// starts FakeCLI in a child process. It offers the two in-process sides of
// the CLI measurement; Mesh.CLIThroughput is the third. A CLI is safe for
// concurrent use, but measurements taken side by side measure each other.
type CLI struct {
	adapter *cli.Adapter[claudecode.Request]
	binary  string
	cfg     cli.Config
}

// NewCLI returns the CLI, its workspace root a temporary directory of tb.
//
// The binary is os.Executable rather than os.Args[0]: the child runs in the
// workspace root, where a relative os.Args[0] (a test binary started as
// ./bench.test) would name nothing.
func NewCLI(tb testing.TB) *CLI {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatalf("bench: executable: %v", err)
	}
	cfg := cli.Config{
		Binary:      exe,
		InstallHint: "the bench test binary: run it through go test ./bench",
		EnvSet: map[string]string{
			FakeCLIEnv: "1",
			// The race runtime sleeps a second at exit by default; a fake
			// CLI built with -race need not.
			"GORACE": "atexit_sleep_ms=0",
		},
		WorkspaceRoot: tb.TempDir(),
	}
	a, err := claudecode.New(cfg)
	if err != nil {
		tb.Fatalf("bench: claude-code adapter: %v", err)
	}
	return &CLI{adapter: a, binary: exe, cfg: cfg}
}

// Adapter is the claude-code adapter that runs the fake, for a mesh's
// registry (MeshConfig.Adapters).
func (c *CLI) Adapter() adapter.Adapter { return c.adapter }

// Profile is the subprocess profile that routes to Adapter
// (MeshConfig.Profiles), named claude-code like the adapter. Its policy is
// left at the defaults: mesh.Run takes a runner's concurrency from the
// runner's config (MeshConfig.MaxActive), not from the profile, whose
// max_active only pkg/adapter/catalog reads.
func (c *CLI) Profile() profile.Profile {
	return profile.Profile{
		Name: claudecode.Name, Adapter: claudecode.Name, Transport: wire.TransportSubprocess,
		Model: CLIModel, Binary: c.binary, InstallHint: c.cfg.InstallHint,
		Pricing: map[string]string{"input": "3", "output": "15", "cache_read": "0.30", "cache_write": "3.75"},
	}
}

// call is one attempt of a run of w as the runner would hand it to the
// adapter.
func (c *CLI) call(w Workload) adapter.Call {
	return adapter.Call{
		RunID: client.NewRunID(), Request: claudecode.Request{Prompt: cliPrompt(w)},
		Attempt: 1, Model: CLIModel, MaxAttempts: wire.DefaultMaxAttempts,
	}
}

// DirectThroughput is the baseline: it starts the fake CLI w.Runs times at
// once, with the argv, working directory and environment the adapter would
// give it (claudecode.Invoke, workspace.Resolve, proc.AllowEnv), and reads
// each one's stdout in this process with a bufio.Reader, counting newlines
// without parsing anything. It blocks until every child has been read to
// EOF and reaped, and returns the assistant lines read (w.Chunks per run;
// the init and result lines are read but not counted) and the time from
// the first start to the last EOF. A child that writes another count of
// lines or exits non-zero is an error; ctx ending kills the children.
func (c *CLI) DirectThroughput(ctx context.Context, w Workload) (Throughput, error) {
	if err := w.validate(); err != nil {
		return Throughput{}, err
	}
	call := c.call(w)
	dir, err := workspace.Resolve(c.cfg.WorkspaceRoot, "")
	if err != nil {
		return Throughput{}, err
	}
	inv, err := claudecode.Invoke(call.Request.(claudecode.Request), call, dir)
	if err != nil {
		return Throughput{}, err
	}
	set := map[string]string{}
	for _, m := range []map[string]string{c.cfg.EnvSet, inv.Env} {
		for k, v := range m {
			set[k] = v
		}
	}
	env := proc.AllowEnv(c.cfg.EnvAllow, set)
	elapsed, err := concurrently(w.Runs, func(int) error {
		lines, err := c.readDirect(ctx, dir, inv.Args, env)
		if err == nil && lines != cliLines(w) {
			err = fmt.Errorf("direct read: %d lines, want %d", lines, cliLines(w))
		}
		return err
	})
	if err != nil {
		return Throughput{}, err
	}
	return Throughput{Items: w.Runs * w.Chunks, Elapsed: elapsed}, nil
}

// readDirect runs the fake once and counts the lines of its stdout. The
// child is always waited for.
func (c *CLI) readDirect(ctx context.Context, dir string, args, env []string) (int, error) {
	cmd := exec.CommandContext(ctx, c.binary, args...)
	cmd.Dir, cmd.Env = dir, env // stdin: /dev/null, as proc gives it
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("direct read: start: %w", err)
	}
	r := bufio.NewReaderSize(out, 64<<10)
	lines := 0
	var readErr error
	for {
		_, err := r.ReadSlice('\n')
		if err == nil {
			lines++
			continue
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // a line longer than the buffer: read on to its end
		}
		if err != io.EOF {
			readErr = fmt.Errorf("direct read: stdout: %w", err)
			_ = cmd.Process.Kill()
		}
		break
	}
	if err := cmd.Wait(); err != nil && readErr == nil {
		readErr = fmt.Errorf("direct read: %w; stderr: %q", err, tail(stderr.String(), 512))
	}
	return lines, readErr
}

// ParseThroughput is the intermediate figure: w.Runs runs of the adapter
// itself at once (cli's Stream: proc.Stream's framing, child
// handling and teardown, claudecode.Parser, the chunk guard; exactly what
// a runner iterates), consumed in this process with no runner and no NATS.
// It blocks until every stream has ended, and returns the text chunks
// received (w.Chunks per run) and the time from the first start to the last
// end. A stream that fails, or yields another count of text chunks or no
// result, is an error.
func (c *CLI) ParseThroughput(ctx context.Context, w Workload) (Throughput, error) {
	if err := w.validate(); err != nil {
		return Throughput{}, err
	}
	elapsed, err := concurrently(w.Runs, func(int) error {
		call := c.call(w)
		texts, result := 0, false
		for ch, err := range c.adapter.Stream(ctx, call) {
			if err != nil {
				return fmt.Errorf("parse run %s: after %d text chunks: %w", call.RunID, texts, err)
			}
			switch ch.Type {
			case wire.ChunkText:
				texts++
			case wire.ChunkResult:
				result = true
			}
		}
		if texts != w.Chunks || !result {
			return fmt.Errorf("parse run %s: %d text chunks (want %d), result %t", call.RunID, texts, w.Chunks, result)
		}
		return nil
	})
	if err != nil {
		return Throughput{}, err
	}
	return Throughput{Items: w.Runs * w.Chunks, Elapsed: elapsed}, nil
}

// CLIThroughput submits w.Runs runs of the claude-code profile at once
// (the mesh must have been started with the CLI's Adapter and Profile),
// each making the fake CLI emit w.Chunks text chunks, and follows each
// through client.Events from its own goroutine, as Throughput does for the
// fixture. It returns the text chunks received and the time from the first
// submission to the last terminal status; a run that does not succeed
// with exactly w.Chunks text chunks is an error.
func (m *Mesh) CLIThroughput(ctx context.Context, w Workload) (Throughput, error) {
	if err := w.validate(); err != nil {
		return Throughput{}, err
	}
	req, err := wire.Marshal(&claudecode.Request{Prompt: cliPrompt(w)})
	if err != nil {
		return Throughput{}, err
	}
	return m.throughput(ctx, claudecode.Name, req, w)
}

// concurrently runs f(0) … f(n-1) each on its own goroutine and returns
// once all have returned: the time from the start to the last return and
// their errors joined.
func concurrently(n int, f func(i int) error) (time.Duration, error) {
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// tail is the last n bytes of s at most.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
