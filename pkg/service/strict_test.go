package service

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckEnvironment(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		want    string // the joined error, "" for none
	}{
		{name: "known", environ: []string{"AGENTMESH_LEASE_TTL=3s", "AGENTMESH_NATS_CREDS=/x", "AGENT_ARTIFACT_ROOT=/y", "AGENTMESH_TENANT=acme"}},
		{name: "another service's", environ: []string{"AGENTMESH_ROUTER_WORKERS=4", "AGENTMESH_RUNNER_ADAPTERS=fixture", "AGENTMESH_EXPORTER_WORKERS=1"}},
		{name: "the spec's own", environ: []string{"AGENTMESH_TEST_WORKERS=1", "AGENTMESH_SVC_EXTRA=1"}, want: ""},
		{name: "not ours", environ: []string{"ANTHROPIC_API_KEY=k", "OPENAI_BASE_URL=u", "PI_CODING_AGENT_DIR=d", "AGENTMESHX=1", "AGENT=1", "PATH=/bin"}},
		{name: "tests' and harness", environ: []string{"AGENTMESH_TEST_AS_MAIN=1", "AGENTMESH_CHAOS_TRIALS=3"}},
		{name: "transposed", environ: []string{"AGENTMESH_LEASE_TLL=3s"},
			want: "config: AGENTMESH_LEASE_TLL: unknown variable; nothing in this build reads it (did you mean AGENTMESH_LEASE_TTL?)"},
		{name: "letter missing", environ: []string{"AGENT_TRAJECTORY_EXPORT_ENABLE=1"}, want: "(did you mean AGENT_TRAJECTORY_EXPORT_ENABLED?)"},
		{name: "underscore missing", environ: []string{"AGENTMESH_NATSURL=nats://x"}, want: "(did you mean AGENTMESH_NATS_URL?)"},
		{name: "the spec's own near", environ: []string{"AGENTMESH_SVC_EXTAR=1"}, want: "(did you mean AGENTMESH_SVC_EXTRA?)"},
		{name: "nothing near", environ: []string{"AGENTMESH_BUDGET=10"}, want: "config: AGENTMESH_BUDGET: unknown variable; nothing in this build reads it"},
		{name: "empty value", environ: []string{"AGENTMESH_LOGLEVEL="}, want: "AGENTMESH_LOGLEVEL: unknown variable; nothing in this build reads it (did you mean AGENTMESH_LOG_LEVEL?)"},
		{name: "every one", environ: []string{"AGENTMESH_LEASE_TLL=3s", "HOME=/h", "AGENTMESH_BUDGET=10"},
			want: "config: AGENTMESH_LEASE_TLL: unknown variable; nothing in this build reads it (did you mean AGENTMESH_LEASE_TTL?)\nconfig: AGENTMESH_BUDGET: unknown variable; nothing in this build reads it"},
	}
	type svc struct {
		Config
		Test  testComponent `split_words:"true"`
		Extra string        `envconfig:"SVC_EXTRA"`
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckEnvironment(tt.environ, &svc{})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("CheckEnvironment = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("CheckEnvironment = %v, want an error holding %q", err, tt.want)
			case err != nil:
				var uv *UnknownVariableError
				if !errors.Is(err, ErrConfig) || !errors.As(err, &uv) {
					t.Fatalf("CheckEnvironment = %v, want an *UnknownVariableError matching ErrConfig", err)
				}
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "ab", 2}, {"TTL", "TLL", 1}, {"TTL", "TLT", 1},
		{"abc", "acb", 1}, {"kitten", "sitting", 3}, {"NATS_URL", "NATSURL", 1}, {"ca", "abc", 3},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestKnownVariablesAreApart: no two known names are within the
// suggestion distance, so a suggestion is never a coin toss between two.
func TestKnownVariablesAreApart(t *testing.T) {
	all := append(append([]string{}, KnownVariables...), HarnessVariables...)
	seen := map[string]bool{}
	for i, a := range all {
		if seen[a] {
			t.Errorf("%s is listed twice", a)
		}
		seen[a] = true
		for _, b := range all[i+1:] {
			if d := editDistance(a, b); d < 3 && a != b {
				t.Errorf("%s and %s are %d edits apart", a, b, d)
			}
		}
	}
}
