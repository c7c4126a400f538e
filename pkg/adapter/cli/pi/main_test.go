package pi

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) != "" {
		os.Exit(fakePi()) // the test binary doubles as the pi CLI
	}
	goleak.VerifyTestMain(m)
}
