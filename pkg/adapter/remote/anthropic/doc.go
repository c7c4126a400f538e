// Package anthropic provides the remote adapter for the Anthropic Messages
// API: one streaming POST {base_url}/v1/messages per attempt, its
// server-sent events mapped onto the mesh's chunk stream, and the
// conversation carried from run to run in the checkpoint.
//
// # Operating it
//
// The profile (profiles/anthropic.yaml) sets:
//
//	adapter: anthropic
//	transport: remote
//	model: claude-sonnet-4-5            the pinned model id, sent as "model"
//	base_url: https://api.anthropic.com (the default); a proxy, gateway or the
//	                                    fixture server may replace it
//	allow_loopback: false               true only for a local test double
//	credential_env: ANTHROPIC_API_KEY   the variable holding the API key
//	pricing: {input, output, cache_read, cache_write, reasoning}
//
// The key is read into a secret.String and sent only as the x-api-key
// header of the request, with anthropic-version: 2023-06-01; it never
// appears in a chunk, an error or a log line. With the variable unset the
// registry installs remote.Unavailable for the profile, and choosing it
// fails with ProviderUnavailable. The base URL is checked at startup and
// every connection is checked again when it is dialed (pkg/adapter/remote,
// pkg/adapter/remote/safehttp). Each attempt has its own client, capped at the profile's
// attempt timeout (60 s) until the response headers arrive; after that the
// run's deadline governs the stream. The adapter never retries: the runner
// retries only connect failures and the attempt cap, and only before the
// first chunk.
//
// Thinking tokens are billed as output tokens by the provider, so the
// profile's reasoning rate should equal its output rate (see Usage).
//
// # Request
//
// See Request for the fields. A run that continues a conversation (its
// call carries a checkpoint) sends the whole history followed by a new
// user turn: the tool results, if any, then the prompt. When the last
// assistant turn asked for client tools, tool_results must answer every one
// of those calls and nothing else, and before a result is accepted the
// call's arguments are validated against the declared tool's JSON schema
// (pkg/adapter/toolschema); any mismatch fails the run with
// AgenticRequestValidationError before anything is sent. Tool names that
// the provider refuses (it takes ^[A-Za-z0-9_-]{1,64}$) are sent as
// deterministic aliases (the name with other bytes replaced by "_", plus
// "_" and 8 hex digits of its SHA-256) and restored before any chunk.
//
// # Stream mapping
//
//	message_start                    system chunk: provider, model (the provider's), capabilities
//	text block / text_delta          text chunks, is_delta
//	thinking block / thinking_delta  thinking chunks, is_delta
//	signature_delta                  checkpoint only
//	redacted_thinking block          checkpoint only
//	citations_delta                  checkpoint only (kept on the text block)
//	tool_use block + input_json_delta one tool_use chunk at content_block_stop: the
//	                                 provider's call id, the canonical tool name, the
//	                                 parsed arguments
//	server_tool_use (web_search)     one tool_use chunk at content_block_stop
//	web_search_tool_result           one tool_result chunk for that call id, the results
//	                                 without their encrypted_content (checkpoint only);
//	                                 is_error for a web_search_tool_result_error
//	message_delta                    stop_reason and cumulative usage, kept
//	message_stop                     the checkpoint is saved, then one result chunk:
//	                                 no content, metadata usage and stop_reason
//	                                 ("tool_use" when the turn awaits tool results)
//	ping                             dropped (telemetry)
//	error (overloaded_error, …)      exactly one error chunk, is_error, error_class typed;
//	                                 nothing after it and no checkpoint
//
// Any other event type, content block type or delta type, a delta for a
// block that is not open, a block index out of order, or a malformed event
// ends the run with ProviderProtocolError; no event is passed through. A
// body that ends before message_stop is a ProviderProtocolError, one that
// breaks off (a cut connection) a ProviderTransportError; neither is
// retryable, since the response had begun. The message id is kept in the
// checkpoint for telemetry and never enters a chunk.
//
// # Usage
//
// The result's metadata.usage has disjoint token classes, from the last
// (cumulative) usage the stream reported:
//
//	input_tokens        usage.input_tokens, which already excludes cached input
//	cache_read_tokens   usage.cache_read_input_tokens
//	cache_write_tokens  usage.cache_creation_input_tokens
//	reasoning_tokens    usage.output_tokens_details.thinking_tokens, when given
//	output_tokens       usage.output_tokens minus reasoning_tokens
//
// Without output_tokens_details, thinking stays inside output_tokens and
// reasoning_tokens is 0. Nothing is counted twice.
//
// # Errors
//
// HTTP errors are typed by remote.StatusError: 401 and 403 ProviderAuthError,
// 429 and 529 ProviderQuotaError, 413 and "prompt is too long" ProviderContextError,
// anything else ProviderError (retryable for 429, 529 and 5xx); this package adds the provider's other
// context wording ("exceed context limit") and 402 billing_error (quota).
// An error event in the stream is typed by its error type the same way:
// overloaded_error, rate_limit_error and billing_error quota;
// authentication_error and permission_error auth; request_too_large and a
// too-long prompt context; anything else ProviderError.
//
// # Checkpoint
//
// The state passed to SaveCheckpoint (msgpack, version 1) holds the pinned
// model, the conversation's settings (system, tools, web search, thinking
// budget), every message in the provider's format with the assistant
// turns' signed thinking, redacted thinking, tool calls, server tool
// results and citations exactly as streamed, and the last message id and
// stop reason. A run is refused with PinMismatch when the checkpoint's
// model is not the pinned one. A pause_turn stop is continued like any
// other turn, by a run with a prompt.
package anthropic
