package mesh_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/telemetry/telemetrytest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// tracedServices starts the router and two runner replicas as three
// services on srv, each set up by service.Start as its binary is (tracing
// from the OTEL_* environment, its own connection and tracer provider),
// so that everything between them crosses NATS; a retried attempt may
// land on either runner. stop stops both and flushes their
// spans; it is idempotent, and runs at the end of the test.
func tracedServices(t *testing.T, srv *server.Server, profiles *profile.Registry, adapters *adapter.Registry) (deps []service.Deps, stop func()) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var stops []func()
	for _, s := range []struct {
		name string
		cfg  mesh.Config
	}{
		{"agentmesh-router", mesh.Config{WithoutRunner: true, WithoutSweeper: true, WithoutExporter: true}},
		{"agentmesh-runner-a", mesh.Config{WithoutRouter: true, WithoutSweeper: true, WithoutExporter: true,
			Runner: runnerConfigForTrace()}},
		{"agentmesh-runner-b", mesh.Config{WithoutRouter: true, WithoutSweeper: true, WithoutExporter: true,
			Runner: runnerConfigForTrace()}},
	} {
		infra, err := service.Start(context.Background(), s.name, service.Config{NatsURL: srv.ClientURL(), ShutdownTimeout: 10 * time.Second}, log)
		if err != nil {
			t.Fatal(err)
		}
		n := meshtest.Serve(t, infra.Deps, profiles, adapters, s.cfg, 30*time.Second)
		deps = append(deps, infra.Deps)
		stops = append(stops, func() {
			n.Stop()
			if err := <-n.Done; err != nil {
				t.Errorf("%s: %v", s.name, err)
			}
			n.Done <- nil // for meshtest's own cleanup
			if err := infra.Close(); err != nil {
				t.Errorf("close %s: %v", s.name, err)
			}
		})
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, s := range stops {
				s()
			}
		})
	}
	t.Cleanup(stop)
	return deps, stop
}

