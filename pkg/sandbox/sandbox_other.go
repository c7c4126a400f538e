//go:build !linux

package sandbox

import (
	"fmt"
	"os/exec"
	"runtime"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
)

// Mechanism is what Check found: how runs are confined here.
type Mechanism struct {
	Limits string
	Cgroup string
}

// Check reports that the sandbox needs Linux.
func Check(Config) (Mechanism, error) {
	return Mechanism{}, fmt.Errorf("%w: it needs Linux namespaces, and this is %s", ErrUnavailable, runtime.GOOS)
}

// Sandbox is not available off Linux.
type Sandbox struct{}

// New fails off Linux (Check).
func New(Config, Policy) (*Sandbox, error) {
	_, err := Check(Config{})
	return nil, err
}

// Egress returns nothing off Linux.
func (*Sandbox) Egress() []Endpoint { return nil }

// Confine fails off Linux.
func (*Sandbox) Confine(*exec.Cmd) (proc.Confinement, error) {
	_, err := Check(Config{})
	return nil, err
}
