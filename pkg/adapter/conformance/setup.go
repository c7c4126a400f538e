package conformance

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main is the TestMain of an adapter's tests: it runs the binary as the
// fake CLI when the suite started it as one (FakeMain), and otherwise runs
// the tests under Setup, failing on a goroutine left behind (goleak).
//
//	func TestMain(m *testing.M) { conformance.Main(m) }
func Main(m *testing.M) {
	if code, ok := FakeMain(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(Setup(m))
}

// TestingM is what TestMain runs: *testing.M, and what goleak.VerifyTestMain takes.
type TestingM interface{ Run() int }

// Setup wraps m so that the run happens in the environment the suite
// needs: SecretEnv set, standing for the runner's own secrets that no
// child may see, and XDG_CACHE_HOME pointing at a temporary directory that
// is removed afterwards, so that adapters keeping files in the user cache
// directory (Gemini CLI's retry settings) leave nothing behind. Use it as
//
//	goleak.VerifyTestMain(conformance.Setup(m))
func Setup(m TestingM) TestingM { return setup{m} }

type setup struct{ m TestingM }

func (s setup) Run() int {
	cache, err := os.MkdirTemp("", "agentmesh-conformance-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance: cache dir:", err)
		return 2
	}
	defer os.RemoveAll(cache)
	for k, v := range map[string]string{
		"XDG_CACHE_HOME": cache,
		SecretEnv:        "nats-user-creds-that-must-stay-in-the-runner",
	} {
		if err := os.Setenv(k, v); err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			return 2
		}
	}
	return s.m.Run()
}
