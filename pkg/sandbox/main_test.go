package sandbox

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the test binary as a confined child when a test starts
// it as one (ptyChild), else the tests, checking no goroutine is left.
func TestMain(m *testing.M) {
	if os.Getenv(ptyEnv) != "" {
		os.Exit(ptyChild())
	}
	goleak.VerifyTestMain(m)
}
