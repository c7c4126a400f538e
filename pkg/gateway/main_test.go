package gateway_test

import (
	"os"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/acp/acpfake"
	"go.uber.org/goleak"
)

// acpFakeEnv makes this test binary the fake ACP agent (acpfake) that the
// session tests' profile runs.
const acpFakeEnv = "AGENTMESH_TEST_ACP_FAKE"

func TestMain(m *testing.M) {
	if os.Getenv(acpFakeEnv) != "" {
		acpfake.Main()
	}
	goleak.VerifyTestMain(m)
}
