package nlip_test

import (
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/nlip"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
)

// TestConformance runs the conformance suite over the nlip adapter, the
// agent's answers served over real loopback HTTP from testdata/remote/nlip.
func TestConformance(t *testing.T) {
	t.Parallel()
	srv := conformance.ReplayServer(t, nlip.Name)
	// The agent answers in one JSON object; the slow one sends it in two
	// pieces after its headers, so that the suite can cancel the run
	// between the system chunk and the answer.
	slow := conformance.PacedServer(t, replay.Response{Headers: map[string]string{"Content-Type": "application/json"}}, []string{
		`{"format": "text", "subformat": "english",` + "\n",
		`"content": "The answer is 42.", "submessages": [{"format": "token", "subformat": "conversation", "content": "c1"}]}` + "\n",
	}, 40*time.Millisecond)
	base := func(name string) string {
		if name == "slow" {
			return slow + "/nlip/"
		}
		return srv.URL() + "/" + name + "/nlip/"
	}
	build := func(url string) (adapter.Adapter, error) {
		return nlip.New(remote.Config{BaseURL: url, AllowLoopback: true})
	}
	fixture := func(name string) map[string]any { return map[string]any{"prompt": conformance.CasePrefix + name} }
	conformance.Run(t, conformance.Subject{
		Name: nlip.Name,
		New: func(cli.Config) (adapter.Adapter, error) {
			return conformance.PromptCased(nlip.Name, "plain-text", base, build, func(req any) string { return req.(nlip.Request).Prompt })
		},
		Model:   "travel-agent",
		Request: func(p string) map[string]any { return map[string]any{"prompt": p} },
		Streams: []conformance.Stream{
			{Name: "default"},
			{Name: "multi-part", Request: fixture("multi-part")},
			{Name: "input-required", Request: fixture("input-required")},
			{Name: "no-context", Request: fixture("no-context")},
			{Name: "empty-answer", Request: fixture("empty-answer")},
			{Name: "provider-error", Request: fixture("provider-error")},
			{Name: "cut", Request: fixture("cut")},
			{Name: "unsupported-part", Request: fixture("unsupported-part")},
			{Name: "http-401", Request: fixture("http-401")},
			{Name: "http-429", Request: fixture("http-429")},
			{Name: "http-500", Request: fixture("http-500")},
			{Name: "http-529", Request: fixture("http-529")},
		},
		Happy:        "default",
		Errors:       []string{"provider-error"},
		ServerErrors: []string{"http-500"},
		Slow:         conformance.Stream{Name: "slow", Request: fixture("slow")},
	})
}
