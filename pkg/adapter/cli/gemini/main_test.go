package gemini

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// The test binary doubles as the gemini CLI (conformance.FakeMain).
func TestMain(m *testing.M) {
	if code, ok := conformance.FakeMain(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(conformance.Setup(m))
}
