package codex

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// The test binary doubles as the codex CLI: with FAKE_CODEX=1 in its
// environment it records how it was started, replays a transcript's stdout
// and stderr and exits with the transcript's status.
const (
	envFake   = "FAKE_CODEX"
	envStdout = "FAKE_CODEX_STDOUT"
	envStderr = "FAKE_CODEX_STDERR"
	envExit   = "FAKE_CODEX_EXIT"
	envRecord = "FAKE_CODEX_RECORD"
)

// record is what the fake CLI saw.
type record struct {
	Args         []string `json:"args"`
	Cwd          string   `json:"cwd"`
	Env          []string `json:"env"`
	StdinDevNull bool     `json:"stdin_devnull"`
}

func TestMain(m *testing.M) {
	if os.Getenv(envFake) == "1" {
		os.Exit(fakeCodex())
	}
	goleak.VerifyTestMain(m)
}

func fakeCodex() int {
	if p := os.Getenv(envRecord); p != "" {
		cwd, _ := os.Getwd()
		rec := record{Args: os.Args[1:], Cwd: cwd, Env: os.Environ()}
		if in, err := os.Stdin.Stat(); err == nil {
			if null, err := os.Stat(os.DevNull); err == nil {
				rec.StdinDevNull = os.SameFile(in, null)
			}
		}
		b, _ := json.Marshal(rec)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return 99
		}
	}
	if p := os.Getenv(envStderr); p != "" {
		if b, err := os.ReadFile(p); err == nil {
			os.Stderr.Write(b)
		}
	}
	if p := os.Getenv(envStdout); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return 98
		}
		os.Stdout.Write(b)
	}
	code, _ := strconv.Atoi(strings.TrimSpace(os.Getenv(envExit)))
	return code
}
