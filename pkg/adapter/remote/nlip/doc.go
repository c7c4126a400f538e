// Package nlip provides the nlip adapter: one call of a remote agent that
// speaks the Natural Language Interaction Protocol (NLIP, Ecma TC56,
// ECMA-430, over HTTP as in ECMA-431) per attempt, its answer mapped to one
// result {content, context, input_required} and from there to chunks.
//
// # Operating it
//
// Profile fields: base_url is the agent's full URL (nothing is appended;
// the reference server mounts it at /nlip/, e.g.
// https://agent.example.com/nlip/); it must be http or https and pass the
// SSRF check when the adapter is built, before any client exists (a
// missing URL is a ProfileError). allow_loopback only for an agent on this
// host. credential_env is optional: when set, its value is sent as
// "Authorization: Bearer …" (and when the variable is unset the profile
// loads as an unavailable provider). The per-attempt cap is
// remote.Config.AttemptTimeout, 60 s by default, from dialing until the
// response headers arrive; the run's deadline covers the rest. The mesh's
// attempt policy (max_attempts, 3 by default) retries only connect and
// timeout failures before any output; the adapter never retries, and a
// call with max_attempts <= 0 is an AgenticRequestValidationError, never an
// empty success. The remote runner's admission defaults for NLIP are
// DefaultMaxActive (3) active and DefaultMaxWaiting (10) waiting.
//
// # Request and wire format
//
// The adapter POSTs one JSON NLIP message (Content-Type application/json):
//
//	{"format": "text", "subformat": "<language>", "content": "<prompt>",
//	 "submessages": [{"format": "token", "subformat": "conversation", "content": "<token>"}]}
//
// the submessage only when the conversation goes on. The answer is one
// JSON NLIP message (non-streaming); Parse reads its parts (the message
// itself, then its submessages, in order; field names in any case):
//
//	format text, no label              content: the texts, joined by newlines
//	format text, label input_required  input_required: the agent's question
//	format token, subformat conversation  context: the conversation token
//	format token, other subformats     protocol data (authorization, …): dropped,
//	                                   never kept nor emitted
//	format error (code or text)        a provider-declared failure
//	structured, binary, location,      ProviderProtocolError: no text form, so
//	generic, or an unknown format      refused rather than silently dropped
//
// NLIP defines no field for "the agent needs the user's input"; this
// adapter's convention is a text part labelled input_required (case
// ignored). messagetype is not interpreted.
//
// # Result mapping
//
// The one Result is projected the same way on every path (fresh or
// continued conversation, with or without a question):
//
//	system  {provider "nlip", model (the pinned agent id), capabilities},
//	        when the response headers arrive (SystemChunk)
//	text    content, then a blank line and the question when there is one;
//	        one complete chunk (is_delta false); none when both are empty
//	result  stop_reason "input_required" when the agent asks something,
//	        else "end_turn"; no usage (NLIP reports none)
//
// An answer with error parts is system and exactly one error chunk (the
// error texts, class from ClassifyMessage), nothing after it. The text and
// result chunks are yielded only after the whole answer is read and
// mapped: a body cut short or an unmappable answer ends the attempt after
// the system chunk with a ProviderTransportError or a
// ProviderProtocolError, never retried, and with no partial text. The
// system chunk comes first, as for every remote adapter, so that a run can
// be cancelled or time out between the agent's answer and its mapping (the
// agent answers in one piece; there is nothing to stream). HTTP error
// statuses are remote.StatusError's typed errors (401/403 auth, 429/529
// quota, else ProviderError; retryable for 429, 529 and 5xx), with no
// chunk.
//
// # Checkpoint
//
// The context never enters a chunk. At the end of a successful attempt
// whose answer carried a conversation token (or whose conversation already
// had one) the adapter saves it with call.SaveCheckpoint; the
// conversation's next run sends it back, so the agent continues the same
// conversation. After an input_required result the next run's prompt is
// the user's answer.
package nlip
