package telemetry_test

import (
	"context"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/service/telemetry"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"
)

// A span's context crosses a NATS hop in the message's headers: Inject on
// the publishing side, Extract on the receiving one, whose spans are then
// the remote span's children.
func ExampleInject() {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))

	msg := nats.NewMsg("agentmesh.submit.acme")
	telemetry.Inject(ctx, msg.Header)
	fmt.Println(msg.Header.Get("traceparent"))

	parent := trace.SpanContextFromContext(telemetry.Extract(context.Background(), msg.Header))
	fmt.Println(parent.TraceID(), parent.SpanID(), parent.IsRemote())
	// Output:
	// 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	// 4bf92f3577b34da6a3ce929d0e0e4736 00f067aa0ba902b7 true
}

// With tracing off (a nil *Tracing, what Setup returns when no OTEL_*
// variable configures an exporter) nothing is started and nothing is
// written, unless a trace context came in to be passed on.
func ExampleTracing_StartRun() {
	var off *telemetry.Tracing
	ctx, end := off.StartRun(context.Background(), nats.Header{})
	defer end(nil)
	work := nats.Header{}
	telemetry.Inject(ctx, work)
	fmt.Println(off.Enabled(), len(work))
	// Output: false 0
}
