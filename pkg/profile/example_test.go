package profile_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/profile"
)

// Load a profiles directory and resolve what clients name in a run
// request: a profile name, an alias, or provider/model. Each gives the
// same pin.
func ExampleLoad() {
	dir, _ := os.MkdirTemp("", "profiles")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "fixture.yaml"), []byte(`schema: 1
name: fixture
adapter: fixture
transport: in_process
model: fixture-1
aliases: [offline]
pricing: {input: "0", output: "0.50"}
policy: {max_attempts: 2}
`), 0o600)

	profiles, err := profile.Load(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range []string{"fixture", "offline", "fixture/fixture-1", "fixture/fixture-2"} {
		p, pin, err := profiles.Resolve(name)
		if err != nil {
			fmt.Println(name, "→", errors.Is(err, profile.ErrUnknown), err)
			continue
		}
		prefix, _, _ := strings.Cut(pin.RegistryVersion, ":")
		fmt.Println(name, "→", p.Name, pin.Provider, pin.Model, "output at", pin.Pricing["output"], "registry", prefix+":…", "attempts", p.Policy.MaxAttempts)
	}
	// Output:
	// fixture → fixture fixture fixture-1 output at 0.50 registry fixture:… attempts 2
	// offline → fixture fixture fixture-1 output at 0.50 registry fixture:… attempts 2
	// fixture/fixture-1 → fixture fixture fixture-1 output at 0.50 registry fixture:… attempts 2
	// fixture/fixture-2 → true unknown profile: "fixture/fixture-2"
}

// A profile is loaded strictly: every problem is reported at once,
// naming the file and the field, before any adapter is used.
func ExampleLoad_invalid() {
	dir, _ := os.MkdirTemp("", "profiles")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(`{schema: 1, name: bad, adapter: fixture, transport: in_process,
  model: fixture-1, pricing: {input: "free", output: "0"}, policy: {max_attempts: 0}}`), 0o600)

	_, err := profile.Load(dir)
	fmt.Println(errors.Is(err, profile.ErrInvalid))
	fmt.Println(strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), ""))
	// Output:
	// true
	// invalid profile: bad.yaml: pricing.input: "free" is not a non-negative decimal
	// invalid profile: bad.yaml: policy.max_attempts: must be > 0, got 0
}
