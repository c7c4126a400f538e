package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0" // the SDK's own resource version
	"go.opentelemetry.io/otel/trace"
)

// ErrConfig marks an OTEL_* variable the mesh cannot act on; the message
// names the variable and its value.
var ErrConfig = errors.New("opentelemetry config")

// Tracing is a process's tracer. A nil *Tracing is tracing off: every
// method does nothing. It is safe for concurrent use.
type Tracing struct {
	tracer trace.Tracer
	// sdk is the provider Setup built and Shutdown flushes; nil when the
	// caller brought its own (New).
	sdk *sdktrace.TracerProvider
}

// instrumentation is the name of the mesh's tracer (its instrumentation
// scope).
const instrumentation = "github.com/agentmesh/agentmesh"

// Setup builds the tracing of the process named service (the resource's
// service.name, which OTEL_SERVICE_NAME overrides) from the standard
// OpenTelemetry environment, or returns nil, tracing off, when that
// environment configures no exporter: OTEL_SDK_DISABLED=true,
// OTEL_TRACES_EXPORTER=none, or neither OTEL_TRACES_EXPORTER=otlp nor an
// OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set.
//
// The exporter is OTLP over HTTP/protobuf or gRPC, as
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL say
// (default http/protobuf). Everything else is read by the OpenTelemetry
// SDK itself, as the specification defines it: the exporter's endpoint,
// headers, timeout, compression and certificates
// (OTEL_EXPORTER_OTLP_*), the resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES), the sampler (OTEL_TRACES_SAMPLER[_ARG]) and
// the batch processor (OTEL_BSP_*). A value the mesh cannot act on is an
// ErrConfig naming the variable. Setup does not connect: a collector that
// is down costs dropped spans, never a failed start; the SDK's errors
// (a failed export) go to log as warnings, through the OpenTelemetry
// global error handler, which Setup sets. Shutdown flushes.
func Setup(ctx context.Context, service string, log *slog.Logger) (*Tracing, error) {
	protocol, on, err := selected(os.Getenv)
	if err != nil || !on {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	switch protocol {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: OTLP %s exporter: %w", ErrConfig, protocol, err)
	}
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES: %w", ErrConfig, err)
	}
	// The handler is process-wide: the last Setup's logger has it, which in
	// a service process is the service's one logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("opentelemetry", "err", err) }))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{tracer: tp.Tracer(instrumentation), sdk: tp}, nil
}

// selected reads which exporter the environment configures: the OTLP
// protocol and whether tracing is on at all.
func selected(getenv func(string) string) (protocol string, on bool, err error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return "", false, nil
	}
	exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	for name := range strings.SplitSeq(exporter, ",") {
		switch name = strings.TrimSpace(name); name {
		case "none":
			return "", false, nil
		case "otlp", "":
		default:
			return "", false, fmt.Errorf("%w: OTEL_TRACES_EXPORTER: %q is not an exporter this build has (otlp or none)", ErrConfig, name)
		}
	}
	if exporter == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return "", false, nil // the specification's default is otlp; the mesh's is off
	}
	variable := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	protocol = strings.TrimSpace(getenv(variable))
	if protocol == "" {
		variable = "OTEL_EXPORTER_OTLP_PROTOCOL"
		protocol = strings.TrimSpace(getenv(variable))
	}
	switch protocol {
	case "":
		return "http/protobuf", true, nil
	case "http/protobuf", "grpc":
		return protocol, true, nil
	}
	return "", false, fmt.Errorf("%w: %s: %q is not a protocol this build exports with (http/protobuf or grpc)", ErrConfig, variable, protocol)
}

// New is tracing on tp, a provider the caller owns (and shuts down):
// for a program that embeds the client, or a test. A nil tp is tracing
// off.
func New(tp trace.TracerProvider) *Tracing {
	if tp == nil {
		return nil
	}
	return &Tracing{tracer: tp.Tracer(instrumentation)}
}

// Enabled reports whether t traces.
func (t *Tracing) Enabled() bool { return t != nil }

// Shutdown exports the spans still buffered and stops the provider Setup
// built, within ctx. It blocks until done; a second call, or one on a
// Tracing from New or nil, does nothing and returns nil.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}
