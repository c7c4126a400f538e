// Package ollama provides the ollama adapter: one streaming call of
// Ollama's native chat API (POST {base_url}/api/chat, stream=true, an
// NDJSON body) per attempt, mapped into the normalized chunk stream, with
// tool calls continued across runs through the conversation's checkpoint.
//
// # Operating it
//
// Profile fields: base_url (a local Ollama is http://127.0.0.1:11434, the
// default; the path /api/chat is appended), allow_loopback: true for a
// local server (the SSRF check refuses loopback otherwise; nothing else is
// opened by it), and no credential_env: Ollama takes no credential, and New
// refuses one rather than hold a secret it never sends. Pricing is zero.
// The per-attempt cap is remote.Config.AttemptTimeout (60 s by default,
// from dialing until the response headers arrive; a large model that takes
// longer to load is a retryable timeout); the run's deadline bounds the
// stream after that. The adapter never retries: the mesh's attempt policy
// does, before the first chunk, for connect and timeout failures only.
//
// # Request
//
// See Request for the fields. A fresh conversation is
// [system], user(prompt); a continued one is the checkpoint's history,
// then one tool message per pending tool call (in the order of the calls),
// then user(prompt) if a prompt is given. The tools sent are the request's,
// or, when a continuation gives none, the conversation's.
//
// # Stream
//
//	after the response headers   system {provider "ollama", model, capabilities}
//	message.thinking             thinking, is_delta
//	message.content              text, is_delta
//	message.tool_calls[i]        tool_use {tool_id, tool_name, tool_input}, one per call
//	{"error": "..."}             one error chunk (error_class from ClassifyMessage), then nothing
//	done: true, then end of body result {usage, stop_reason, duration_ms}
//
// Ollama sends every tool call complete (its arguments an object), so there
// are no argument deltas to assemble; the tool name is the declared one,
// unchanged. A failure before the response headers is typed by
// remote.Do (connect and timeout retryable); an HTTP error status by
// remote.StatusError (401/403 auth, 429/529 quota, else ProviderError;
// Ollama's body is {"error": "..."}; retryable for 429, 529 and 5xx); a cut connection after the headers is
// a non-retryable ProviderTransportError; a malformed object, an object
// the Parser does not know, or a body without its done object is a
// ProviderProtocolError.
//
// # Tool call ids
//
// Since Ollama 0.12.10 every tool call carries the server's id ("call_…"),
// which is the chunk's tool_id and what a tool result names. An older
// server sends no id, and the adapter invents none: tool_id stays empty,
// and the next run's results without a tool_id answer the id-less calls in
// the order the calls were made (match). The tool message sent back
// carries tool_name always and tool_call_id when there is one. A failed
// tool (is_error) is sent as "Tool execution failed: " and its output:
// Ollama's tool message has no error flag.
//
// # Usage
//
// Ollama reports two counters on its done object, and they map one to one:
// prompt_eval_count is input_tokens, eval_count is output_tokens. Ollama
// reports no cache or reasoning counters, so cache_read_tokens,
// cache_write_tokens and reasoning_tokens are never set; thinking tokens
// are generated tokens and already inside eval_count, so nothing is
// counted twice. Ollama leaves prompt_eval_count out when it evaluated no
// prompt token (the whole prompt came from its KV cache); input_tokens is
// then 0. With neither counter the result carries no usage.
// total_duration (ns) is duration_ms.
//
// # Checkpoint
//
// At the end of a successful attempt the adapter saves, with
// call.SaveCheckpoint, the whole provider-format history (system, user,
// assistant with its thinking and tool calls, tool messages) and the tools
// in force. A run that ends with tool_use chunks succeeds with stop_reason
// "tool_use"; the conversation's next run must carry tool_results for
// every pending call and nothing else. Before a result is accepted the
// pending call's arguments are validated with toolschema.Validate against
// the declared tool's schema; every mismatch is an
// AgenticRequestValidationError before anything is sent.
package ollama
