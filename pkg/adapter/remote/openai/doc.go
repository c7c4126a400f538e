// Package openai provides the OpenAI Responses adapter: one streaming
// POST {base_url}/responses per attempt, its server-sent events mapped onto
// the one chunk stream (docs/contract.md §1), and the conversation carried
// statelessly in the run's checkpoint (store=false; docs/contract.md §6,
// §10.4 and §10.13).
//
// # Operating it
//
// A profile selects the adapter with adapter: openai, transport: remote:
//
//	schema: 1
//	name: openai
//	adapter: openai
//	transport: remote
//	model: gpt-5.5
//	base_url: https://api.openai.com/v1   # the API root; the adapter adds /responses
//	credential_env: OPENAI_API_KEY        # sent as "Authorization: Bearer <key>"
//	allow_loopback: false                 # true only for a local proxy or test double
//	context_window: 272000
//	pricing: {input: "1.25", cache_read: "0.125", output: "10", reasoning: "10"}
//
// The credential is read from the variable credential_env names into a
// secret.String and revealed only into the Authorization header of the
// request; it is never logged, encoded or put into an error. With the
// variable unset the profile is registered as Unavailable(credential_env):
// choosing it fails with ProviderUnavailable and nothing else breaks. The
// base URL must pass the SSRF check of pkg/adapter/remote/safehttp (at New and again at
// dial time); a loopback base URL needs allow_loopback: true.
//
// Options.NoTemperatureModels names the models that reject the temperature
// parameter (the configured GPT-5.x Responses model does, docs/contract.md §10.13): for
// them a request's temperature is validated and left out of the provider
// request. Profile schema version 1 has no field for it yet: whoever builds
// the adapter from the profile passes it to New.
//
// # Attempts
//
// Stream makes one attempt and never retries inside. remote.Do caps the
// attempt until the response headers (60 s by default); a connect failure
// or that cap is a retryable ProviderTransportError, which the runner
// retries up to the run's max_attempts before any output. An HTTP error is
// typed by remote.StatusError (401/403 ProviderAuthError, 429/529
// ProviderQuotaError, any other 5xx ProviderError, an "overloaded" 503
// included, 413 or a context-length message ProviderContextError, else
// ProviderError; a 400 saying the input exceeds
// the context window is retyped ProviderContextError here); a 429, 529 or
// 5xx is retryable (the runner retries it before any output, honouring its
// Retry-After), any other status is not. Once the response has begun, nothing is retryable: a cut
// connection or an event stream that ends before its terminal event is a
// ProviderTransportError, a malformed or unknown event a
// ProviderProtocolError.
//
// # The provider request
//
//	model                the pinned model
//	instructions         the request's system (else the conversation's)
//	input                the whole conversation, replayed from the checkpoint, then
//	                     the new turn: function_call_output items, then the prompt
//	tools                {type: function, name: <alias>, parameters: <input_schema>,
//	                     strict: false}: platform schemas have optional arguments and
//	                     the arguments are validated centrally (pkg/adapter/toolschema)
//	max_output_tokens    max_tokens
//	temperature          temperature, unless the model is in NoTemperatureModels
//	reasoning            {effort: reasoning_effort, summary: "auto"}
//	store                false; previous_response_id is never sent
//	stream               true
//	include              ["reasoning.encrypted_content"]
//
// Tool names: OpenAI function names must match [A-Za-z0-9_-]{1,64}, and
// platform names are dotted ("fs.read"). Each tool is sent under a
// deterministic alias (every other character becomes "_"; a name longer
// than 64 bytes is cut to 55 and suffixed with "_" and 8 hex digits of its
// SHA-256), and a request whose tools would share an alias is refused at
// validation. Streamed calls are mapped back to the canonical name before
// any chunk is emitted; a call of an undeclared function is a
// ProviderProtocolError.
//
// # Events and chunks
//
//	response.created                          system (provider, model, capabilities)
//	response.output_text.delta,
//	response.refusal.delta                    text, is_delta=true
//	response.reasoning_summary_text.delta,
//	response.reasoning_text.delta             thinking, is_delta=true
//	response.function_call_arguments.delta    assembled; with
//	response.output_item.done (function_call) one tool_use: tool_id = call_id, the
//	                                          canonical tool_name, the parsed arguments
//	response.output_item.done (message,       nothing when the content streamed (it must
//	reasoning)                                equal the deltas); else one complete chunk
//	response.completed / response.incomplete  result: usage, stop_reason (end_turn,
//	                                          tool_use, max_tokens, content_filter)
//	response.failed, error                    the one error chunk, typed by code:
//	                                          rate_limit_exceeded/insufficient_quota →
//	                                          ProviderQuotaError, context_length_exceeded
//	                                          → ProviderContextError, invalid_api_key →
//	                                          ProviderAuthError, else ProviderError
//
// Lifecycle and "done" events (response.in_progress, response.queued,
// content and summary part boundaries, *.done text events, annotations,
// keepalive) are dropped; any other event type, an output item of another
// type (hosted tools are never requested) or a malformed event is a
// ProviderProtocolError. A successful response ends in one result chunk
// whose content is empty (all text was emitted as text). The response id,
// reasoning item ids and encrypted reasoning never enter a chunk.
//
// Usage classes are disjoint, so nothing is priced twice:
//
//	input_tokens       = input_tokens − input_tokens_details.cached_tokens
//	cache_read_tokens  = input_tokens_details.cached_tokens
//	output_tokens      = output_tokens − output_tokens_details.reasoning_tokens
//	reasoning_tokens   = output_tokens_details.reasoning_tokens
//
// # Conversations
//
// At the end of a successful response the adapter saves its checkpoint
// (versioned msgpack, private to the adapter): the pinned model, the
// instructions, the declared tools (canonical names and schemas), the
// history — user turns, assistant messages, reasoning items (summary and
// encrypted_content) and function calls with their raw arguments, and tool
// results — and the response id, kept for telemetry only. A run with a
// checkpoint replays that history as input items; a response's reasoning
// items and function calls reach the next request only from the
// checkpoint, never from the event stream, and replayed items carry no
// item id (store=false persists nothing an id could name). A run that ends
// with tool_use chunks succeeds with stop_reason "tool_use"; the next run
// of the conversation must carry tool_results answering every pending call
// and nothing else, and each pending call's arguments are validated against
// its tool's declared schema before any result is accepted (invalid:
// AgenticRequestValidationError). A reasoning item that came without
// encrypted content is not kept, since it cannot be replayed statelessly.
// A checkpoint over MaxCheckpoint fails the run with ProviderContextError
// rather than leave the stored conversation a turn behind.
package openai
