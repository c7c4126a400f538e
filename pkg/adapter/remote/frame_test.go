package remote_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

var (
	caps    = wire.Capabilities{Transport: wire.TransportRemote, ReportsUsage: true}
	system  = wire.Chunk{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: "api", Capabilities: &caps}}
	text    = wire.Chunk{Type: wire.ChunkText, Content: "The answer", IsDelta: true}
	result  = wire.Chunk{Type: wire.ChunkResult, Metadata: wire.Metadata{StopReason: "end_turn"}}
	failure = wire.Chunk{Type: wire.ChunkError, Content: "api: overloaded", IsError: true, Metadata: wire.Metadata{ErrorClass: wire.ProviderQuotaError}}
)

type request struct{ Prompt string }

// script is an attempt that emits all its chunks, one call each, whatever
// emit answers, then returns err; it records the first error emit
// answered.
type script struct {
	chunks  []wire.Chunk
	err     error
	emitErr error
}

func (s *script) attempt(_ context.Context, _ request, _ adapter.Call, emit remote.Emit) error {
	for _, c := range s.chunks {
		if err := emit(c); err != nil && s.emitErr == nil {
			s.emitErr = err
		}
	}
	return s.err
}

// outcome is what the consumer of a Stream saw: its chunks, the last
// error and how many errors were yielded.
type outcome struct {
	chunks []wire.Chunk
	err    error
	errs   int
}

// collect ranges over a's Stream, breaking after chunk i when stop(i).
func collect(ctx context.Context, a adapter.Adapter, call adapter.Call, stop func(i int) bool) outcome {
	var o outcome
	for c, err := range a.Stream(ctx, call) {
		if err != nil {
			o.err = err
			o.errs++
			continue
		}
		o.chunks = append(o.chunks, c)
		if stop != nil && stop(len(o.chunks)-1) {
			break
		}
	}
	return o
}

