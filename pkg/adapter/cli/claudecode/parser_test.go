package claudecode_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// feed runs JSON lines through a fresh parser, then End, stopping at the
// first error chunk or error as the adapter does.
func feed(t *testing.T, lines ...string) ([]wire.Chunk, error) {
	t.Helper()
	p := claudecode.NewParser()
	var out []wire.Chunk
	add := func(cs []wire.Chunk) bool {
		for _, c := range cs {
			out = append(out, c)
			if c.Type == wire.ChunkError {
				return false
			}
		}
		return true
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("bad test line %s: %v", l, err)
		}
		cs, err := p.Event(m)
		if !add(cs) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
	cs, err := p.End()
	add(cs)
	return out, err
}

// brief renders chunks as "type[:content]" for compact expectations.
func brief(chunks []wire.Chunk) string {
	var parts []string
	for _, c := range chunks {
		s := string(c.Type)
		switch {
		case c.Type == wire.ChunkError:
			s += ":" + string(c.Metadata.ErrorClass)
		case c.Type == wire.ChunkSystem:
			s += ":" + c.Metadata.SessionID
		case c.Type == wire.ChunkToolUse || c.Type == wire.ChunkToolResult:
			s += ":" + c.ToolID
		case c.Content != "":
			s += ":" + c.Content
		}
		if c.IsDelta {
			s += "+"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

const (
	initA = `{"type":"system","subtype":"init","session_id":"aaaaaaaa-0000-4000-8000-00000000000a","model":"m"}`
	textA = `{"type":"assistant","message":{"id":"m1","model":"m","content":[{"type":"text","text":"Hello"}]},"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`
)

func TestParser(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    string
		wantErr wire.Class
	}{
		{
			name: "synthetic error without a result ends in the error chunk",
			in:   []string{initA, `{"type":"assistant","message":{"id":"x","model":"<synthetic>","content":[{"type":"text","text":"API Error: Request rejected (429)"}]},"error":"rate_limit","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a error:ProviderQuotaError",
		},
		{
			name: "synthetic message without an error kind is not text",
			in: []string{initA, `{"type":"assistant","message":{"id":"x","model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]},"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`,
				`{"type":"result","subtype":"success","is_error":false,"result":"No response requested.","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a result:No response requested.",
		},
		{
			name: "result text not emitted goes into the result",
			in:   []string{initA, textA, `{"type":"result","subtype":"success","is_error":false,"result":"Different","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a text:Hello result:Different",
		},
		{
			name: "result equal to the message's text blocks joined is not repeated",
			in: []string{initA, textA, `{"type":"assistant","message":{"id":"m1","model":"m","content":[{"type":"text","text":"World"}]},"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`,
				`{"type":"result","subtype":"success","is_error":false,"result":"Hello\n\nWorld","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a text:Hello text:World result",
		},
		{
			name: "max turns is a declared failure",
			in:   []string{initA, `{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["reached max turns"],"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a error:ProviderError",
		},
		{
			name: "context overflow",
			in:   []string{initA, `{"type":"result","subtype":"success","is_error":true,"api_error_status":400,"result":"Prompt is too long","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a error:ProviderContextError",
		},
		{
			name: "overloaded 529 backs off like a quota",
			in:   []string{initA, `{"type":"result","subtype":"success","is_error":true,"api_error_status":529,"result":"Overloaded","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a error:ProviderQuotaError",
		},
		{
			name: "a 502 is the model API's server failure",
			in:   []string{initA, `{"type":"result","subtype":"success","is_error":true,"api_error_status":502,"result":"API Error: 502 Bad Gateway","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a error:ProviderError",
		},
		{
			name: "a 503 is ProviderError whatever its text says",
			in:   []string{initA, `{"type":"result","subtype":"success","is_error":true,"api_error_status":503,"result":"API Error: 503 upstream overloaded; the context window is fine","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a error:ProviderError",
		},
		{
			name: "failed tool result keeps its id and is_error, and is not a failed stream",
			in: []string{initA,
				`{"type":"assistant","message":{"id":"m1","model":"m","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"false"}}]},"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`,
				`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"exit 1"}],"is_error":true}]},"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`,
				`{"type":"result","subtype":"success","is_error":false,"result":"","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a tool_use:t1 tool_result:t1 result",
		},
		{
			name: "partial deltas then the complete block add only what is missing",
			in: []string{initA,
				`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1"}},"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`,
				`{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}},"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`,
				`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}},"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`,
				textA,
				`{"type":"result","subtype":"success","is_error":false,"result":"Hello","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a text:Hel+ text:lo+ result",
		},
		{
			name: "tool input deltas are not chunks; the complete tool_use is",
			in: []string{initA,
				`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1"}},"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`,
				`{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"Bash","input":{}}},"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`,
				`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"comm"}},"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`,
				`{"type":"assistant","message":{"id":"m1","model":"m","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a tool_use:t1",
		},
		{
			name: "a changed session id is published again",
			in:   []string{initA, `{"type":"assistant","message":{"id":"m1","model":"m","content":[{"type":"text","text":"Hi"}]},"session_id":"bbbbbbbb-0000-4000-8000-00000000000b"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a system:bbbbbbbb-0000-4000-8000-00000000000b text:Hi",
		},
		{
			name: "telemetry is dropped, api_retry is a notice (a system chunk of no session)",
			in: []string{initA, `{"type":"system","subtype":"api_retry","attempt":1,"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`,
				`{"type":"system","subtype":"thinking_tokens","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`, `{"type":"tool_progress","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`,
				`{"type":"stream_event","event":{"type":"ping"},"session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want: "system:aaaaaaaa-0000-4000-8000-00000000000a system:",
		},
		{
			name: "an empty stream is a normal end",
			want: "",
		},
		{name: "unknown event type", in: []string{initA, `{"type":"assistant_v2","text":"hi"}`}, want: "system:aaaaaaaa-0000-4000-8000-00000000000a", wantErr: wire.ProviderProtocolError},
		{name: "event without a type", in: []string{`{"text":"hi"}`}, wantErr: wire.ProviderProtocolError},
		{name: "unknown system subtype", in: []string{initA, `{"type":"system","subtype":"local_command_output","content":"x"}`}, want: "system:aaaaaaaa-0000-4000-8000-00000000000a", wantErr: wire.ProviderProtocolError},
		{name: "unknown content block", in: []string{initA, `{"type":"assistant","message":{"id":"m","model":"m","content":[{"type":"image","source":{}}]}}`}, want: "system:aaaaaaaa-0000-4000-8000-00000000000a", wantErr: wire.ProviderProtocolError},
		{name: "unknown delta", in: []string{initA, `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"audio_delta"}}}`}, want: "system:aaaaaaaa-0000-4000-8000-00000000000a", wantErr: wire.ProviderProtocolError},
		{
			name:    "an id seen only in an invalid event is not published",
			in:      []string{`{"type":"assistant","message":"oops","session_id":"C"}`},
			want:    "",
			wantErr: wire.ProviderProtocolError,
		},
		{
			name:    "content after the result",
			in:      []string{initA, `{"type":"result","subtype":"success","is_error":false,"result":"x","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`, textA},
			want:    "system:aaaaaaaa-0000-4000-8000-00000000000a result:x",
			wantErr: wire.ProviderProtocolError,
		},
		{
			name:    "a second result",
			in:      []string{initA, `{"type":"result","subtype":"success","result":"x","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`, `{"type":"result","subtype":"success","result":"y","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`},
			want:    "system:aaaaaaaa-0000-4000-8000-00000000000a result:x",
			wantErr: wire.ProviderProtocolError,
		},
		{name: "tool_use without an id", in: []string{`{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","name":"Bash","input":{}}]}}`}, wantErr: wire.ProviderProtocolError},
		{name: "wrong field type", in: []string{`{"type":"result","subtype":"success","num_turns":"one"}`}, wantErr: wire.ProviderProtocolError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := feed(t, tt.in...)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if b := brief(got); b != tt.want {
				t.Errorf("chunks = %q, want %q", b, tt.want)
			}
			if err := checkInvariants(got); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestParserErrorChunkIsSafe(t *testing.T) {
	long := strings.Repeat("é", 5000)
	got, err := feed(t, initA, `{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"bad key sk-ant-api03-abcdefghijklmnop `+long+`","session_id":"aaaaaaaa-0000-4000-8000-00000000000a"}`)
	if err != nil {
		t.Fatal(err)
	}
	e := got[len(got)-1]
	if strings.Contains(e.Content, "abcdefghijklmnop") || len(e.Content) > wire.MaxErrorText {
		t.Errorf("error content not redacted or bounded: %d bytes, %q…", len(e.Content), e.Content[:40])
	}
	if !strings.HasPrefix(e.Content, "bad key") || !strings.HasSuffix(e.Content, "é") {
		t.Errorf("error content cut badly: %q…", e.Content[:40])
	}
}

func TestTailRepair(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]any // nil: not repairable
	}{
		{name: "open string value", in: `{"type":"assistant","text":"hel`, want: map[string]any{"type": "assistant", "text": "hel"}},
		{name: "dangling key", in: `{"a":1,"b`, want: map[string]any{"a": 1.0}},
		{name: "dangling colon", in: `{"a":1,"b":`, want: map[string]any{"a": 1.0}},
		{name: "dangling comma", in: `{"a":1,`, want: map[string]any{"a": 1.0}},
		{name: "open array", in: `{"a":[1,2`, want: map[string]any{"a": []any{1.0, 2.0}}},
		{name: "nested", in: `{"a":{"b":"c"`, want: map[string]any{"a": map[string]any{"b": "c"}}},
		{name: "partial escape", in: `{"a":"x\`, want: map[string]any{"a": "x"}},
		{name: "partial unicode escape", in: `{"a":"x\u00`, want: map[string]any{"a": "x"}},
		{name: "escaped quote inside", in: `{"a":"say \"hi`, want: map[string]any{"a": `say "hi`}},
		{name: "number", in: `{"n":12`, want: map[string]any{"n": 12.0}},
		{name: "half a literal", in: `{"a":"x","b":tru`, want: map[string]any{"a": "x"}},
		{name: "just the brace", in: `{`, want: map[string]any{}},
		{name: "complete", in: `{"a":1}`, want: map[string]any{"a": 1.0}},
		{name: "array", in: `[1,2`},
		{name: "scalar", in: `"abc`},
		{name: "garbage", in: `{"a" 1`},
		{name: "empty", in: ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := claudecode.TailRepair([]byte(tt.in))
			if ok != (tt.want != nil) || !reflect.DeepEqual(got, tt.want) && tt.want != nil {
				t.Errorf("TailRepair(%q) = %v, %t; want %v", tt.in, got, ok, tt.want)
			}
		})
	}
}

// TestTailRepairTranscriptLine cuts a real assistant line at every length
// and checks that whatever is repaired parses and maps without a panic.
func TestTailRepairTranscriptLine(t *testing.T) {
	lines := strings.Split(string(capture(t, "S2").Stdout), "\n")
	line := lines[2] // the tool_use event
	repaired := 0
	for n := 1; n < len(line); n++ {
		m, ok := claudecode.TailRepair([]byte(line[:n]))
		if !ok {
			continue
		}
		repaired++
		p := claudecode.NewParser()
		cs, _ := p.Event(m)
		if err := checkInvariants(cs); err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
	if repaired < len(line)/2 {
		t.Errorf("only %d of %d prefixes repaired", repaired, len(line))
	}
}
