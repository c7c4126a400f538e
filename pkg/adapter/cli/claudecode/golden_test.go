package claudecode_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// parsing runs the Claude Code parser without a process, a cut-off final
// line through TailRepair.
var parsing = conformance.Parsing{
	Name:         claudecode.Name,
	Binary:       claudecode.Binary,
	Capabilities: claudecode.Capabilities,
	NewParser:    func(testing.TB, conformance.Case) cli.Parser { return claudecode.NewParser() },
	Classify:     claudecode.Classify,
	TailRepair:   claudecode.TailRepair,
}

// TestGolden replays every capture through the framing and the parser and
// compares the normalized stream with
// testdata/normalize/claude-code/<case>/want.jsonl (-update rewrites them).
func TestGolden(t *testing.T) { conformance.Golden(t, parsing) }

// transcripts returns the names of the captured runs (S1, S2-no-allowedTools, …).
func transcripts(t testing.TB) []string {
	t.Helper()
	var names []string
	for _, c := range conformance.Cases(t, claudecode.Name) {
		names = append(names, c.Name)
	}
	return names
}

// capture returns the captured run name.
func capture(t testing.TB, name string) conformance.Case {
	t.Helper()
	for _, c := range conformance.Cases(t, claudecode.Name) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no capture %s", name)
	return conformance.Case{}
}

// readGolden returns the golden stream of the capture name.
func readGolden(t testing.TB, name string) ([]wire.Chunk, *conformance.End) {
	t.Helper()
	return conformance.ReadGolden(t, wantPath(t, name))
}

func wantPath(t testing.TB, name string) string {
	return filepath.Join(conformance.Testdata(t, "normalize", claudecode.Name, name), "want.jsonl")
}

// TestGoldenSemantics states, per scenario, what the goldens must show, so
// an -update cannot silently bless a wrong stream.
func TestGoldenSemantics(t *testing.T) {
	type want struct {
		types      string     // chunk types in order, space-separated
		errorClass wire.Class // of the error chunk, if any
		end        wire.Class // terminal error class, "" for a clean end
	}
	cases := map[string]want{
		"S1":                             {types: "system text result"},
		"S1-resume":                      {types: "system text result"},
		"S1-system-prompt":               {types: "system text result"},
		"S1-output-json":                 {end: wire.ProviderProtocolError},
		"S1-skip-permissions-as-root":    {end: wire.ProviderProcessError},
		"S2":                             {types: "system text tool_use tool_result text result"},
		"S2-no-allowedTools":             {types: "system text tool_use tool_result text result"},
		"S2-skip-permissions-IS_SANDBOX": {types: "system text tool_use tool_result text result"},
		"S3":                             {types: "system system system system system system system system system system system error", errorClass: wire.ProviderAuthError}, // ten retry notices
		"S3-noretry":                     {types: "system error", errorClass: wire.ProviderAuthError},
		"S4":                             {types: "system system system system system system system system system system system error", errorClass: wire.ProviderQuotaError}, // ten retry notices
		"S4-noretry":                     {types: "system error", errorClass: wire.ProviderQuotaError},
		"S5":                             {types: "system system system system system system system system system system system error", errorClass: wire.ProviderError}, // ten retry notices
		"S5-noretry":                     {types: "system error", errorClass: wire.ProviderError},
		"S6":                             {types: "system thinking text result"},
		"S6-partial":                     {types: "system thinking thinking text text result"},
	}
	names := transcripts(t)
	if len(names) != len(cases) {
		t.Errorf("%d transcripts, %d expectations: add the new case here", len(names), len(cases))
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			w, ok := cases[name]
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			chunks, e := readGolden(t, name)
			var types []string
			for _, c := range chunks {
				types = append(types, string(c.Type))
				switch c.Type {
				case wire.ChunkError:
					if c.Metadata.ErrorClass != w.errorClass {
						t.Errorf("error class = %q, want %q", c.Metadata.ErrorClass, w.errorClass)
					}
					if c.Content == "" || strings.Contains(c.Content, "sk-ant") {
						t.Errorf("error content %q is not a safe message", c.Content)
					}
				case wire.ChunkResult:
					if c.Content != "" {
						t.Errorf("result content %q repeats emitted text", c.Content)
					}
					if u := c.Metadata.Usage; u == nil || u.InputTokens == 0 || u.OutputTokens == 0 {
						t.Errorf("result usage = %+v", u)
					}
					if c.Metadata.TotalCostUSD == nil || c.Metadata.NumTurns == nil || c.Metadata.DurationMS == nil {
						t.Errorf("result metadata lacks cost, turns or duration: %+v", c.Metadata)
					}
				case wire.ChunkText:
					if strings.Contains(c.Content, "API Error") || strings.Contains(c.Content, "Invalid API key") {
						t.Errorf("synthetic error text emitted as text: %q", c.Content)
					}
				}
			}
			if got := strings.Join(types, " "); got != w.types {
				t.Errorf("types = %q, want %q", got, w.types)
			}
			var gotEnd wire.Class
			if e != nil {
				gotEnd = e.Class
			}
			if gotEnd != w.end {
				t.Errorf("end = %q, want %q", gotEnd, w.end)
			}
			if len(chunks) > 0 {
				sys := chunks[0]
				if sys.Type != wire.ChunkSystem || sys.Metadata.SessionID == "" || sys.Metadata.Provider != claudecode.Name ||
					sys.Metadata.Model != "claude-sonnet-4-5" || sys.Metadata.Capabilities == nil || sys.Content != "" {
					t.Errorf("first chunk %+v is not the init system chunk", sys)
				}
			}
		})
	}
}

// TestGoldenToolRoundTrip checks S2's tool_use and tool_result pair.
func TestGoldenToolRoundTrip(t *testing.T) {
	chunks, _ := readGolden(t, "S2")
	var use, res *wire.Chunk
	for i := range chunks {
		switch chunks[i].Type {
		case wire.ChunkToolUse:
			use = &chunks[i]
		case wire.ChunkToolResult:
			res = &chunks[i]
		}
	}
	if use == nil || res == nil {
		t.Fatalf("S2 lacks tool_use or tool_result: %+v", chunks)
	}
	if use.ToolID == "" || use.ToolID != res.ToolID || use.ToolName != "Bash" || res.ToolName != "Bash" {
		t.Errorf("tool ids/names: use %q/%q, result %q/%q", use.ToolID, use.ToolName, res.ToolID, res.ToolName)
	}
	if got := use.ToolInput["command"]; got != "echo hello-from-tool" {
		t.Errorf("tool input command = %v", got)
	}
	if res.ToolOutput != "hello-from-tool" || res.IsError {
		t.Errorf("tool result = %v, is_error %t", res.ToolOutput, res.IsError)
	}
}

// checkInvariants reports the stream rules a stream of the parser breaks
// (conformance.CheckParsed).
func checkInvariants(chunks []wire.Chunk) error {
	if problems := conformance.CheckParsed(claudecode.Capabilities, chunks, nil); len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
