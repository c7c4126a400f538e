package pi

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestRetryBound replays the default-retry 429 and 500 transcripts under
// several attempt policies: Pi's retry N is allowed while N <= MaxAttempts-1.
func TestRetryBound(t *testing.T) {
	tests := []struct {
		name        string
		transcript  string
		maxAttempts int
		wantSuffix  string
		wantClass   wire.Class
		wantAt      int    // index of the event that yields the error chunk
		wantEvent   string // and its type
	}{
		{name: "one attempt: no retry", transcript: "S4", maxAttempts: 1, wantSuffix: "(after 1 attempts; the run allows 1)", wantClass: wire.ProviderQuotaError, wantAt: 9, wantEvent: "auto_retry_start"},
		{name: "three attempts", transcript: "S4", maxAttempts: 3, wantSuffix: "(after 3 attempts; the run allows 3)", wantClass: wire.ProviderQuotaError, wantAt: 23, wantEvent: "auto_retry_start"},
		{name: "four attempts: pi gives up itself", transcript: "S4", maxAttempts: 4, wantSuffix: "(after 4 attempts)", wantClass: wire.ProviderQuotaError, wantAt: 30, wantEvent: "auto_retry_end"},
		{name: "unset policy is the default 3", transcript: "S5", maxAttempts: 0, wantSuffix: "(after 3 attempts; the run allows 3)", wantClass: wire.ProviderError, wantAt: 23, wantEvent: "auto_retry_start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := readEvents(t, capture(t, tt.transcript).Stdout)
			p := NewParser(adapter.Call{MaxAttempts: tt.maxAttempts})
			at := -1
			var last wire.Chunk
			for i, ev := range events {
				cs, err := p.Event(ev)
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				for _, c := range cs {
					if c.Type == wire.ChunkError {
						if at >= 0 {
							t.Fatalf("a second error chunk at event %d", i)
						}
						at, last = i, c
					}
				}
			}
			if cs, err := p.End(); len(cs) != 0 || err != nil {
				t.Errorf("End after the error chunk = %v, %v", cs, err)
			}
			if at >= 0 && events[at]["type"] != tt.wantEvent {
				t.Errorf("error chunk from a %v event, want %s", events[at]["type"], tt.wantEvent)
			}
			if at != tt.wantAt || !strings.HasSuffix(last.Content, tt.wantSuffix) || last.Metadata.ErrorClass != tt.wantClass {
				t.Errorf("error chunk at event %d: %q (%s), want at %d ending %q (%s)", at, last.Content, last.Metadata.ErrorClass, tt.wantAt, tt.wantSuffix, tt.wantClass)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		in        string
		wantClass wire.Class
		wantMsg   string
	}{
		{`401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_1"}`, wire.ProviderAuthError, "HTTP 401 authentication_error: invalid x-api-key"},
		{`403 {"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED"}}`, wire.ProviderAuthError, "HTTP 403 PERMISSION_DENIED: denied"},
		{`429 {"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, wire.ProviderQuotaError, "HTTP 429 requests: Rate limit reached"},
		{`529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, wire.ProviderQuotaError, "HTTP 529 overloaded_error: Overloaded"},
		{`500 {"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, wire.ProviderError, "HTTP 500 api_error: Internal server error"},
		{`503 upstream unavailable`, wire.ProviderError, "HTTP 503: upstream unavailable"},
		{`502 Bad Gateway`, wire.ProviderError, "HTTP 502: Bad Gateway"},
		{`503 {"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error"}}`, wire.ProviderError, "HTTP 503 server_error: The engine is currently overloaded, please try again later"},
		{`500 {"error":{"message":"context length accounting failed"}}`, wire.ProviderError, "HTTP 500: context length accounting failed"},
		{`400 status code (no body)`, wire.ProviderError, "HTTP 400: status code (no body)"},
		{`413 {"error":{"message":"request too large"}}`, wire.ProviderContextError, "HTTP 413: request too large"},
		{`400 {"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`, wire.ProviderContextError, "HTTP 400 invalid_request_error: This model's maximum context length is 8192 tokens"},
		{`Connection error.`, wire.ProviderTransportError, "Connection error."},
		{`No API key found for fake`, wire.ProviderAuthError, "No API key found for fake"},
		{`Rate limit exceeded, retry later`, wire.ProviderQuotaError, "Rate limit exceeded, retry later"},
		{`401 {"error":{"message":"bad key sk-ant-api03-abcdefghijklmnop"}}`, wire.ProviderAuthError, "HTTP 401: bad key [REDACTED]"},
		{``, wire.ProviderError, "pi reported an error without a message"},
		{`something odd`, wire.ProviderError, "something odd"},
	}
	for _, tt := range tests {
		got := describe(tt.in)
		if got.class != tt.wantClass || got.msg != tt.wantMsg {
			t.Errorf("describe(%q) = %s %q, want %s %q", tt.in, got.class, got.msg, tt.wantClass, tt.wantMsg)
		}
	}
	long := describe("500 " + strings.Repeat("x", 10*wire.MaxErrorText))
	if len(long.msg) > wire.MaxErrorText {
		t.Errorf("message of %d bytes, want at most %d", len(long.msg), wire.MaxErrorText)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		stderr string
		want   wire.Class
	}{
		{"Error: No API key found for fake.", wire.ProviderAuthError},
		{"No session found matching 'abc'", wire.ProviderProcessError},
		{"429 Too Many Requests", wire.ProviderQuotaError},
		{"", wire.ProviderProcessError},
	}
	for _, tt := range tests {
		if got := Classify(1, tt.stderr); got != tt.want {
			t.Errorf("Classify(1, %q) = %s, want %s", tt.stderr, got, tt.want)
		}
	}
}

// TestParserDeduplicatesTools: a tool call named by toolcall_end,
// message_end and tool_execution_start is announced once; its result,
// named by tool_execution_end and the toolResult message, once.
func TestParserDeduplicatesTools(t *testing.T) {
	for _, name := range []string{"S2", "S2-openai-completions"} {
		chunks, err := parsing.Replay(t, capture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		uses, results := map[string]int{}, map[string]int{}
		for _, c := range chunks {
			switch c.Type {
			case wire.ChunkToolUse:
				uses[c.ToolID]++
			case wire.ChunkToolResult:
				if uses[c.ToolID] != 1 {
					t.Errorf("%s: tool_result %s before its tool_use", name, c.ToolID)
				}
				results[c.ToolID]++
			}
		}
		if len(uses) != 1 || len(results) != 1 {
			t.Errorf("%s: tool_use %v, tool_result %v; want one of each with the same id", name, uses, results)
		}
		for id, n := range uses {
			if n != 1 || results[id] != 1 {
				t.Errorf("%s: id %s: %d tool_use, %d tool_result", name, id, n, results[id])
			}
		}
	}
}

// readEvents frames stdout as the transport does and decodes each object.
func readEvents(t testing.TB, stdout []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := ndjson.NewDecoder(bytes.NewReader(stdout))
	for {
		ev, err := dec.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}
