package argv_test

import (
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/argv"
)

type req struct {
	Model   string   `cli:"--model"`
	Verbose bool     `cli:"--verbose"`
	Turns   int      `cli:"--max-turns"`
	Dirs    []string `cli:"--add-dir"`
	Tools   []string `cli:"--tools,join=,"`
	Mode    string   `cli:"--mode,always"`
	Prompt  string   // positional: no tag
	Skip    string   `cli:"-"`
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name string
		in   req
		want []string
	}{
		{"zero", req{}, []string{"--mode", ""}},
		{"all", req{Model: "m; rm -rf /", Verbose: true, Turns: 3, Dirs: []string{"a b", "c"}, Tools: []string{"x", "y"}, Mode: "json", Prompt: "p", Skip: "s"},
			[]string{"--model", "m; rm -rf /", "--verbose", "--max-turns", "3", "--add-dir", "a b", "--add-dir", "c", "--tools", "x,y", "--mode", "json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := argv.Build(&tt.in); !slices.Equal(got, tt.want) {
				t.Fatalf("Build = %q, want %q", got, tt.want)
			}
		})
	}
}
