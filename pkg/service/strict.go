package service

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kelseyhightower/envconfig"
)

// KnownVariables are the AGENTMESH_* and AGENT_* variables this build
// reads: every service's Config (the common variables, the router's, the
// runners', the sweeper's, the exporter's), the operator's export settings
// (pkg/exports), and the agentmesh command's own. A service accepts the
// variables of every other one, not only its own, so that one environment
// (a Kubernetes ConfigMap, a shell running `agentmesh up` or several
// binaries) can serve the whole mesh. Each service's tests check that its
// Config reads nothing outside this list (servicetest.CheckSpecs).
var KnownVariables = []string{
	// service.Config, every service.
	"AGENTMESH_NATS_URL", "AGENTMESH_NATS_CREDS", "AGENTMESH_NATS_NKEY",
	"AGENTMESH_NATS_TLS_CA", "AGENTMESH_NATS_TLS_CERT", "AGENTMESH_NATS_TLS_KEY", "AGENTMESH_NATS_TLS_SERVER_NAME",
	"AGENTMESH_HTTP_ADDR", "AGENTMESH_PREFIX", "AGENTMESH_SHUTDOWN_TIMEOUT", "AGENTMESH_REPLICAS",
	"AGENTMESH_EVENTS_MAX_AGE", "AGENTMESH_WORK_QUEUE_MAX", "AGENTMESH_WORK_QUEUE_TENANT_MAX",
	"AGENTMESH_LEASE_TTL", "AGENTMESH_RUN_RETENTION", "AGENTMESH_ARTIFACT_RETENTION", "AGENTMESH_LOG_LEVEL",
	"AGENTMESH_NATS_FAILOVER_AFTER",
	// catalog.Dirs: the router, the runners, agentmesh up.
	"AGENTMESH_PROFILES_DIR", "AGENTMESH_FIXTURE_DIR", "AGENTMESH_WORKSPACE_ROOT",
	// The router.
	"AGENTMESH_ROUTER_WORKERS", "AGENTMESH_ROUTER_ACK_WAIT", "AGENTMESH_ROUTER_DEFAULT_DEADLINE", "AGENTMESH_ROUTER_MAX_DEADLINE", "AGENTMESH_ROUTER_SPEND_CACHE_TTL",
	// The runners.
	"AGENTMESH_RUNNER_ID", "AGENTMESH_RUNNER_ADAPTERS", "AGENTMESH_RUNNER_MAX_ACTIVE", "AGENTMESH_RUNNER_DEFAULT_MAX_ACTIVE",
	"AGENTMESH_RUNNER_ACK_WAIT", "AGENTMESH_RUNNER_DRAIN_TIMEOUT", "AGENTMESH_RUNNER_STATE_DIR",
	"AGENTMESH_RUNNER_GIT_ALLOW", "AGENTMESH_RUNNER_WORKSPACE_MAX_BYTES", "AGENTMESH_RUNNER_PATCH_MAX_BYTES",
	"AGENTMESH_RUNNER_ARCHIVE_MAX_BYTES",
	// The subprocess runner's sandbox.
	"AGENTMESH_SANDBOX", "AGENTMESH_SANDBOX_MEMORY", "AGENTMESH_SANDBOX_PROCS", "AGENTMESH_SANDBOX_WALL_TIME",
	"AGENTMESH_SANDBOX_CGROUP", "AGENTMESH_SANDBOX_RUNTIME_DIR", "AGENTMESH_SANDBOX_INIT", "AGENTMESH_SANDBOX_UID_BASE", "AGENTMESH_SANDBOX_UID_COUNT",
	// The sweeper.
	"AGENTMESH_SWEEPER_RECONCILE_EVERY", "AGENTMESH_SWEEPER_EXPORTS_EVERY", "AGENTMESH_SWEEPER_ARTIFACTS_EVERY",
	// The exporter.
	"AGENTMESH_EXPORTER_WORKERS", "AGENTMESH_EXPORTER_ACK_WAIT",
	// The gateway.
	"AGENTMESH_GATEWAY_ADDR", "AGENTMESH_GATEWAY_MAX_BODY_BYTES", "AGENTMESH_GATEWAY_TLS_CERT", "AGENTMESH_GATEWAY_TLS_KEY",
	"AGENTMESH_GATEWAY_CONSOLE", "AGENTMESH_GATEWAY_OPERATOR_KEYS",
	// The operator's export settings (exports.LoadSettings).
	"AGENT_TRAJECTORY_EXPORT_ENABLED", "AGENT_ARTIFACT_ROOT", "AGENT_TRAJECTORY_RETENTION",
	// The agentmesh command's client commands.
	"AGENTMESH_TENANT", "AGENTMESH_PRINCIPAL", "AGENTMESH_INBOX_PREFIX", "AGENTMESH_JS_API_PREFIX", "AGENTMESH_PROFILE",
}

