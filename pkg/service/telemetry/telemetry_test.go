package telemetry_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/service/telemetry"
	"github.com/agentmesh/agentmesh/pkg/service/telemetry/telemetrytest"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// A failed export is the service's warning, in its own log, not a line of
// the standard logger's.
func TestExportErrorsGoToTheLog(t *testing.T) {
	telemetrytest.ClearEnv(t)
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer refuse.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", refuse.URL)
	var buf servicetest.Buffer
	tr, err := telemetry.Setup(context.Background(), "agentmesh-test", slog.New(slog.NewJSONHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	_, end := tr.StartRun(context.Background(), nats.Header{})
	end(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = tr.Shutdown(ctx)
	if out := buf.String(); !strings.Contains(out, `"level":"WARN","msg":"opentelemetry"`) || !strings.Contains(out, "400") {
		t.Fatalf("log %q, want the failed export as a warning", out)
	}
}

func TestSetupIsOffWithoutAnExporter(t *testing.T) {
	telemetrytest.ClearEnv(t)
	tr, err := telemetry.Setup(context.Background(), "agentmesh-test", discard)
	if err != nil || tr != nil || tr.Enabled() {
		t.Fatalf("Setup = %v, %v; want nil, nil (off)", tr, err)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown of off tracing: %v", err)
	}
}

func TestSetupRefusesWhatItCannotExport(t *testing.T) {
	telemetrytest.ClearEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "jaeger")
	_, err := telemetry.Setup(context.Background(), "agentmesh-test", discard)
	if !errors.Is(err, telemetry.ErrConfig) || !strings.Contains(err.Error(), `OTEL_TRACES_EXPORTER: "jaeger"`) {
		t.Fatalf("Setup = %v, want an ErrConfig naming OTEL_TRACES_EXPORTER and its value", err)
	}
}

// Setup's exporter and resource come from the SDK's own reading of the
// environment: the endpoint, OTEL_SERVICE_NAME over the default name, and
// OTEL_RESOURCE_ATTRIBUTES. Shutdown flushes what is buffered.
func TestSetupExportsWhereTheEnvironmentSays(t *testing.T) {
	telemetrytest.ClearEnv(t)
	col := telemetrytest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL())
	t.Setenv("OTEL_SERVICE_NAME", "router-eu")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test,service.namespace=agentmesh")
	tr, err := telemetry.Setup(context.Background(), "agentmesh-router", discard)
	if err != nil || !tr.Enabled() {
		t.Fatalf("Setup = %v, %v", tr, err)
	}
	_, end := tr.StartRun(context.Background(), nats.Header{})
	end(nil)
	if n := col.Requests(); n != 0 {
		t.Fatalf("%d export requests before Shutdown; the batcher should still hold the span", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	spans := col.Spans()
	if len(spans) != 1 {
		t.Fatalf("got %d spans, want 1", len(spans))
	}
	text := spans[0].Text()
	if spans[0].Service != "router-eu" || !slices.Contains(text, "deployment.environment.name") || !slices.Contains(text, "agentmesh") {
		t.Fatalf("span %s of service %q, resource %v; want service router-eu and the OTEL_RESOURCE_ATTRIBUTES", spans[0].Name, spans[0].Service, text)
	}
}

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// A router or runner with tracing off starts no span, yet passes on the
// trace context a traced client sent, so a traced service after it goes
// on with the client's trace.
func TestOffPassesTheTraceContextOn(t *testing.T) {
	var off *telemetry.Tracing
	in := nats.Header{"traceparent": {traceparent}, "tracestate": {"vendor=x"}}
	ctx, end := off.StartRun(context.Background(), in)
	out := nats.Header{}
	telemetry.Dispatch(ctx, &wire.Work{RunID: "r1", Tenant: "acme"}, wire.TransportInProcess, out)
	end(nil)
	if got := out.Get("traceparent"); got != traceparent {
		t.Fatalf("traceparent = %q, want %q passed on", got, traceparent)
	}
	if got := out.Get("tracestate"); got != "vendor=x" {
		t.Fatalf("tracestate = %q, want vendor=x passed on", got)
	}
	// No trace context in, none out: an untraced client's messages get no
	// header from the mesh.
	ctx, _ = off.StartRun(context.Background(), nats.Header{})
	out = nats.Header{}
	telemetry.Dispatch(ctx, &wire.Work{}, wire.TransportInProcess, out)
	off.Submit(context.Background(), &wire.RunRequest{}, out)(nil)
	if len(out) != 0 {
		t.Fatalf("headers %v added with no trace context", out)
	}
}

// With tracing off the hot path does no span work: the calls on a run's
// path allocate nothing.
func TestOffAllocatesNothing(t *testing.T) {
	var off *telemetry.Tracing
	h := nats.Header{"Nats-Msg-Id": {"acme.r1"}}
	wk := &wire.Work{RunID: "r1", Tenant: "acme", Profile: "fixture", Pin: wire.Pin{Provider: "fixture", Model: "fixture-1"}}
	chunks := []wire.Chunk{
		{Type: wire.ChunkToolUse, ToolName: "echo", ToolID: "t1"},
		{Type: wire.ChunkToolResult, ToolID: "t1"},
		{Type: wire.ChunkResult, Metadata: wire.Metadata{Model: "fixture-1", Usage: &wire.Usage{InputTokens: 3, OutputTokens: 4}}},
	}
	bg := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		off.Submit(bg, &wire.RunRequest{}, h)(nil)
		ctx, end := off.StartRun(bg, h)
		telemetry.Dispatch(ctx, wk, wire.TransportInProcess, h)
		telemetry.Rejected(ctx, "acme", "r1", &wire.Error{Class: wire.AdmissionRejected})
		end(nil)
		a := off.StartAttempt(bg, h, wk, wire.TransportInProcess, 1)
		for i := range chunks {
			a.Chunk(&chunks[i])
		}
		a.Retried(&wire.Error{Class: wire.ProviderTransportError})
		a.Ended(wire.Status{State: wire.StateSucceeded})
		a.End()
	})
	if allocs != 0 {
		t.Fatalf("tracing off allocates %v times a run, want 0", allocs)
	}
}

func TestHeaderCarrier(t *testing.T) {
	h := telemetry.Header(nats.Header{})
	h.Set("traceparent", traceparent)
	if got := h.Get("traceparent"); got != traceparent {
		t.Fatalf("Get = %q", got)
	}
	if got := h.Keys(); !slices.Equal(got, []string{"traceparent"}) {
		t.Fatalf("Keys = %v", got)
	}
	var none telemetry.Header
	none.Set("traceparent", traceparent) // must not panic
	if none.Get("traceparent") != "" || len(none.Keys()) != 0 {
		t.Fatal("a nil Header holds nothing")
	}
}
