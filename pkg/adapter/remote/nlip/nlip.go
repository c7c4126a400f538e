package nlip

import (
	"context"
	"encoding/json"
	"io"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Name is the adapter key.
const Name = "nlip"

// The remote runner's admission defaults for NLIP agents (docs/contract.md
// §9.5): at most 3 calls active per runner process and 10 waiting.
const (
	DefaultMaxActive  = 3
	DefaultMaxWaiting = 10
)

// MaxResponseSize bounds an agent's response body.
const MaxResponseSize = 16 << 20

// Capabilities is the adapter's immutable declaration: remote, not
// resumable (the conversation goes on through the checkpoint's token, not a
// session id), no tool events (an NLIP agent runs its own tools and
// reports none), no usage (NLIP has no token counters).
var Capabilities = wire.Capabilities{Transport: wire.TransportRemote}

// Declaration is the adapter's whole declaration, which remote.Unavailable
// makes in its place when the profile's credential is unset. It has no
// token classes: NLIP reports no usage.
func Declaration() remote.Declaration { return remote.Declaration{Capabilities: Capabilities} }

// New returns the adapter for the agent at cfg.BaseURL, the agent's full
// URL (nothing is appended), built on the remote frame (remote.Spec): safe
// for concurrent use, each Stream call with its own HTTP client. The URL is
// checked before any client exists: http or https, and an address the
// SSRF policy allows; a missing URL is a ProfileError. cfg.Credential, when
// set, is sent as a bearer token.
func New(cfg remote.Config) (adapter.Adapter, error) {
	if cfg.BaseURL == "" {
		return nil, wire.Errorf(wire.ProfileError, "nlip: the agent URL (base_url) is missing")
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	c := &client{cfg: cfg}
	return remote.New(remote.Spec[Request]{Name: Name, Declaration: Declaration(), Decode: Decode, Attempt: c.attempt})
}

// client sends one profile's attempts.
type client struct {
	cfg remote.Config
}

// checkpointVersion is the version of the state this adapter saves.
const checkpointVersion = 1

// checkpoint is the conversation's continuation state: the agent's
// conversation token (the result's context). It never enters an event.
type checkpoint struct {
	V            int    `msgpack:"v"`
	Conversation string `msgpack:"conversation"`
}

// attempt is the frame's Spec.Attempt: it posts the prompt as an NLIP
// text message (with the conversation's token, when the conversation goes
// on) to the agent URL; when the response headers arrive it emits the
// system chunk, then reads the whole JSON answer, maps it (Parse) and
// emits its projection (Chunks, or FailureChunk for an answer with error
// parts). call.MaxAttempts <= 0, a missing prompt and a model other than
// the pinned one are AgenticRequestValidationErrors before anything is
// sent. A failure before the response (connect refused, the attempt cap) is
// a retryable ProviderTransportError; an HTTP error status is a
// *remote.StatusError, typed (retryable for 429, 529, 5xx); after the
// system chunk a body cut short is a non-retryable ProviderTransportError
// and a body that is not a mappable NLIP message a ProviderProtocolError.
// On success it saves the conversation token with call.SaveCheckpoint,
// before the result chunk.
func (c *client) attempt(ctx context.Context, req Request, call adapter.Call, emit remote.Emit) error {
	if call.MaxAttempts <= 0 {
		// The record's helper made no request and returned an empty
		// result for max_retries <= 0; here it is a validation error.
		return wire.Errorf(wire.AgenticRequestValidationError, "nlip: max_attempts is %d; it must be > 0", call.MaxAttempts)
	}
	if req.Prompt == "" {
		return wire.Errorf(wire.AgenticRequestValidationError, "nlip request: field \"prompt\": required, a non-empty string")
	}
	model, err := call.RunModel(Name, req.Model)
	if err != nil {
		return err
	}
	var cp checkpoint
	if len(call.Checkpoint) > 0 {
		if err := wire.DecodeStrict(call.Checkpoint, &cp); err != nil {
			return wire.Errorf(wire.ProviderProtocolError, "nlip: checkpoint: %v", err)
		}
		if cp.V != checkpointVersion {
			return wire.Errorf(wire.ProviderProtocolError, "nlip: checkpoint version %d, want %d", cp.V, checkpointVersion)
		}
	}
	body, err := json.Marshal(RequestMessage(req.Prompt, req.Language, cp.Conversation))
	if err != nil {
		return wire.Errorf(wire.AgenticRequestValidationError, "nlip: encode the message: %v", err)
	}
	resp, err := remote.Post(ctx, c.cfg, Name, c.cfg.BaseURL, "application/json", body, c.cfg.Bearer())
	if err != nil {
		return err
	}
	defer resp.Close()
	// The agent answered: the system chunk is the attempt's first output,
	// as for every remote adapter, and from here on nothing is retried.
	if err := emit(SystemChunk(model)); err != nil {
		return err
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseSize+1))
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case err != nil:
		return wire.Errorf(wire.ProviderTransportError, "nlip: the response was cut short: %v", err)
	case len(raw) > MaxResponseSize:
		return wire.Errorf(wire.ProviderProtocolError, "nlip: the response exceeds %d bytes", MaxResponseSize)
	}
	res, failure, err := Parse(raw)
	if err != nil {
		return err
	}
	if failure != nil {
		return emit(FailureChunk(failure))
	}
	if res.Context == "" {
		res.Context = cp.Conversation // the agent did not repeat it: the conversation keeps it
	}
	if res.Context != "" && call.SaveCheckpoint != nil {
		state, err := wire.Marshal(&checkpoint{V: checkpointVersion, Conversation: res.Context})
		if err != nil {
			return wire.Errorf(wire.AgenticOperationUnsupported, "nlip: the conversation cannot be checkpointed: %v", err)
		}
		call.SaveCheckpoint(state)
	}
	return emit(Chunks(res)...)
}
