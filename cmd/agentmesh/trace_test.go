package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/telemetry/telemetrytest"
)

// TestRunTracesTheSubmission: with OTEL_* pointing at a collector,
// `agentmesh run` is the root of its run's trace: its "submit" span
// (service agentmesh-cli) and agentmesh up's spans of the run share one
// trace id, the run's span the submit span's child; with OTEL_* unset it
// exports nothing; a bad OTEL_* value is a usage error naming it.
func TestRunTracesTheSubmission(t *testing.T) {
	telemetrytest.ClearEnv(t)
	col := telemetrytest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // up's spans reach the collector while it runs
	m := startUp(t, false)

	io, out, errOut := testIO(nil)
	if code := run(context.Background(), []string{"run", "--server", m.url, "-p", "fixture", "--run-id", "traced-1", "hello"}, io); code != 0 {
		t.Fatalf("agentmesh run: exit %d\n%s\n%s", code, out, errOut)
	}
	var submit, runSpan telemetrytest.Span
	natstest.Eventually(t, 30*time.Second, func() error {
		submit, runSpan = telemetrytest.Span{}, telemetrytest.Span{}
		for _, s := range col.Spans() {
			if s.Attrs["agentmesh.run_id"] != "traced-1" {
				continue
			}
			switch {
			case s.Service == "agentmesh-cli" && strings.HasPrefix(s.Name, "submit "):
				submit = s
			case s.Service != "agentmesh-cli" && strings.HasPrefix(s.Name, "invoke_agent "):
				if runSpan.Name == "" || s.ParentID == submit.SpanID {
					runSpan = s
				}
			}
		}
		if submit.Name == "" || runSpan.Name == "" {
			return fmt.Errorf("submit span %q, run span %q of %d spans", submit.Name, runSpan.Name, len(col.Spans()))
		}
		return nil
	})
	if submit.ParentID != "" {
		t.Errorf("submit span has parent %s; want the trace's root", submit.ParentID)
	}
	if runSpan.TraceID != submit.TraceID {
		t.Errorf("run span in trace %s, submit span in %s; want one trace across the NATS hops", runSpan.TraceID, submit.TraceID)
	}
	for _, s := range col.Spans() {
		for _, text := range s.Text() {
			if strings.Contains(text, "hello") {
				t.Errorf("span %q carries the prompt: %q", s.Name, text)
			}
		}
	}

	t.Run("off without OTEL_*", func(t *testing.T) {
		telemetrytest.ClearEnv(t)
		io, out, errOut := testIO(nil)
		if code := run(context.Background(), []string{"run", "--server", m.url, "-p", "fixture", "--run-id", "untraced-1", "hello"}, io); code != 0 {
			t.Fatalf("agentmesh run: exit %d\n%s\n%s", code, out, errOut)
		}
		for _, s := range col.Spans() {
			if s.Service == "agentmesh-cli" && s.Attrs["agentmesh.run_id"] == "untraced-1" {
				t.Errorf("span %q exported with OTEL_* unset", s.Name)
			}
		}
	})

	t.Run("bad OTEL_*", func(t *testing.T) {
		t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
		io, _, errOut := testIO(nil)
		if code := run(context.Background(), []string{"run", "--server", m.url, "-p", "fixture", "hello"}, io); code != exitUsage || !strings.Contains(errOut.String(), "OTEL_TRACES_EXPORTER") {
			t.Errorf("exit %d, stderr %q; want %d naming OTEL_TRACES_EXPORTER", code, errOut, exitUsage)
		}
	})
}
