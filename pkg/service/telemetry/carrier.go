package telemetry

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// Header is a NATS message's headers as an OpenTelemetry carrier of the
// W3C trace context (the traceparent and tracestate headers). Set on a nil
// Header does nothing: give it a message's initialised headers.
type Header nats.Header

// Get returns the first value of key.
func (h Header) Get(key string) string { return nats.Header(h).Get(key) }

// Set replaces the values of key with value.
func (h Header) Set(key, value string) {
	if h != nil {
		nats.Header(h).Set(key, value)
	}
}

// Keys lists the header names.
func (h Header) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// propagator is the W3C trace context, the one format the mesh carries.
var propagator propagation.TraceContext

// Inject writes the trace context of ctx's span into h, if ctx has a
// valid one; otherwise it leaves h alone (no header is added).
func Inject(ctx context.Context, h nats.Header) { propagator.Inject(ctx, Header(h)) }

// Extract returns ctx with the remote span context h carries as the
// parent of the spans started from it; ctx itself when h carries none.
func Extract(ctx context.Context, h nats.Header) context.Context {
	return propagator.Extract(ctx, Header(h))
}
