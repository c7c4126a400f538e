package telemetry

import (
	"context"
	"errors"

	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	// v1.41.0: the newest semconv of this otel release with the GenAI attributes.
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// The mesh's own span attributes, beside the GenAI conventions'.
const (
	RunIDKey     = attribute.Key("agentmesh.run_id")
	TenantKey    = attribute.Key("agentmesh.tenant")
	AdapterKey   = attribute.Key("agentmesh.adapter")
	ProfileKey   = attribute.Key("agentmesh.profile")
	AttemptKey   = attribute.Key("agentmesh.attempt")
	StateKey     = attribute.Key("agentmesh.state")
	CostKey      = attribute.Key("agentmesh.cost") // exact decimal, the pin's currency
	RetryKey     = attribute.Key("agentmesh.retry")
	ReasonKey    = attribute.Key("agentmesh.reasoning_tokens")
	TransportKey = attribute.Key("agentmesh.transport")
)

// maxOpenTools bounds the tool uses an attempt tracks at once; a tool use
// beyond it gets no span.
const maxOpenTools = 256

// noEnd is the end of a span that was never started.
func noEnd(error) {}

// Submit starts the client's span of a submission and writes its trace
// context into h, the submission's headers; end ends it with the
// publish's outcome. With t nil it starts nothing and writes the trace
// context ctx already has, if any (the calling program's own span), so a
// traced program's trace goes on through the mesh.
func (t *Tracing) Submit(ctx context.Context, req *wire.RunRequest, h nats.Header) (end func(error)) {
	if t == nil {
		Inject(ctx, h)
		return noEnd
	}
	ctx, span := t.tracer.Start(ctx, "submit "+req.Profile, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(RunIDKey.String(req.RunID), TenantKey.String(req.Tenant), semconv.GenAIAgentName(req.Profile)))
	Inject(ctx, h)
	return func(err error) { endWith(span, err) }
}

// StartRun starts the router's span of a run, the run's own span: the
// child of the submission's trace context h carries, covering the run's
// admission and dispatch. The runners' attempts, later and in other
// processes, are its children (the work message carries its context,
// Dispatch). With t nil it only takes up h's trace context, so that
// Dispatch passes a traced client's context on to the runners. end ends
// the span with the routing's outcome (a rejection is Rejected's).
func (t *Tracing) StartRun(ctx context.Context, h nats.Header) (_ context.Context, end func(error)) {
	ctx = Extract(ctx, h)
	if t == nil {
		return ctx, noEnd
	}
	kv := []attribute.KeyValue{semconv.GenAIOperationNameInvokeAgent}
	if tenant, runID, err := subject.SplitRunKey(h.Get(jetstream.MsgIDHeader)); err == nil {
		// Known before the body is decoded: a duplicate or a rejected
		// submission's span names its run too.
		kv = append(kv, RunIDKey.String(runID), TenantKey.String(tenant))
	}
	ctx, span := t.tracer.Start(ctx, semconv.GenAIOperationNameInvokeAgent.Value.AsString(), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(kv...))
	return ctx, func(err error) { endWith(span, err) }
}

// Dispatch records the routed run on ctx's run span (StartRun) and writes
// the trace context into h, the work message's headers.
func Dispatch(ctx context.Context, wk *wire.Work, transport wire.Transport, h nats.Header) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetName(semconv.GenAIOperationNameInvokeAgent.Value.AsString() + " " + wk.Profile)
		span.SetAttributes(workAttributes(wk, transport)...)
	}
	Inject(ctx, h)
}

// Rejected records on ctx's run span (StartRun) that the router rejected
// the run: its error class, never its message.
func Rejected(ctx context.Context, tenant, runID string, we *wire.Error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(RunIDKey.String(runID), TenantKey.String(tenant), StateKey.String(string(wire.StateRejected)))
	failed(span, we)
}

func workAttributes(wk *wire.Work, transport wire.Transport) []attribute.KeyValue {
	kv := []attribute.KeyValue{
		RunIDKey.String(wk.RunID), TenantKey.String(wk.Tenant),
		AdapterKey.String(wk.Adapter), ProfileKey.String(wk.Profile), TransportKey.String(string(transport)),
		semconv.GenAIAgentName(wk.Profile),
		semconv.GenAIProviderNameKey.String(wk.Pin.Provider), semconv.GenAIRequestModel(wk.Pin.Model),
	}
	if wk.Conversation != "" {
		kv = append(kv, semconv.GenAIConversationID(wk.Conversation))
	}
	return kv
}

// Attempt is the span of one attempt a runner makes at a run, with a
// child span for each tool use in it. Its methods are not safe for
// concurrent use: the goroutine that drives the attempt calls them.
type Attempt struct {
	span  trace.Span
	ctx   context.Context // holds span: the parent of the tool spans
	tools map[string]trace.Span
	tr    trace.Tracer
}

