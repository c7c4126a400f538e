package claudecode_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// The test binary doubles as the claude CLI (STYLE item 9). With
// fakeCaseEnv set to a transcript's path prefix (testdata/cli/claude-code/S1)
// it writes that run's stdout and stderr verbatim and exits with its exit
// status; with fakeRecordEnv set it first writes its argv, working directory
// and environment as JSON to that file.
const (
	fakeCaseEnv   = "CLAUDECODE_FAKE_CASE"
	fakeRecordEnv = "CLAUDECODE_FAKE_RECORD"
)

// exe is the absolute path of this test binary.
var exe string

func TestMain(m *testing.M) {
	if c := os.Getenv(fakeCaseEnv); c != "" {
		os.Exit(fakeClaude(c, os.Getenv(fakeRecordEnv)))
	}
	var err error
	if exe, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, "claudecode test: executable:", err)
		os.Exit(2)
	}
	goleak.VerifyTestMain(m)
}

// record is what the fake CLI saw.
type record struct {
	Argv []string          `json:"argv"`
	Cwd  string            `json:"cwd"`
	Env  map[string]string `json:"env"`
}

func fakeClaude(base, recordPath string) int {
	if recordPath != "" {
		wd, _ := os.Getwd()
		rec := record{Argv: os.Args[1:], Cwd: wd, Env: map[string]string{}}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			rec.Env[k] = v
		}
		b, _ := json.Marshal(rec)
		if err := os.WriteFile(recordPath, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "fake claude: record:", err)
			return 2
		}
	}
	out, err := os.ReadFile(base + ".stdout.ndjson")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake claude:", err)
		return 2
	}
	errText, _ := os.ReadFile(base + ".stderr.txt")
	code, err := readExit(base)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake claude:", err)
		return 2
	}
	os.Stderr.Write(errText)
	os.Stdout.Write(out)
	return code
}

func readExit(base string) (int, error) {
	b, err := os.ReadFile(base + ".exit")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
