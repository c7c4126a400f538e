package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATSServerEnv, set to a directory in a process's environment, makes the
// bench test binary a JetStream server storing there (ServeNATS) instead
// of running tests. StartServerProcess sets it.
const NATSServerEnv = "AGENTMESH_BENCH_NATS_SERVER"

// ServeNATS runs a JetStream server as natstest.RunJetStream configures
// one (a random loopback port, file storage in dir), writes its client URL
// and a newline to out, and serves until in reaches EOF or fails. It
// returns the process's exit code: 0 after a clean shutdown, 1 if the
// server did not start.
func ServeNATS(dir string, in io.Reader, out, errOut io.Writer) int {
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: dir, NoLog: true, NoSigs: true,
	})
	if err != nil {
		fmt.Fprintln(errOut, "bench nats server:", err)
		return 1
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		fmt.Fprintln(errOut, "bench nats server: not ready within 10s")
		return 1
	}
	fmt.Fprintln(out, s.ClientURL())
	_, _ = io.Copy(io.Discard, in)
	s.Shutdown()
	s.WaitForShutdown()
	return 0
}

// StartServerProcess starts the test binary as a JetStream server in a
// child process (ServeNATS, with its store in a temporary directory) and
// returns its client URL. Measurements of this process's memory then leave
// the server's out. The child is stopped (its stdin closed) and waited for
// when tb ends.
func StartServerProcess(tb testing.TB) string {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatalf("bench: server process: %v", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), NATSServerEnv+"="+tb.TempDir(), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = DefaultStopTimeout
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatalf("bench: server process: %v", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatalf("bench: server process: %v", err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("bench: server process: %v", err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			tb.Errorf("bench: server process: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("bench: server process: reading its URL: %v", err)
	}
	return strings.TrimSpace(line)
}