// HarnessVariables are the AGENTMESH_* variables the repository's own
// tests, benchmarks and end-to-end suites read (never a service). A shell
// or make target holding one (make chaos sets AGENTMESH_CHAOS_TRIALS) may
// still start the mesh. Besides these, every AGENTMESH_TEST_* variable
// belongs to the tests (TestPrefix).
var HarnessVariables = []string{
	"AGENTMESH_CHAOS_TRIALS",
	"AGENTMESH_BENCH_FAKE_CLI", "AGENTMESH_BENCH_FOOTPRINT_PROFILES", "AGENTMESH_BENCH_NATS_SERVER", "AGENTMESH_BENCH_ACP_FAKE",
	"AGENTMESH_E2E_TAG",
	"AGENTMESH_SMOKE_OPENAI_MODEL", "AGENTMESH_SMOKE_OPENAI_URL", "AGENTMESH_SMOKE_ANTHROPIC_MODEL", "AGENTMESH_SMOKE_ANTHROPIC_URL",
	"AGENTMESH_CONFORMANCE_FAKE", "AGENTMESH_CONFORMANCE_GRANDCHILD", "AGENTMESH_CONFORMANCE_RUNNER_SECRET",
}

// TestPrefix starts the variables reserved for the repository's tests
// (AGENTMESH_TEST_AS_MAIN, a test profile's AGENTMESH_TEST_KEY_A, ...),
// which no service reads and CheckEnvironment leaves alone.
const TestPrefix = "AGENTMESH_TEST_"

// UnknownVariableError is a variable in one of agentmesh's namespaces,
// AGENTMESH_* or AGENT_*, that nothing in this build reads: a typo, or a
// setting of another version. It matches ErrConfig.
type UnknownVariableError struct {
	// Name is the variable, such as "AGENTMESH_LEASE_TLL".
	Name string
	// Suggestion is the known variable nearest to Name, such as
	// "AGENTMESH_LEASE_TTL", or "" when none is near.
	Suggestion string
}

func (e *UnknownVariableError) Error() string {
	msg := fmt.Sprintf("%v: %s: unknown variable; nothing in this build reads it", ErrConfig, e.Name)
	if e.Suggestion != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", e.Suggestion)
	}
	return msg
}

// Unwrap returns ErrConfig.
func (e *UnknownVariableError) Unwrap() error { return ErrConfig }

// CheckEnvironment checks that every AGENTMESH_* and AGENT_* variable of
// environ (os.Environ's form, "KEY=value") is one this build reads:
// KnownVariables, the variables spec reads (a pointer to a service's
// Config, or nil), HarnessVariables or a TestPrefix one. It returns an
// *UnknownVariableError for each other one, in environ's order, joined.
// Other variables (a provider's ANTHROPIC_API_KEY, PATH, ...) are never
// looked at.
func CheckEnvironment(environ []string, spec any) error {
	known := slices.Concat(KnownVariables, HarnessVariables, SpecVariables(spec))
	var bad Problems
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "AGENTMESH_") && !strings.HasPrefix(name, "AGENT_") {
			continue
		}
		if strings.HasPrefix(name, TestPrefix) || slices.Contains(known, name) {
			continue
		}
		bad = append(bad, &UnknownVariableError{Name: name, Suggestion: nearest(name, known)})
	}
	return bad.Err()
}

// SpecVariables are the variables spec (a pointer to a service's Config)
// reads with the prefix AGENTMESH, in its fields' order; none for nil.
func SpecVariables(spec any) []string {
	if spec == nil {
		return nil
	}
	var b strings.Builder
	if envconfig.Usagef("AGENTMESH", spec, &b, "{{range .}}{{.Key}}\n{{end}}") != nil {
		return nil
	}
	return strings.Fields(b.String())
}

// nearest is the known name closest to name by edit distance (insertions,
// deletions, substitutions and swaps of two neighbours each count one), if
// it is at most 2; ties go to the name first in known.
func nearest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b.
func editDistance(a, b string) int {
	// d[i][j] is the distance of a[:i] and b[:j]; three rows suffice.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
