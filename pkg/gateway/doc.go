// Package gateway provides the mesh's HTTP gateway: an OpenAI-compatible
// API (POST /v1/chat/completions, POST /v1/responses, GET /v1/models),
// streaming over server-sent events or not, in front of the mesh's runs.
// It is a stateless NATS client of the mesh (pkg/client): any number may
// serve the same deployment.
//
// Callers authenticate with "Authorization: Bearer <key>", an API key made
// by Keys.Create that maps to one tenant and one principal; the mesh keeps
// only the SHA-256 of each key (the agentmesh_apikeys bucket). Every run a
// request starts is submitted as that tenant and principal.
//
// Tool calls round-trip in both shapes, and a caller's conversation (a
// chat history sent back, a previous_response_id, a Responses history
// inline) continues the mesh conversation its earlier turns ran on:
// Turns records each succeeded run's turn in the agentmesh_turns bucket.
//
// Errors use OpenAI's shape, {"error": {"message", "type", "param",
// "code"}}, with the status a typed wire error's class maps to (Status).
package gateway
