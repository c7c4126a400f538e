package profile_test

import (
	"context"
	"errors"
	"iter"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// fake is an adapter that only declares: capabilities, and optionally
// token classes and a priced-context bound.
type fake struct {
	name string
	caps wire.Capabilities
}

func (f fake) Name() string                    { return f.name }
func (f fake) Capabilities() wire.Capabilities { return f.caps }
func (f fake) RuntimeKeys() []string           { return nil }
func (f fake) Validate([]byte) (any, error)    { return nil, nil }
func (f fake) Stream(context.Context, adapter.Call) iter.Seq2[wire.Chunk, error] {
	return func(func(wire.Chunk, error) bool) {}
}

type fakeClasses struct {
	fake
	classes []string
}

func (f fakeClasses) TokenClasses() []string { return f.classes }

type fakeBounded struct {
	fakeClasses
	max int
}

func (f fakeBounded) MaxPricedContext() int { return f.max }

func fakeAdapters(t *testing.T) *adapter.Registry {
	t.Helper()
	reg, err := adapter.NewRegistry(
		// "cli": resumable, tool events, usage of every class.
		fakeClasses{fake{"cli", wire.Capabilities{Transport: wire.TransportSubprocess, Resumable: true, ResumeField: "resume", EmitsToolEvents: true, ReportsUsage: true}},
			[]string{"input", "output", "cache_read", "cache_write", "reasoning"}},
		// "api": remote, usage without cache writes, one price up to 1000 tokens.
		fakeBounded{fakeClasses{fake{"api", wire.Capabilities{Transport: wire.TransportRemote, EmitsToolEvents: true, ReportsUsage: true}},
			[]string{"input", "output", "cache_read", "reasoning"}}, 1000},
		// "agent": remote, no usage, no token classes.
		fake{"agent", wire.Capabilities{Transport: wire.TransportRemote}},
		// "mute": reports usage but declares no token classes (a bug).
		fake{"mute", wire.Capabilities{Transport: wire.TransportInProcess, ReportsUsage: true}},
		// "liar": declares token classes while reporting no usage (a bug).
		fakeClasses{fake{"liar", wire.Capabilities{Transport: wire.TransportInProcess}}, []string{"input"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

const (
	cliProfile = `schema: 1
name: c
adapter: cli
transport: subprocess
model: c-1
binary: cli
install_hint: install cli
pricing: {input: "3", output: "15", cache_read: "0.3", cache_write: "3.75", reasoning: "15"}
`
	apiProfile = `schema: 1
name: a
adapter: api
transport: remote
model: a-1
base_url: https://api.example.com/v1
context_window: 1000
pricing: {input: "1", output: "2", cache_read: "0.1", reasoning: "2"}
`
	agentProfile = `schema: 1
name: g
adapter: agent
transport: remote
model: g-1
base_url: https://agent.example.com/nlip
`
)

// TestCheckAdapters has one case per problem found against the adapters:
// each is ErrInvalid naming the file and the field.
func TestCheckAdapters(t *testing.T) {
	tests := []struct {
		name            string
		in              string // the profile, in x.yaml
		wantField, want string // "" wantField: no error
	}{
		{name: "cli as declared", in: cliProfile},
		{name: "cli restating its capabilities", in: cliProfile + "capabilities: {resumable: true, resume_field: resume, emits_tool_events: true, reports_usage: true}\n"},
		{name: "api at its priced context", in: apiProfile + "capabilities: {emits_tool_events: true, reports_usage: true}\n"},
		{name: "agent without usage needs no price", in: agentProfile},
		{name: "agent with prices it never uses", in: agentProfile + "pricing: {input: \"0\"}\n"},
		{name: "zero is a price", in: strings.Replace(cliProfile, `reasoning: "15"`, `reasoning: "0"`, 1)},

		{name: "unknown adapter", in: strings.Replace(agentProfile, "adapter: agent", "adapter: nope", 1),
			wantField: "adapter", want: `no adapter "nope"`},
		{name: "transport contradicts", in: "schema: 1\nname: c\nadapter: cli\ntransport: in_process\nmodel: c-1\n" +
			"pricing: {input: \"0\", output: \"0\", cache_read: \"0\", cache_write: \"0\", reasoning: \"0\"}\n",
			wantField: "transport", want: "in_process contradicts adapter cli's declaration subprocess"},
		{name: "capabilities.resumable contradicts", in: agentProfile + "capabilities: {resumable: true, resume_field: resume}\n",
			wantField: "capabilities.resumable", want: "true contradicts adapter agent's declaration false"},
		{name: "capabilities.resume_field contradicts", in: cliProfile + "capabilities: {resumable: true, resume_field: session, emits_tool_events: true, reports_usage: true}\n",
			wantField: "capabilities.resume_field", want: `"session" contradicts adapter cli's declaration "resume"`},
		{name: "capabilities.emits_tool_events missing", in: cliProfile + "capabilities: {resumable: true, resume_field: resume, reports_usage: true}\n",
			wantField: "capabilities.emits_tool_events", want: "false contradicts adapter cli's declaration true"},
		{name: "capabilities.reports_usage contradicts", in: agentProfile + "capabilities: {reports_usage: true}\n",
			wantField: "capabilities.reports_usage", want: "contradicts"},
		{name: "pricing misses a reported class", in: strings.Replace(cliProfile, `, cache_write: "3.75"`, "", 1),
			wantField: "pricing.cache_write", want: "missing: adapter cli reports cache_write tokens"},
		{name: "pricing misses reasoning", in: strings.Replace(apiProfile, `, reasoning: "2"`, "", 1),
			wantField: "pricing.reasoning", want: "missing"},
		{name: "adapter reports usage without token classes", in: "schema: 1\nname: m\nadapter: mute\ntransport: in_process\nmodel: m-1\n",
			wantField: "pricing", want: "declares no token classes"},
		{name: "adapter declares classes without usage", in: "schema: 1\nname: l\nadapter: liar\ntransport: in_process\nmodel: l-1\n",
			wantField: "adapter", want: "reports_usage false but token classes input"},
		{name: "context_window beyond the priced context", in: strings.Replace(apiProfile, "context_window: 1000", "context_window: 1001", 1),
			wantField: "context_window", want: "1001 is beyond the 1000 tokens one price covers"},
	}
	adapters := fakeAdapters(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "x.yaml", tt.in)
			r, err := profile.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			err = profile.CheckAdapters(r, adapters)
			switch {
			case tt.wantField == "" && err != nil:
				t.Fatalf("CheckAdapters = %v, want nil", err)
			case tt.wantField == "":
			case !errors.Is(err, profile.ErrInvalid) || !strings.Contains(err.Error(), filepath.Join(dir, "x.yaml")+": "+tt.wantField+": ") ||
				!strings.Contains(err.Error(), tt.want):
				t.Fatalf("CheckAdapters = %v\nwant ErrInvalid naming x.yaml, %s and %q", err, tt.wantField, tt.want)
			}
		})
	}
}

func TestCheckAdaptersReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", strings.Replace(apiProfile, "context_window: 1000", "context_window: 5000", 1)+"capabilities: {resumable: false}\n")
	write(t, dir, "c.yaml", strings.Replace(cliProfile, `output: "15", `, "", 1))
	r, err := profile.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = profile.CheckAdapters(r, fakeAdapters(t))
	for _, want := range []string{"a.yaml: context_window", "a.yaml: capabilities.emits_tool_events", "a.yaml: capabilities.reports_usage", "c.yaml: pricing.output"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckAdapters = %v, want a problem %q among all of them", err, want)
		}
	}
}

func TestCheckAdaptersNamesAProfileBuiltInCode(t *testing.T) {
	r, err := profile.New(profile.Profile{Name: "p", Adapter: "api", Transport: wire.TransportRemote, Model: "m",
		BaseURL: "https://api.example.com", Pricing: map[string]string{"input": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	err = profile.CheckAdapters(r, fakeAdapters(t))
	if !errors.Is(err, profile.ErrInvalid) || !strings.Contains(err.Error(), "profile p: pricing.output: missing") {
		t.Fatalf("CheckAdapters = %v, want profile p's missing output price", err)
	}
}
