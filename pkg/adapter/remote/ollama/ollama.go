package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Name is the adapter key.
const Name = "ollama"

// DefaultBaseURL is where a local Ollama listens.
const DefaultBaseURL = "http://127.0.0.1:11434"

// ChatPath is the endpoint, under the base URL.
const ChatPath = "/api/chat"

// Capabilities is the adapter's immutable declaration: remote, not
// resumable (the conversation continues through the checkpoint, not a
// session id), tool calls as tool_use chunks, token usage on the result.
var Capabilities = wire.Capabilities{
	Transport:       wire.TransportRemote,
	EmitsToolEvents: true,
	ReportsUsage:    true,
}

// TokenClasses returns the token classes of the result's usage (see the
// package doc's Usage): prompt_eval_count as input and eval_count as
// output. Ollama has no cache or reasoning counters.
func TokenClasses() []string { return []string{cost.Input, cost.Output} }

// Declaration is the adapter's whole declaration, which remote.Unavailable
// makes in its place when a profile names a credential that is unset.
func Declaration() remote.Declaration {
	return remote.Declaration{Capabilities: Capabilities, TokenClasses: TokenClasses()}
}

// New returns the adapter for cfg, built on the remote frame
// (remote.Spec): safe for concurrent use, each Stream call with its own
// HTTP client. The base URL is checked first (http or https, SSRF-safe; a
// local Ollama needs AllowLoopback). Ollama takes no credential: a set one
// is a ProfileError rather than a secret silently unused.
func New(cfg remote.Config) (adapter.Adapter, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if !cfg.Credential.Empty() {
		return nil, wire.Errorf(wire.ProfileError, "ollama takes no credential; remove credential_env from its profile")
	}
	c := &client{cfg: cfg}
	return remote.New(remote.Spec[Request]{Name: Name, Declaration: Declaration(), Decode: Decode, Attempt: c.attempt})
}

// client sends one profile's attempts.
type client struct {
	cfg remote.Config
}

// chatRequest is the /api/chat body.
type chatRequest struct {
	Model    string         `json:"model"`
	Messages []message      `json:"messages"`
	Tools    []chatTool     `json:"tools,omitempty"`
	Stream   bool           `json:"stream"`
	Think    any            `json:"think,omitempty"`
	Options  map[string]any `json:"options,omitempty"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters"`
}

// attempt is the frame's Spec.Attempt: it sends the conversation so far
// plus this request's turn to /api/chat with stream=true and maps the
// NDJSON body to chunks (Parser). A problem with the request against the
// conversation (unanswered or unknown tool calls, invalid pending
// arguments, a changed system message, a model other than the pinned one)
// is an AgenticRequestValidationError before anything is sent. A failure
// before the response (connect refused, the attempt cap) is a retryable
// ProviderTransportError; an HTTP error status is a *remote.StatusError,
// typed (retryable for 429, 529, 5xx); after the response headers, the
// system chunk is the first output and every later failure is terminal. On
// success it saves the extended history with call.SaveCheckpoint, before
// the result chunk.
func (c *client) attempt(ctx context.Context, req Request, call adapter.Call, emit remote.Emit) error {
	model, err := call.RunModel(Name, req.Model)
	if err != nil {
		return err
	}
	if model == "" {
		return invalid("model: no model is pinned and the request names none")
	}
	cp, err := decodeCheckpoint(call.Checkpoint)
	if err != nil {
		return err
	}
	msgs, tools, err := cp.continueWith(req)
	if err != nil {
		return err
	}
	body, err := json.Marshal(chatBody(model, msgs, tools, req))
	if err != nil {
		return wire.Errorf(wire.AgenticRequestValidationError, "ollama: encode the request: %v", err)
	}
	resp, err := remote.Post(ctx, c.cfg, Name, c.cfg.URL(ChatPath), "application/x-ndjson", body, nil)
	if err != nil {
		return err
	}
	defer resp.Close()

	caps := Capabilities
	if err := emit(wire.Chunk{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: Name, Model: model, Capabilities: &caps}}); err != nil {
		return err
	}
	tracked := &readTracker{r: resp.Body}
	dec := ndjson.NewDecoder(tracked)
	p := NewParser()
	for {
		m, err := dec.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return frameError(ctx, err, tracked.err)
		}
		chunks, err := p.Line(m)
		if err != nil {
			return err
		}
		if err := emit(chunks...); err != nil {
			return err // after the error chunk too: nothing follows it
		}
	}
	if ctx.Err() != nil {
		return context.Cause(ctx) // the body may end cleanly when its reader is torn down
	}
	final, err := p.End()
	if err != nil {
		return err
	}
	if call.SaveCheckpoint != nil {
		state, err := wire.Marshal(&checkpoint{V: checkpointVersion, Tools: tools, Messages: append(msgs, p.assistant())})
		if err != nil {
			return wire.Errorf(wire.AgenticOperationUnsupported, "ollama: the conversation cannot be checkpointed: %v", err)
		}
		call.SaveCheckpoint(state)
	}
	return emit(final...)
}

func chatBody(model string, msgs []message, tools []toolschema.Tool, req Request) chatRequest {
	body := chatRequest{Model: model, Messages: msgs, Stream: true}
	for _, t := range tools {
		body.Tools = append(body.Tools, chatTool{Type: "function",
			Function: chatFunction{Name: t.Name, Description: t.Description, Parameters: t.Schema}})
	}
	switch {
	case req.ReasoningEffort != "":
		body.Think = req.ReasoningEffort
	case req.Think != nil:
		body.Think = *req.Think
	}
	opts := map[string]any{}
	if req.MaxTokens > 0 {
		opts["num_predict"] = req.MaxTokens
	}
	if req.Temperature != nil {
		opts["temperature"] = *req.Temperature
	}
	if len(opts) > 0 {
		body.Options = opts
	}
	return body
}

// frameError types a failure to read the next NDJSON object: the run's
// own end (cancel, deadline) as itself, a failed read (the connection cut)
// as a non-retryable ProviderTransportError, anything else (malformed
// JSON, a non-object, a truncated final object) as a ProviderProtocolError.
func frameError(ctx context.Context, err, readErr error) error {
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case readErr != nil:
		return wire.Errorf(wire.ProviderTransportError, "ollama: the response was cut mid-stream: %v", readErr)
	}
	return wire.Errorf(wire.ProviderProtocolError, "ollama: malformed NDJSON: %v", err)
}

// readTracker remembers the first read error other than io.EOF, telling a
// cut connection from a malformed body.
type readTracker struct {
	r   io.Reader
	err error
}

func (t *readTracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
}
