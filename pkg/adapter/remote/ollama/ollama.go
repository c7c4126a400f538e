package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
	"github.com/agentmesh/agentmesh/pkg/cost"
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

// Adapter is the ollama adapter. It is safe for concurrent use; each Stream
// call has its own HTTP client.
type Adapter struct {
	cfg remote.Config
}

var _ adapter.Adapter = (*Adapter)(nil)

// New returns the adapter for cfg. The base URL is checked first (http or
// https, SSRF-safe; a local Ollama needs AllowLoopback). Ollama takes no
// credential: a set one is a ProfileError rather than a secret silently
// unused.
func New(cfg remote.Config) (adapter.Adapter, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if !cfg.Credential.Empty() {
		return nil, wire.Errorf(wire.ProfileError, "ollama takes no credential; remove credential_env from its profile")
	}
	return &Adapter{cfg: cfg}, nil
}

// Name implements adapter.Adapter.
func (a *Adapter) Name() string { return Name }

// Capabilities implements adapter.Adapter.
func (a *Adapter) Capabilities() wire.Capabilities { return Capabilities }

// TokenClasses implements adapter.TokenClasses with TokenClasses().
func (a *Adapter) TokenClasses() []string { return TokenClasses() }

// RuntimeKeys implements adapter.Adapter: none.
func (a *Adapter) RuntimeKeys() []string { return nil }

// Validate implements adapter.Adapter with Decode.
func (a *Adapter) Validate(b []byte) (any, error) { return Decode(b) }

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

// Stream runs one attempt: it sends the conversation so far plus this
// request's turn to /api/chat with stream=true and maps the NDJSON body to
// chunks (Parser). It blocks while ranged over; breaking out of the loop or
// ctx ending closes the connection and the attempt's client. A problem
// with the request against the conversation (unanswered or unknown tool
// calls, invalid pending arguments, a changed system message, a model
// other than the pinned one) is an AgenticRequestValidationError before
// anything is sent. A failure before the response (connect refused, the
// attempt cap) is a retryable ProviderTransportError; an HTTP error status
// is remote.StatusError's typed, non-retryable error; after the response
// headers, the system chunk is the first output and every later failure
// is terminal. On success it saves the extended history with
// call.SaveCheckpoint, before the result chunk.
func (a *Adapter) Stream(ctx context.Context, call adapter.Call) iter.Seq2[wire.Chunk, error] {
	return func(yield func(wire.Chunk, error) bool) {
		if err := a.stream(ctx, call, yield); err != nil && !errors.Is(err, errStopped) {
			yield(wire.Chunk{}, err)
		}
	}
}

// errStopped: the consumer broke out of the loop.
var errStopped = errors.New("consumer stopped")

func (a *Adapter) stream(ctx context.Context, call adapter.Call, yield func(wire.Chunk, error) bool) error {
	req, ok := call.Request.(Request)
	if !ok {
		return wire.Errorf(wire.AgenticRequestValidationError, "ollama: the call's request is %T, not an ollama.Request from Validate", call.Request)
	}
	model := call.Model
	switch {
	case req.Model != "" && model != "" && req.Model != model:
		return invalid("model: %q is not the pinned model %q", req.Model, model)
	case model == "":
		model = req.Model
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
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.URL(ChatPath), bytes.NewReader(body))
	if err != nil {
		return wire.Errorf(wire.ProfileError, "ollama: %v", err)
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "application/x-ndjson")
	resp, err := remote.Do(ctx, a.cfg, Name, httpReq)
	if err != nil {
		return err
	}
	defer resp.Close()

	caps := Capabilities
	if err := emit(ctx, yield, wire.Chunk{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: Name, Model: model, Capabilities: &caps}}); err != nil {
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
		if err := emit(ctx, yield, chunks...); err != nil {
			return err
		}
		if p.Failed() {
			return nil // nothing after a provider-declared failure
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
	return emit(ctx, yield, final...)
}

// emit yields chunks in order, stopping at the consumer's break or at the
// run's end: objects already buffered are not yielded after a cancel, the
// cancellation is.
func emit(ctx context.Context, yield func(wire.Chunk, error) bool, chunks ...wire.Chunk) error {
	for _, c := range chunks {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if !yield(c, nil) {
			return errStopped
		}
	}
	return nil
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
