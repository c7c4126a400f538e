package nlip_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/nlip"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

const conv = "Yq3mN8vKp2R0sT5wXb7cLd9fHj"

// TestFixtures runs every recorded answer through the adapter over real
// loopback HTTP: the exact chunk stream, the typed terminal error and its
// retryability, whether the context reached the checkpoint, and the stream
// rules of docs/contract.md §1.3.
func TestFixtures(t *testing.T) {
	srv := conformance.ReplayServer(t, nlip.Name)
	tests := []struct {
		name     string
		want     []wire.Chunk
		wantErr  wire.Class
		wantCtx  string // the conversation token saved, "" for none
		errMatch string
	}{
		{name: "plain-text", want: []wire.Chunk{sys(), text("The answer is 42."), result("end_turn")}, wantCtx: conv},
		{name: "multi-part", want: []wire.Chunk{sys(), text("Here is the forecast.\nToronto: 21 °C, sunny.\nParis: 17 °C, cloudy."), result("end_turn")},
			wantCtx: conv},
		{name: "input-required", want: []wire.Chunk{sys(), text("I can book that flight.\n\nWhich date do you want to fly?"), result("input_required")},
			wantCtx: conv},
		{name: "no-context", want: []wire.Chunk{sys(), text("The answer is 42."), result("end_turn")}},
		{name: "empty-answer", want: []wire.Chunk{sys(), result("end_turn")}, wantCtx: conv},
		{name: "provider-error", want: []wire.Chunk{sys(), errChunk(wire.ProviderQuotaError, "nlip: 429; rate limit exceeded for this agent")}},
		{name: "cut", want: []wire.Chunk{sys()}, wantErr: wire.ProviderTransportError},
		{name: "unsupported-part", want: []wire.Chunk{sys()}, wantErr: wire.ProviderProtocolError, errMatch: "a structured part"},
		{name: "not-nlip", want: []wire.Chunk{sys()}, wantErr: wire.ProviderProtocolError, errMatch: "not a JSON object"},
		{name: "unknown-field", want: []wire.Chunk{sys()}, wantErr: wire.ProviderProtocolError, errMatch: `field "attachments" is unknown`},
		{name: "http-401", wantErr: wire.ProviderAuthError, errMatch: "Not authenticated"},
		{name: "http-429", wantErr: wire.ProviderQuotaError},
		{name: "http-500", wantErr: wire.ProviderError, errMatch: "Internal Server Error"},
		{name: "http-529", wantErr: wire.ProviderQuotaError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := run(t, newAdapter(t, srv, tt.name), "Book me a flight to Paris.", nil)
			// Retryable: a 429, 529 or 5xx answer (and connect and timeout
			// failures, not recorded here).
			o.Expect(t, nlip.Capabilities, tt.want, tt.wantErr, conformance.RetriedStatus(tt.name))
			if tt.errMatch != "" && (o.Err == nil || !strings.Contains(o.Err.Error(), tt.errMatch)) {
				t.Errorf("err = %v, want it to contain %q", o.Err, tt.errMatch)
			}
			if got := savedConversation(t, o); got != tt.wantCtx {
				t.Errorf("checkpoint conversation %q, want %q", got, tt.wantCtx)
			}
			// The context is checkpoint-only: no chunk carries it.
			if strings.Contains(conformance.ChunksJSON(o.Chunks), conv) {
				t.Errorf("the conversation token reached a chunk:\n%s", conformance.ChunksJSON(o.Chunks))
			}
		})
	}
}

func savedConversation(t *testing.T, o conformance.Outcome) string {
	t.Helper()
	if !o.Saved {
		return ""
	}
	var cp struct {
		V            int    `msgpack:"v"`
		Conversation string `msgpack:"conversation"`
	}
	if err := wire.DecodeStrict(o.Checkpoint, &cp); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if cp.V != 1 {
		t.Errorf("checkpoint v=%d", cp.V)
	}
	return cp.Conversation
}