// newFrame returns a remote adapter whose attempt is attempt.
func newFrame(t *testing.T, attempt func(ctx context.Context, req request, call adapter.Call, emit remote.Emit) error) adapter.Adapter {
	t.Helper()
	a, err := remote.New(remote.Spec[request]{
		Name:        "api",
		Declaration: remote.Declaration{Capabilities: caps, TokenClasses: []string{"input", "output"}, MaxPricedContext: 1000},
		Decode: func(b []byte) (request, error) {
			if len(b) == 0 {
				return request{}, wire.Errorf(wire.AgenticRequestValidationError, "empty request")
			}
			return request{Prompt: string(b)}, nil
		},
		Attempt: attempt,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func call(t *testing.T, a adapter.Adapter) adapter.Call {
	t.Helper()
	req, err := a.Validate([]byte("hi"))
	if err != nil {
		t.Fatal(err)
	}
	return adapter.Call{RunID: "r1", Request: req, Attempt: 1, MaxAttempts: 1}
}

// TestFrameRefusesBrokenStreams: a stream that breaks a rule is cut at the
// chunk that breaks it and ends with a typed ProviderProtocolError, and
// the attempt is told the stream has ended.
func TestFrameRefusesBrokenStreams(t *testing.T) {
	tests := []struct {
		name  string
		in    []wire.Chunk
		err   error // the attempt's own error, after its chunks
		want  int   // chunks the consumer sees
		isErr bool  // the stream ends with a ProviderProtocolError
		ended bool  // emit answers ErrEnded (the frame ended the stream)
	}{
		{name: "conforming", in: []wire.Chunk{system, text, result}, want: 3},
		{name: "unknown chunk type", in: []wire.Chunk{system, {Type: "banner"}, result}, want: 1, isErr: true, ended: true},
		{name: "is_error on a text chunk", in: []wire.Chunk{system, {Type: wire.ChunkText, Content: "x", IsError: true}}, want: 1, isErr: true, ended: true},
		{name: "error chunk without is_error", in: []wire.Chunk{system, {Type: wire.ChunkError, Content: "x"}}, want: 1, isErr: true, ended: true},
		{name: "text after the result", in: []wire.Chunk{system, result, text}, want: 2, isErr: true, ended: true},
		{name: "a second result", in: []wire.Chunk{system, result, result}, want: 2, isErr: true, ended: true},
		{name: "no result", in: []wire.Chunk{system, text}, want: 2, isErr: true},
		{name: "nothing at all", want: 0, isErr: true},
		{name: "chunks after the error chunk", in: []wire.Chunk{system, failure, text, result}, want: 2, ended: true},
		{name: "an error after the error chunk", in: []wire.Chunk{system, failure}, err: wire.Errorf(wire.ProviderTransportError, "cut"), want: 2, ended: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{chunks: tt.in, err: tt.err}
			a := newFrame(t, s.attempt)
			o := collect(context.Background(), a, call(t, a), nil)
			if len(o.chunks) != tt.want {
				t.Errorf("%d chunks yielded, want %d: %v", len(o.chunks), tt.want, o.chunks)
			}
			var we *wire.Error
			switch {
			case o.errs > 1:
				t.Errorf("%d errors yielded; the stream ends once", o.errs)
			case tt.isErr && (!errors.As(o.err, &we) || we.Class != wire.ProviderProtocolError || we.Retryable):
				t.Errorf("err = %v, want a non-retryable ProviderProtocolError", o.err)
			case !tt.isErr && o.err != nil:
				t.Errorf("err = %v, want none", o.err)
			}
			if got := errors.Is(s.emitErr, remote.ErrEnded); got != tt.ended || (!tt.ended && s.emitErr != nil) {
				t.Errorf("emit answered %v, want ErrEnded %t", s.emitErr, tt.ended)
			}
		})
	}
}

// TestFrameAttemptError: the attempt's failure is the stream's end, after
// the chunks already yielded.
func TestFrameAttemptError(t *testing.T) {
	cut := wire.Errorf(wire.ProviderTransportError, "api: the stream broke off")
	a := newFrame(t, (&script{chunks: []wire.Chunk{system, text}, err: cut}).attempt)
	o := collect(context.Background(), a, call(t, a), nil)
	if len(o.chunks) != 2 || o.errs != 1 || !errors.Is(o.err, cut) {
		t.Errorf("chunks %v, err %v (%d errors); want 2 chunks, then the attempt's error", o.chunks, o.err, o.errs)
	}
}

// TestFrameCancellation: once ctx ends, emit yields nothing more, however
// much the attempt has left, and the stream ends with ctx's cause even
// when the attempt then returns nil.
func TestFrameCancellation(t *testing.T) {
	for _, swallow := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		var emitted error
		a := newFrame(t, func(_ context.Context, _ request, _ adapter.Call, emit remote.Emit) error {
			if err := emit(system); err != nil {
				return err
			}
			cancel()
			emitted = emit(text, result)
			if swallow {
				return nil // as a reader torn down at the cancel may end cleanly
			}
			return emitted
		})
		o := collect(ctx, a, call(t, a), nil)
		if len(o.chunks) != 1 || !errors.Is(o.err, context.Canceled) || !errors.Is(emitted, context.Canceled) {
			t.Errorf("swallow %t: chunks %v, err %v, emit %v; want the system chunk, then the cancellation", swallow, o.chunks, o.err, emitted)
		}
	}
}

// TestFrameConsumerStops: breaking out of the loop ends the attempt: emit
// answers ErrEnded and nothing more is yielded.
func TestFrameConsumerStops(t *testing.T) {
	s := &script{chunks: []wire.Chunk{system, text, result}, err: wire.Errorf(wire.ProviderError, "late")}
	a := newFrame(t, s.attempt)
	o := collect(context.Background(), a, call(t, a), func(int) bool { return true })
	if len(o.chunks) != 1 || o.err != nil || !errors.Is(s.emitErr, remote.ErrEnded) {
		t.Errorf("chunks %v, err %v, emit %v; want one chunk, no error and ErrEnded", o.chunks, o.err, s.emitErr)
	}
}

// TestFrameRequest: the frame validates with the Spec's Decode and refuses
// a call whose request Validate did not return, before the attempt runs.
func TestFrameRequest(t *testing.T) {
	ran := false
	a := newFrame(t, func(context.Context, request, adapter.Call, remote.Emit) error { ran = true; return nil })
	if req, err := a.Validate(nil); req != nil || !errors.Is(err, wire.AgenticRequestValidationError) {
		t.Errorf("Validate(nil) = %v, %v; want nil and the Decode error", req, err)
	}
	o := collect(context.Background(), a, adapter.Call{Request: "hi"}, nil)
	if ran || len(o.chunks) != 0 || !errors.Is(o.err, wire.AgenticHandlerError) {
		t.Errorf("attempt ran %t, chunks %v, err %v; want an AgenticHandlerError before the attempt", ran, o.chunks, o.err)
	}
}

func TestFrameDeclaration(t *testing.T) {
	a := newFrame(t, (&script{}).attempt)
	if a.Name() != "api" || a.Capabilities() != caps || a.RuntimeKeys() != nil {
		t.Errorf("declares %s %+v %v", a.Name(), a.Capabilities(), a.RuntimeKeys())
	}
	if got := a.(adapter.TokenClasses).TokenClasses(); len(got) != 2 || got[0] != "input" {
		t.Errorf("TokenClasses() = %v", got)
	}
	if got := a.(adapter.PricedContext).MaxPricedContext(); got != 1000 {
		t.Errorf("MaxPricedContext() = %d", got)
	}
	for _, c := range []wire.Capabilities{
		{Transport: wire.TransportSubprocess},
		{Transport: wire.TransportRemote, Resumable: true},
	} {
		if _, err := remote.New(remote.Spec[request]{Name: "api", Declaration: remote.Declaration{Capabilities: c}}); err == nil {
			t.Errorf("New accepted the declaration %+v", c)
		}
	}
}

// TestPostAndStatusError: Post sends the JSON body with its headers, and a
// non-2xx answer is a *StatusError carrying the status, whose wire error
// (a 429: retryable, with its Retry-After) errors.As and errors.Is find
// through it.
func TestPostAndStatusError(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"message":"slow down"}}`))
	}))
	t.Cleanup(srv.Close)
	cfg := remote.Config{BaseURL: srv.URL, AllowLoopback: true, Credential: secret.New("sk-test-0123456789")}
	_, err := remote.Post(context.Background(), cfg, "api", cfg.URL("v1/chat"), "text/event-stream", []byte(`{}`),
		http.Header{"X-Api-Version": {"7"}, "Authorization": cfg.Bearer()["Authorization"]})
	if got.Get("Content-Type") != "application/json" || got.Get("Accept") != "text/event-stream" ||
		got.Get("X-Api-Version") != "7" || got.Get("Authorization") != "Bearer sk-test-0123456789" {
		t.Errorf("headers sent: %v", got)
	}
	var se *remote.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusTooManyRequests || se.Provider != "api" {
		t.Fatalf("err = %v (%T), want a *StatusError of 429", err, err)
	}
	var we *wire.Error
	if !errors.As(err, &we) || we.Class != wire.ProviderQuotaError || !we.Retryable || we.RetryAfterMS != 3000 || !errors.Is(err, wire.ProviderError) {
		t.Errorf("wire error %+v, want a retryable ProviderQuotaError retried after 3000 ms", we)
	}
	re := se.WithClass(wire.ProviderContextError)
	if re.StatusCode != se.StatusCode || re.Err.Class != wire.ProviderContextError || se.Err.Class != wire.ProviderQuotaError ||
		re.Err.Retryable != se.Err.Retryable || re.Err.RetryAfterMS != se.Err.RetryAfterMS {
		t.Errorf("WithClass: %v from %v", re, se)
	}
	if (remote.Config{}).Bearer() != nil {
		t.Errorf("Bearer() of no credential is not nil")
	}
}
