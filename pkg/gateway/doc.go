// Package gateway provides the mesh's HTTP gateway: an OpenAI-compatible
// API (POST /v1/chat/completions, POST /v1/responses, GET /v1/models),
// streaming over server-sent events or not, in front of the mesh's runs,
// and the mesh's own runs API:
//
//	POST /v1/runs                                 submit a wire.RunRequest as JSON (202)
//	GET  /v1/runs/{id}                            the run's record
//	GET  /v1/runs/{id}/events                     its events as server-sent events (Last-Event-ID resumes)
//	POST /v1/runs/{id}/cancel                     cancel it
//	GET  /v1/runs/{id}/artifacts                  its stored artifacts
//	GET  /v1/runs/{id}/artifacts/{name}           one artifact's bytes
//	POST /v1/runs/{id}/input                      a session's follow-up prompt, or an interrupt
//	POST /v1/runs/{id}/permissions/{request}      answer a session's permission request
//
// The last two serve live sessions (a run of adapter acp, session.go).
// It is a stateless NATS client of the mesh (pkg/client): any number may
// serve the same deployment.
//
// Callers authenticate with "Authorization: Bearer <key>", an API key made
// by Keys.Create that maps to one tenant and one principal; the mesh keeps
// only the SHA-256 of each key (the agentmesh_apikeys bucket). Every run a
// request starts is submitted as that tenant and principal, and every run
// it names is that tenant's: another tenant's run is a 404.
//
// The console (console.go) is served on the same listener under
// /console: server-rendered pages of the runs (from an in-memory index
// of the runs bucket, console_index.go), a run's live events and cancel
// (the runs API's own handlers), spend per day, runner pools, exports and
// artifacts. It takes the same keys, in the header or in the login form's
// cookie; a key whose id is in Config.OperatorKeys sees every tenant.
//
// Tool calls round-trip in both shapes, and a caller's conversation (a
// chat history sent back, a previous_response_id, a Responses history
// inline) continues the mesh conversation its earlier turns ran on:
// Turns records each succeeded run's turn in the agentmesh_turns bucket.
//
// Errors use OpenAI's shape, {"error": {"message", "type", "param",
// "code"}}, with the status a typed wire error's class maps to (Status).
package gateway
