package bench_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bench"
	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// BenchmarkSandboxStart times the start-up of one run of the fake Claude
// Code CLI (this test binary: start, one answer of one 64 B chunk, exit)
// through the claude-code adapter, from the call to the first text chunk,
// bare and confined to the sandbox (pkg/sandbox: the namespaces, the init
// building the view, the proxy), alternating in each iteration. The
// sandbox's init is the agentmesh-sandbox-init binary a deployment ships;
// "reexec" is the fallback where the runner (here this test binary)
// re-executes itself as the init. It reports each side's p50 and p90 in
// ms, the p50 ratios to bare, the p50 start-up overhead in ms (the target
// is at most 20 ms), and the p50 overhead of the whole run, the
// sandbox's teardown included.
func BenchmarkSandboxStart(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	root := b.TempDir()
	if err := os.Mkdir(filepath.Join(root, "ws"), 0o755); err != nil {
		b.Fatal(err)
	}
	cfg := cli.Config{Binary: exe, InstallHint: "the bench test binary", WorkspaceRoot: root,
		EnvSet: map[string]string{bench.FakeCLIEnv: "1", "GORACE": "atexit_sleep_ms=0"}}
	bare, err := claudecode.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	// confined is the adapter confined to the sandbox whose init is init
	// ("": this test binary, re-executed).
	confined := func(init string) adapter.Adapter {
		s, err := sandbox.New(sandbox.Config{Hidden: []string{root}, Limits: sandbox.Limits{Memory: 1 << 30, Procs: 256, WallTime: time.Minute},
			Init: init}, sandbox.Policy{Egress: []string{"api.anthropic.com:443"}})
		if err != nil {
			b.Fatal(err)
		}
		c := cfg
		c.Confine = s
		a, err := claudecode.New(c)
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	boxed, reexec := confined(initBinary(b)), confined("")
	// once runs the CLI and returns its start-up (the call to its first
	// text chunk) and the whole run (to the end of its stream, the
	// teardown included).
	once := func(a adapter.Adapter) (start, whole time.Duration) {
		call := adapter.Call{RunID: "bench", Request: claudecode.Request{Prompt: "1 64"}, Attempt: 1, Model: bench.CLIModel,
			MaxAttempts: wire.DefaultMaxAttempts, Runtime: map[string]any{cli.RuntimeWorkspace: "ws"}}
		began := time.Now()
		for c, err := range a.Stream(context.Background(), call) {
			if err != nil {
				b.Fatal(err)
			}
			if c.Type == wire.ChunkText && start == 0 {
				start = time.Since(began)
			}
		}
		if start == 0 {
			b.Fatal("the run gave no text")
		}
		return start, time.Since(began)
	}
	once(bare) // warm the page cache for each
	once(boxed)
	once(reexec)
	var bareS, boxedS, reexecS, bareW, boxedW []time.Duration
	for b.Loop() {
		s, w := once(bare)
		bareS, bareW = append(bareS, s), append(bareW, w)
		s, w = once(boxed)
		boxedS, boxedW = append(boxedS, s), append(boxedW, w)
		s, _ = once(reexec)
		reexecS = append(reexecS, s)
	}
	q := func(d []time.Duration, p float64) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))]) / 1e6
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(q(bareS, 0.5), "bare-p50-ms")
	b.ReportMetric(q(boxedS, 0.5), "sandbox-p50-ms")
	b.ReportMetric(q(bareS, 0.9), "bare-p90-ms")
	b.ReportMetric(q(boxedS, 0.9), "sandbox-p90-ms")
	b.ReportMetric(q(boxedS, 0.5)/q(bareS, 0.5), "sandbox/bare")
	b.ReportMetric(q(boxedS, 0.5)-q(bareS, 0.5), "overhead-p50-ms")
	b.ReportMetric(q(reexecS, 0.5), "reexec-p50-ms")
	b.ReportMetric(q(reexecS, 0.5)/q(bareS, 0.5), "reexec/bare")
	b.ReportMetric(q(boxedW, 0.5)-q(bareW, 0.5), "whole-run-overhead-p50-ms")
}

// initBinary builds cmd/agentmesh-sandbox-init for the benchmark and
// returns its path.
func initBinary(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), sandbox.InitBinary)
	build := exec.Command("go", "build", "-o", bin, "github.com/agentmesh/agentmesh/cmd/agentmesh-sandbox-init")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// BenchmarkSandboxMechanisms times starting /bin/true to its exit three
// ways, alternating in each iteration: bare, confined by this package's
// sandbox (namespaces through SysProcAttr and our init), and under
// bubblewrap with an equivalent view (every namespace unshared, the
// system read-only, a fresh /proc, /dev and /tmp), when bwrap is on
// PATH. It reports each one's p50 in ms and the ratios to bare: the
// figures behind the README's choice of mechanism.
func BenchmarkSandboxMechanisms(b *testing.B) {
	s, err := sandbox.New(sandbox.Config{Limits: sandbox.Limits{Procs: 256}, Init: initBinary(b)}, sandbox.Policy{})
	if err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
	bwrap, _ := exec.LookPath("bwrap")
	run := func(cmd *exec.Cmd, confine bool) time.Duration {
		began := time.Now()
		cmd.Dir, cmd.Env = ws, []string{"PATH=/usr/bin:/bin"}
		var c proc.Confinement
		if confine {
			if c, err = s.Confine(cmd); err != nil {
				b.Fatal(err)
			}
			defer c.Release()
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if c != nil {
			if err := c.Started(cmd.Process.Pid); err != nil {
				b.Fatal(err)
			}
		}
		if err := cmd.Wait(); err != nil {
			b.Fatalf("%v: %v", cmd.Args, err)
		}
		return time.Since(began)
	}
	bwrapArgs := []string{"--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr",
		"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", ws, ws, "--chdir", ws, "/bin/true"}
	var bare, ours, bw []time.Duration
	for b.Loop() {
		bare = append(bare, run(exec.Command("/bin/true"), false))
		ours = append(ours, run(exec.Command("/bin/true"), true))
		if bwrap != "" {
			bw = append(bw, run(exec.Command(bwrap, bwrapArgs...), false))
		}
	}
	p50 := func(d []time.Duration) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[len(d)/2]) / 1e6
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(p50(bare), "bare-p50-ms")
	b.ReportMetric(p50(ours), "sysprocattr-p50-ms")
	b.ReportMetric(p50(ours)/p50(bare), "sysprocattr/bare")
	if bwrap != "" {
		b.ReportMetric(p50(bw), "bwrap-p50-ms")
		b.ReportMetric(p50(bw)/p50(bare), "bwrap/bare")
	}
}