// TestConversation runs an input_required exchange through three Stream
// calls on one conversation: the agent asks, the user's answer goes back
// with the conversation token, and a later answer without a token keeps
// the conversation's. The token is in the requests, never in a chunk.
func TestConversation(t *testing.T) {
	srv := conformance.ReplayServer(t, nlip.Name)
	a := newAdapter(t, srv, "conversation")
	first := run(t, a, "Book me a flight to Paris.", nil)
	second := run(t, a, "14 March.", first.Checkpoint)
	third := run(t, a, "Thanks!", second.Checkpoint)
	for i, o := range []conformance.Outcome{first, second, third} {
		if o.Err != nil {
			t.Fatalf("run %d: %v", i+1, o.Err)
		}
		if strings.Contains(conformance.ChunksJSON(o.Chunks), conv) {
			t.Errorf("run %d: the conversation token reached a chunk", i+1)
		}
	}
	if got, want := conformance.ChunksJSON(first.Chunks), conformance.ChunksJSON([]wire.Chunk{sys(), text("I can book that flight.\n\nWhich date do you want to fly?"), result("input_required")}); got != want {
		t.Errorf("first run:\n%s\nwant:\n%s", got, want)
	}
	if got, want := conformance.ChunksJSON(second.Chunks), conformance.ChunksJSON([]wire.Chunk{sys(), text("Booked: YYZ to CDG on 14 March, seat 22A."), result("end_turn")}); got != want {
		t.Errorf("second run:\n%s\nwant:\n%s", got, want)
	}
	if got := savedConversation(t, third); got != conv {
		t.Errorf("third run saved %q; an answer without a token keeps the conversation's %q", got, conv)
	}

	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	want := []string{
		`{"format":"text","subformat":"english","content":"Book me a flight to Paris."}`,
		`{"format":"text","subformat":"english","content":"14 March.","submessages":[{"format":"token","subformat":"conversation","content":"` + conv + `"}]}`,
		`{"format":"text","subformat":"english","content":"Thanks!","submessages":[{"format":"token","subformat":"conversation","content":"` + conv + `"}]}`,
	}
	for i, r := range reqs {
		if r.Path != "/nlip/" {
			t.Errorf("request %d: path %q, want the agent URL's /nlip/", i+1, r.Path)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("request %d: Content-Type %q", i+1, ct)
		}
		if got := compact(t, r.Body); got != want[i] {
			t.Errorf("request %d:\n%s\nwant:\n%s", i+1, got, want[i])
		}
	}
}

// compact re-encodes a request body in Message's field order.
func compact(t *testing.T, b []byte) string {
	t.Helper()
	var m nlip.Message
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// TestLanguageAndCredential: the language is the text message's
// subformat, and a credential is sent as a bearer token.
func TestLanguageAndCredential(t *testing.T) {
	srv := conformance.ReplayServer(t, nlip.Name)
	a, err := nlip.New(remote.Config{BaseURL: agentURL(srv, "plain-text"), AllowLoopback: true, Credential: secret.New("agent-token-1")})
	if err != nil {
		t.Fatal(err)
	}
	o := runCall(t, a, call(t, a, map[string]any{"prompt": "Bonjour", "language": "french", "model": model}, nil))
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	r := srv.Requests()[0]
	if got := r.Header.Get("Authorization"); got != "Bearer agent-token-1" {
		t.Errorf("Authorization %q", got)
	}
	if got := compact(t, r.Body); got != `{"format":"text","subformat":"french","content":"Bonjour"}` {
		t.Errorf("body %s", got)
	}
}

// TestBeforeConnecting: a missing or unsafe URL fails when the adapter is
// built, and max_attempts <= 0, a missing prompt or another model fail
// before any request; none produces a chunk.
func TestBeforeConnecting(t *testing.T) {
	for _, u := range []string{"", "ftp://agent.example.com/nlip/", "http://169.254.169.254/nlip/", "http://127.0.0.1:9/nlip/", "http://[::1]/", "http://0x7f.1/"} {
		if _, err := nlip.New(remote.Config{BaseURL: u}); !errors.Is(err, wire.ProfileError) {
			t.Errorf("New(%q) = %v, want ProfileError", u, err)
		}
	}
	srv := conformance.ReplayServer(t, nlip.Name)
	a := newAdapter(t, srv, "plain-text")
	for _, tt := range []struct {
		name string
		edit func(*adapter.Call)
	}{
		{"max_attempts 0", func(c *adapter.Call) { c.MaxAttempts = 0 }},
		{"max_attempts -1", func(c *adapter.Call) { c.MaxAttempts = -1 }},
		{"no prompt", func(c *adapter.Call) { c.Request = nlip.Request{Language: "english"} }},
		{"other model", func(c *adapter.Call) { c.Request = nlip.Request{Prompt: "x", Model: "other", Language: "english"} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := call(t, a, map[string]any{"prompt": "hi"}, nil)
			tt.edit(&c)
			o := runCall(t, a, c)
			if !errors.Is(o.Err, wire.AgenticRequestValidationError) || len(o.Chunks) != 0 || o.Saved {
				t.Errorf("err %v, %d chunks, saved %t; want a validation error and nothing else", o.Err, len(o.Chunks), o.Saved)
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestAttemptFailures is acceptance 4 at the adapter level.
func TestAttemptFailures(t *testing.T) {
	srv := conformance.ReplayServer(t, nlip.Name)
	for _, tt := range conformance.FailedAttempts(t, srv, "/nlip/", 1) {
		t.Run(tt.Name, func(t *testing.T) {
			a, err := nlip.New(remote.Config{BaseURL: tt.BaseURL, AllowLoopback: true, AttemptTimeout: tt.AttemptTimeout})
			if err != nil {
				t.Fatal(err)
			}
			o := run(t, a, "hi", nil)
			tt.Check(t, o.Chunks, o.Err)
		})
	}
}