// tracedClient is a client whose submissions are traced by a provider of
// its own, exporting to url synchronously, as service "test-client".
func tracedClient(t *testing.T, srv *server.Server, url string) *client.Client {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(url+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "test-client"))))
	t.Cleanup(func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Errorf("client tracer: %v", err)
		}
	})
	nc, _ := natstest.Connect(t, srv)
	c, err := client.New(nc, subject.Names{}, client.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func runnerConfigForTrace() (c runner.Config) {
	c.RetryBackoff = time.Millisecond // the shortest the runner accepts
	return c
}

// tracedScript is a fixture script whose first attempt fails retryably
// before output and whose second calls a tool and reports cache tokens
// and a dated model; the words "violet-otter" stand for content that
// must stay out of every span.
const tracedScript = `{"streams": [
  {"error": {"class": "ProviderTransportError", "message": "reset before first output: violet-otter", "retryable": true}},
  {"chunks": [
    {"type": "system", "metadata": {"provider": "fixture", "model": "fixture-1-20261201"}},
    {"type": "tool_use", "tool_name": "read_file", "tool_id": "toolu_7", "tool_input": {"path": "violet-otter/secret.txt"}},
    {"type": "tool_result", "tool_id": "toolu_7", "tool_output": {"content": "violet-otter was here"}},
    {"type": "text", "content": "The file says violet-otter was here."},
    {"type": "result", "metadata": {"usage": {"input_tokens": 20, "output_tokens": 11, "cache_read_tokens": 7, "cache_write_tokens": 5}, "stop_reason": "end_turn"}}
  ]}
]}`

// Acceptance 3 of issue 13: a collector receives the trace of each run
// driven client -> router -> runner on an embedded server: one trace id
// across the NATS hops (four processes' worth of tracer providers: the
// client, the router, two runner replicas), the
// submit span the root, the run's span (router) its child, each attempt
// (runner) the run's child and each tool use the attempt's, with the
// GenAI attributes; and no prompt, completion, tool argument or result in
// any exported name, attribute, event or status.
func TestTraceOfARunAcrossTheNATSHops(t *testing.T) {
	telemetrytest.ClearEnv(t)
	col := telemetrytest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL())
	srv := natstest.RunJetStream(t)
	scripts := t.TempDir()
	if err := os.WriteFile(filepath.Join(scripts, "traced.json"), []byte(tracedScript), 0o600); err != nil {
		t.Fatal(err)
	}
	fx, err := fixture.New(fixture.Config{ScriptsDir: scripts})
	if err != nil {
		t.Fatal(err)
	}
	adapters, err := adapter.NewRegistry(fx)
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := profile.New(profile.Profile{Name: "fixture", Adapter: "fixture", Transport: wire.TransportInProcess, Model: "fixture-1",
		Pricing: map[string]string{"input": "3", "output": "15", "cache_read": "0.3", "cache_write": "3.75"}})
	if err != nil {
		t.Fatal(err)
	}
	deps, stop := tracedServices(t, srv, profiles, adapters)
	for _, d := range deps {
		if !d.Tracing.Enabled() {
			t.Fatal("OTEL_EXPORTER_OTLP_ENDPOINT set, yet a service's tracing is off")
		}
	}
	c := tracedClient(t, srv, col.URL())

	prompt := "tell nobody: marmalade-heron-" + nuid.Next()
	echoID, echoEvents := clienttest.Run(t, c, clienttest.FixtureRun(t, tenant, fixtureReq{Prompt: prompt}))
	prompt2 := "keep this secret: quince-lynx-" + nuid.Next()
	scriptID, scriptEvents := clienttest.Run(t, c, clienttest.FixtureRun(t, tenant, fixtureReq{Prompt: prompt2, Script: "traced"}))
	for _, evs := range [][]wire.Event{echoEvents, scriptEvents} {
		if st := last(evs); st.State != wire.StateSucceeded {
			t.Fatalf("run ended %s: %s", st.State, describe(evs))
		}
	}
	stop() // flushes the services' spans

	spans := col.Spans()
	echo := traceOf(t, spans, echoID)
	echo.check(t, 1, 1)
	at := echo.attempts[0]
	want := map[string]string{
		"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "fixture",
		"gen_ai.request.model": "fixture-1", "gen_ai.response.model": "fixture-1",
		"agentmesh.attempt": "1", "agentmesh.state": "succeeded", "agentmesh.run_id": echoID, "agentmesh.tenant": tenant,
	}
	usage := resultUsage(echoEvents)
	want["gen_ai.usage.input_tokens"], want["gen_ai.usage.output_tokens"] = itoa(usage.InputTokens), itoa(usage.OutputTokens)
	checkAttrs(t, "echo attempt", at, want)
	for _, k := range []string{"gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_creation.input_tokens", "error.type"} {
		if v, ok := at.Attrs[k]; ok {
			t.Errorf("echo attempt has %s=%s; the run reported none", k, v)
		}
	}
	uses := toolUses(echoEvents)
	checkAttrs(t, "echo tool", echo.tools[0], map[string]string{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo", "gen_ai.tool.call.id": uses[0].ToolID})
	checkAttrs(t, "echo run", echo.run, map[string]string{
		"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "fixture", "gen_ai.provider.name": "fixture",
		"gen_ai.request.model": "fixture-1", "agentmesh.run_id": echoID, "agentmesh.adapter": "fixture"})
	if echo.run.Name != "invoke_agent fixture" {
		t.Errorf("run span named %q, want %q", echo.run.Name, "invoke_agent fixture")
	}

	scripted := traceOf(t, spans, scriptID)
	scripted.check(t, 2, 1)
	checkAttrs(t, "first attempt", scripted.attempts[0], map[string]string{
		"agentmesh.attempt": "1", "agentmesh.retry": "true", "error.type": string(wire.ProviderTransportError)})
	checkAttrs(t, "second attempt", scripted.attempts[1], map[string]string{
		"agentmesh.attempt": "2", "agentmesh.state": "succeeded",
		"gen_ai.request.model": "fixture-1", "gen_ai.response.model": "fixture-1-20261201",
		"gen_ai.usage.input_tokens": "20", "gen_ai.usage.output_tokens": "11",
		"gen_ai.usage.cache_read.input_tokens": "7", "gen_ai.usage.cache_creation.input_tokens": "5",
		"gen_ai.response.finish_reasons": "end_turn", "agentmesh.cost": last(scriptEvents).Summary.Cost})
	checkAttrs(t, "scripted tool", scripted.tools[0], map[string]string{"gen_ai.tool.name": "read_file", "gen_ai.tool.call.id": "toolu_7"})

	// Nothing of any run's content in any span the collector received.
	secrets := []string{prompt, "marmalade-heron", prompt2, "quince-lynx", "violet-otter"}
	for _, evs := range [][]wire.Event{echoEvents, scriptEvents} {
		if s := allText(evs); s != "" {
			secrets = append(secrets, s)
		}
	}
	for _, s := range spans {
		for _, text := range s.Text() {
			for _, secret := range secrets {
				if strings.Contains(text, secret) {
					t.Errorf("span %q of %s exports %q, which holds run content %q", s.Name, s.Service, text, secret)
				}
			}
		}
	}
}

// With no OTEL_* variable set the services trace nothing: their tracing
// is off, and though a traced client's context arrives with the run, the
// collector receives only the client's own span.
func TestNoOTELVariablesNoServiceSpans(t *testing.T) {
	telemetrytest.ClearEnv(t)
	col := telemetrytest.Start(t)
	srv := natstest.RunJetStream(t)
	deps, stop := tracedServices(t, srv, profile.Builtin(), fixtureAdapters(t))
	for _, d := range deps {
		if d.Tracing != nil {
			t.Fatal("no OTEL_* variable set, yet a service traces")
		}
	}
	c := tracedClient(t, srv, col.URL())
	_, evs := clienttest.Run(t, c, clienttest.FixtureRun(t, tenant, fixtureReq{Prompt: "hi"}))
	if st := last(evs); st.State != wire.StateSucceeded {
		t.Fatalf("run ended %s: %s", st.State, describe(evs))
	}
	stop()
	spans := col.Spans()
	if len(spans) != 1 || spans[0].Service != "test-client" {
		var got []string
		for _, s := range spans {
			got = append(got, s.Service+":"+s.Name)
		}
		t.Fatalf("collector received %v, want only the client's submit span", got)
	}
}

// runTrace is the spans of one run's trace, by their place in it.
type runTrace struct {
	submit, run telemetrytest.Span
	attempts    []telemetrytest.Span // by attempt number
	tools       []telemetrytest.Span
	all         []telemetrytest.Span
}

// traceOf finds the trace of run runID: the trace of the router's span
// that names the run.
func traceOf(t *testing.T, spans []telemetrytest.Span, runID string) runTrace {
	t.Helper()
	var rt runTrace
	for _, s := range spans {
		if s.Service == "agentmesh-router" && s.Attrs["agentmesh.run_id"] == runID {
			rt.run = s
		}
	}
	if rt.run.TraceID == "" {
		t.Fatalf("no router span of run %s among %d spans", runID, len(spans))
	}
	for _, s := range spans {
		if s.TraceID == rt.run.TraceID {
			rt.all = append(rt.all, s)
		}
	}
	return rt
}

// check sorts the trace's spans into their places, failing the test unless
// the trace is exactly the client's submit span, the router's run span
// under it, attempts runner spans under the run and tools tool spans under
// the last attempt.
func (rt *runTrace) check(t *testing.T, attempts, tools int) {
	t.Helper()
	byID := map[string]telemetrytest.Span{}
	for _, s := range rt.all {
		byID[s.SpanID] = s
	}
	for _, s := range rt.all {
		switch {
		case s.Service == "test-client":
			rt.submit = s
		case strings.HasPrefix(s.Service, "agentmesh-runner-") && s.Attrs["gen_ai.operation.name"] == "execute_tool":
			rt.tools = append(rt.tools, s)
		case strings.HasPrefix(s.Service, "agentmesh-runner-"):
			rt.attempts = append(rt.attempts, s)
		case s.Service != "agentmesh-router":
			t.Errorf("span %q of unexpected service %q in the trace", s.Name, s.Service)
		}
	}
	if rt.submit.SpanID == "" || rt.submit.ParentID != "" {
		t.Fatalf("trace %s has no root submit span from the client: %v", rt.run.TraceID, names(rt.all))
	}
	if rt.run.ParentID != rt.submit.SpanID {
		t.Errorf("run span's parent %s, want the submit span %s (across the submit hop)", rt.run.ParentID, rt.submit.SpanID)
	}
	if len(rt.attempts) != attempts || len(rt.tools) != tools {
		t.Fatalf("trace has %d attempts and %d tool spans, want %d and %d: %v", len(rt.attempts), len(rt.tools), attempts, tools, names(rt.all))
	}
	for i := range rt.attempts { // in attempt order
		for j := i + 1; j < len(rt.attempts); j++ {
			if rt.attempts[j].Attrs["agentmesh.attempt"] < rt.attempts[i].Attrs["agentmesh.attempt"] {
				rt.attempts[i], rt.attempts[j] = rt.attempts[j], rt.attempts[i]
			}
		}
	}
	for _, a := range rt.attempts {
		if a.ParentID != rt.run.SpanID {
			t.Errorf("attempt span %q's parent %s, want the run span %s (across the work hop)", a.Name, a.ParentID, rt.run.SpanID)
		}
	}
	for _, tool := range rt.tools {
		if tool.ParentID != rt.attempts[len(rt.attempts)-1].SpanID {
			t.Errorf("tool span %q's parent %s, want the last attempt %s", tool.Name, tool.ParentID, rt.attempts[len(rt.attempts)-1].SpanID)
		}
	}
}

func names(spans []telemetrytest.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Service+":"+s.Name)
	}
	return out
}

func checkAttrs(t *testing.T, what string, s telemetrytest.Span, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got, ok := s.Attrs[k]; !ok || got != v {
			t.Errorf("%s span %q: %s = %q (set %v), want %q", what, s.Name, k, got, ok, v)
		}
	}
}

func resultUsage(evs []wire.Event) wire.Usage {
	for _, ev := range evs {
		if ev.Kind == wire.KindChunk && ev.Chunk.Type == wire.ChunkResult && ev.Chunk.Metadata.Usage != nil {
			return *ev.Chunk.Metadata.Usage
		}
	}
	return wire.Usage{}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
