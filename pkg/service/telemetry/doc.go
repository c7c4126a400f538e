// Package telemetry provides the mesh's OpenTelemetry tracing: Setup, which
// every service process and `agentmesh up` call once, reads the standard
// OTEL_* environment and returns the process's Tracing (nil, tracing off,
// unless those variables configure an exporter); the W3C trace context
// carried in NATS message headers (Inject, Extract, Header); and the spans
// of a run, named and attributed by the OpenTelemetry GenAI semantic
// conventions: the client's submission, the run as the router admits and
// dispatches it, each attempt a runner makes, and each tool use inside an
// attempt.
//
// A span carries identities, models, token counts, costs and error
// classes, never a prompt, a completion, a tool's arguments or result, an
// error message or a credential: none of the content of a run.
//
// Every method of *Tracing and *Attempt is safe on a nil receiver and
// then does nothing (StartRun and Submit still pass on a trace context
// that came in), so tracing off costs the hot path a nil check.
package telemetry
