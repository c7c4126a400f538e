package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/telemetry"
	"github.com/agentmesh/agentmesh/pkg/service/telemetry/telemetrytest"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
)

// A service's tracing comes from the OTEL_* environment at Start, under
// the service's name, and Close exports what is still buffered.
func TestStartTracesAndCloseFlushes(t *testing.T) {
	telemetrytest.ClearEnv(t)
	col := telemetrytest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000") // only Close can export it
	s := natstest.RunJetStream(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	infra, err := Start(context.Background(), "agentmesh-test", Config{NatsURL: s.ClientURL(), ShutdownTimeout: 5 * time.Second}, log)
	if err != nil {
		t.Fatal(err)
	}
	if !infra.Deps.Tracing.Enabled() {
		t.Fatal("tracing off with an OTLP endpoint set")
	}
	a := infra.Deps.Tracing.StartAttempt(context.Background(), nats.Header{}, &wire.Work{Pin: wire.Pin{Model: "m"}}, wire.TransportInProcess, 1)
	a.End()
	if n := len(col.Spans()); n != 0 {
		t.Fatalf("%d spans exported before Close", n)
	}
	if err := infra.Close(); err != nil {
		t.Fatal(err)
	}
	spans := col.Spans()
	if len(spans) != 1 || spans[0].Service != "agentmesh-test" || spans[0].Name != "invoke_agent m" {
		t.Fatalf("after Close the collector has %+v, want the attempt span of service agentmesh-test", spans)
	}
}

// An OTEL_* value the mesh cannot act on fails Start before it connects,
// naming the variable.
func TestStartRefusesABadOTELVariable(t *testing.T) {
	telemetrytest.ClearEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, err := Start(context.Background(), "agentmesh-test", Config{NatsURL: "nats://127.0.0.1:1", ShutdownTimeout: time.Second}, log)
	if !errors.Is(err, ErrConfig) || !errors.Is(err, telemetry.ErrConfig) || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Fatalf("Start = %v, want a config error naming OTEL_EXPORTER_OTLP_PROTOCOL", err)
	}
}
