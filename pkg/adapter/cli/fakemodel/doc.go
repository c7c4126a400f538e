// Package fakemodel provides a loopback fake of the model APIs the agent
// CLIs call, serving scripted, streamed answers so that a real CLI can be
// driven end to end without a network, a key or a model.
//
// One Server answers three wire APIs on one loopback address:
//
//	POST /v1/messages[?beta=true]                          Anthropic Messages (Claude Code, Pi)
//	POST /v1/responses                                     OpenAI Responses (Codex)
//	POST /v1beta/models/<model>:streamGenerateContent?alt=sse
//	POST /v1beta/models/<model>:generateContent            Gemini (Gemini CLI)
//
// Streaming answers are server-sent events in each vendor's shape:
// Anthropic's message_start, content_block_start/delta/stop (text_delta,
// thinking_delta, signature_delta, input_json_delta), message_delta with
// the stop reason and usage, and message_stop; the Responses API's
// response.created, response.output_item.added/done,
// response.output_text.delta, response.function_call_arguments.delta and
// response.completed with usage; Gemini's candidates with content parts
// (text, thought text, functionCall) and usageMetadata. A request with
// "stream": false (Anthropic, Responses) or the Gemini generateContent
// method gets the same answer as one JSON document.
//
// # Scenarios
//
// A Scenario says what the fake answers. A server made with a fixed
// scenario answers every request with it; a server made with Auto picks the
// scenario of each request from a marker (see Marker) in the text of the
// latest user message, and answers Answer when there is none.
//
//	Answer        the text AnswerText ("The answer is 42.")
//	ToolCall      a call of the shell tool the request offers (Claude Code's
//	              Bash, Pi's bash, Codex's exec_command, Gemini CLI's
//	              run_shell_command) running ToolCommand; the request that
//	              carries the tool's result then gets the final text
//	              ToolDoneText (or ToolMismatchText if the result does not
//	              hold ToolOutput)
//	Thinking      a thinking block (reasoning item, thought part), then AnswerText
//	Unauthorized, RateLimited, ServerError
//	              HTTP 401, 429 (with retry-after: 1) and 500 with each
//	              vendor's documented error body
//	Stall         the stream opens and then hangs until the client goes away
//	              or the server closes (for cancellation and timeout tests)
//
// Whether a request is the follow-up of a tool call is decided from the
// request alone: it is one when a tool result comes after the latest user
// text, so a fake holds no per-conversation state and any number of CLIs
// and conversations can share one server.
//
// Every request is recorded (Requests) with its messages normalized
// across the three APIs, so a test can check what a CLI sent, for example
// that a resumed session carried the earlier turn.
package fakemodel
