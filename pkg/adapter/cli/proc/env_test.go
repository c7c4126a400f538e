package proc_test

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
)

func TestAllowEnv(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin")
	t.Setenv("HOME", "/home/runner")
	t.Setenv("AGENTMESH_NATS_URL", "nats://user:secret@nats:4222")
	t.Setenv("OPENAI_API_KEY", "sk-test-other-profile")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9000")
	t.Setenv("EMPTY_BUT_SET", "")
	tests := []struct {
		name  string
		allow []string
		set   map[string]string
		want  map[string]string // entries that must be present
		out   []string          // names that must be absent
	}{
		{
			name: "base only",
			want: map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/home/runner"},
			out:  []string{"AGENTMESH_NATS_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL"},
		},
		{
			name:  "allowed names",
			allow: []string{"ANTHROPIC_BASE_URL", "EMPTY_BUT_SET", "UNSET_NAME"},
			want:  map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9000", "EMPTY_BUT_SET": ""},
			out:   []string{"UNSET_NAME", "OPENAI_API_KEY", "AGENTMESH_NATS_URL"},
		},
		{
			name:  "set wins",
			allow: []string{"ANTHROPIC_BASE_URL"},
			set:   map[string]string{"ANTHROPIC_BASE_URL": "http://proxy", "HOME": "/tmp/run", "NEW": "v=1"},
			want:  map[string]string{"ANTHROPIC_BASE_URL": "http://proxy", "HOME": "/tmp/run", "NEW": "v=1"},
		},
		{
			name: "malformed names dropped",
			set:  map[string]string{"": "x", "A=B": "y", "OK": "z"},
			want: map[string]string{"OK": "z"},
			out:  []string{"", "A"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := proc.AllowEnv(tt.allow, tt.set)
			if !sort.StringsAreSorted(env) {
				t.Errorf("not sorted: %q", env)
			}
			got := map[string]string{}
			for _, kv := range env {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					t.Errorf("malformed entry %q", kv)
				}
				if _, dup := got[k]; dup {
					t.Errorf("duplicate %s", k)
				}
				got[k] = v
			}
			for k, v := range tt.want {
				if gv, ok := got[k]; !ok || gv != v {
					t.Errorf("%s = %q (present %v), want %q", k, gv, ok, v)
				}
			}
			for _, k := range tt.out {
				if _, ok := got[k]; ok {
					t.Errorf("%s is present, want it absent", k)
				}
			}
			if again := proc.AllowEnv(tt.allow, tt.set); !reflect.DeepEqual(again, env) {
				t.Errorf("not deterministic: %q then %q", env, again)
			}
		})
	}
}

// A child's environment: only the base variables, the profile's allowed
// names and the adapter's own values reach it.
func ExampleAllowEnv() {
	env := proc.AllowEnv([]string{"ANTHROPIC_BASE_URL"}, map[string]string{"CLAUDE_CODE_ENTRYPOINT": "agentmesh"})
	for _, kv := range env {
		if kv == "CLAUDE_CODE_ENTRYPOINT=agentmesh" {
			fmt.Println(kv)
		}
	}
	// Output: CLAUDE_CODE_ENTRYPOINT=agentmesh
}