// StartAttempt starts the span of attempt n at the run of wk, the child
// of the trace context h (the work message's headers) carries, through
// an adapter of transport. For a model API (remote) the operation is a
// chat, for an agent (a CLI, the fixture) an invoke_agent. It returns
// nil with t nil.
func (t *Tracing) StartAttempt(ctx context.Context, h nats.Header, wk *wire.Work, transport wire.Transport, n int) *Attempt {
	if t == nil {
		return nil
	}
	op := semconv.GenAIOperationNameInvokeAgent
	if transport == wire.TransportRemote {
		op = semconv.GenAIOperationNameChat
	}
	kv := append(workAttributes(wk, transport), op, AttemptKey.Int(n))
	ctx, span := t.tracer.Start(Extract(ctx, h), op.Value.AsString()+" "+wk.Pin.Model,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(kv...))
	return &Attempt{span: span, ctx: ctx, tr: t.tracer}
}

// Chunk records what the attempt's chunk c says of the run: the model
// that answered, token usage (cache tokens where the provider reports
// them), cost and finish reason from the result, the provider's error
// class, and the start or end of a tool use (its own span, named by the
// tool and its call id). Content, tool arguments and tool results are
// never read.
func (a *Attempt) Chunk(c *wire.Chunk) {
	if a == nil {
		return
	}
	if c.Metadata.Model != "" {
		a.span.SetAttributes(semconv.GenAIResponseModel(c.Metadata.Model))
	}
	switch c.Type {
	case wire.ChunkToolUse:
		a.toolUse(c)
	case wire.ChunkToolResult:
		a.toolResult(c)
	case wire.ChunkResult:
		if u := c.Metadata.Usage; u != nil {
			a.span.SetAttributes(semconv.GenAIUsageInputTokens(int(u.InputTokens)), semconv.GenAIUsageOutputTokens(int(u.OutputTokens)))
			if u.CacheReadTokens > 0 {
				a.span.SetAttributes(semconv.GenAIUsageCacheReadInputTokens(int(u.CacheReadTokens)))
			}
			if u.CacheWriteTokens > 0 {
				a.span.SetAttributes(semconv.GenAIUsageCacheCreationInputTokens(int(u.CacheWriteTokens)))
			}
			if u.ReasoningTokens > 0 {
				a.span.SetAttributes(ReasonKey.Int64(u.ReasoningTokens))
			}
		}
		if c.Metadata.Cost != "" {
			a.span.SetAttributes(CostKey.String(c.Metadata.Cost))
		}
		if c.Metadata.StopReason != "" {
			a.span.SetAttributes(semconv.GenAIResponseFinishReasons(c.Metadata.StopReason))
		}
	case wire.ChunkError:
		class := string(c.Metadata.ErrorClass)
		if class == "" {
			class = string(wire.ProviderStreamError)
		}
		a.span.SetAttributes(semconv.ErrorTypeKey.String(class))
	}
}

func (a *Attempt) toolUse(c *wire.Chunk) {
	if c.IsDelta || len(a.tools) >= maxOpenTools {
		return
	}
	if _, open := a.tools[c.ToolID]; open {
		return
	}
	kv := []attribute.KeyValue{semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(c.ToolName)}
	if c.ToolID != "" {
		kv = append(kv, semconv.GenAIToolCallID(c.ToolID))
	}
	_, span := a.tr.Start(a.ctx, semconv.GenAIOperationNameExecuteTool.Value.AsString()+" "+c.ToolName,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(kv...))
	if a.tools == nil {
		a.tools = map[string]trace.Span{}
	}
	a.tools[c.ToolID] = span
}

func (a *Attempt) toolResult(c *wire.Chunk) {
	span, ok := a.tools[c.ToolID]
	if !ok {
		return
	}
	delete(a.tools, c.ToolID)
	if c.IsError {
		span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
		span.SetStatus(codes.Error, "tool_error")
	}
	span.End()
}

// Ended records the run's terminal status as this attempt published it:
// its state and, if it failed, its error class (never the message).
func (a *Attempt) Ended(st wire.Status) {
	if a == nil {
		return
	}
	a.span.SetAttributes(StateKey.String(string(st.State)))
	if st.Error != nil {
		failed(a.span, st.Error)
	}
}

// Retried records that the attempt failed before its first output with
// we and the run is handed back for another attempt.
func (a *Attempt) Retried(we *wire.Error) {
	if a == nil {
		return
	}
	a.span.SetAttributes(RetryKey.Bool(true))
	failed(a.span, we)
}

// End ends the attempt's span, and the spans of tool uses still open
// (their results never came in this attempt). It is idempotent.
func (a *Attempt) End() {
	if a == nil {
		return
	}
	for id, span := range a.tools {
		span.End()
		delete(a.tools, id)
	}
	a.span.End()
}

// failed marks span failed with we's class.
func failed(span trace.Span, we *wire.Error) {
	span.SetAttributes(semconv.ErrorTypeKey.String(string(we.Class)))
	span.SetStatus(codes.Error, string(we.Class))
}

// endWith ends span, failed with the class of err when it is a
// *wire.Error, and with the type of error otherwise (never its message:
// an error may quote a request).
func endWith(span trace.Span, err error) {
	if err != nil {
		var we *wire.Error
		if errors.As(err, &we) && we.Class != "" {
			failed(span, we)
		} else {
			span.SetAttributes(semconv.ErrorTypeKey.String(semconv.ErrorTypeOther.Value.AsString()))
			span.SetStatus(codes.Error, "error")
		}
	}
	span.End()
}
