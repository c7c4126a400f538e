package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// ReplayServer serves the recorded responses of the remote adapter named
// name (testdata/remote/<name>) on loopback until t ends; case c's base
// URL is URL()+"/"+c.
func ReplayServer(t testing.TB, name string) *replay.Server {
	t.Helper()
	srv, err := replay.Start(Testdata(t, "remote", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// Recorded returns the recorded response testdata/remote/<name>/<c>.json
// (its only or first response).
func Recorded(t testing.TB, name, c string) replay.Response {
	t.Helper()
	b, err := os.ReadFile(Testdata(t, "remote", name, c+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Responses []replay.Response `json:"responses"`
		replay.Response
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s/%s.json: %v", name, c, err)
	}
	if len(f.Responses) > 0 {
		return f.Responses[0]
	}
	return f.Response
}

// RefusedURL returns the http URL of a loopback port nobody listens on,
// for a connect refusal.
func RefusedURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

// SilentURL returns the http URL of a loopback server that accepts every
// connection and never answers, until t ends: an attempt against it ends
// at its attempt cap. Cleanup closes the listener and every connection and
// waits for the accepting goroutine.
func SilentURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// FailedAttempt is one way an attempt of a remote adapter fails, and how
// the attempt must end (FailedAttempts).
type FailedAttempt struct {
	Name string
	// BaseURL is where the adapter is pointed; AttemptTimeout, when not
	// 0, is its attempt cap.
	BaseURL        string
	AttemptTimeout time.Duration
	// Class and Retryable are the terminal error's; Chunks is how many
	// chunks come before it.
	Class     wire.Class
	Retryable bool
	Chunks    int
}

// FailedAttempts are the failures every remote adapter meets alike
// (docs/contract.md §4.5): a refused connection and the attempt cap,
// before any output, end in a retryable ProviderTransportError; the
// recorded http-500 of srv in a retryable ProviderError, its http-401 in a
// ProviderAuthError and its cut after cutChunks chunks in a
// ProviderTransportError, neither of them retryable. path follows each
// server's URL or case (the adapter's base path: "" for none, "/v1").
// The refused and silent servers live until t ends.
func FailedAttempts(t testing.TB, srv *replay.Server, path string, cutChunks int) []FailedAttempt {
	t.Helper()
	recorded := func(c string) string { return srv.URL() + "/" + c + path }
	return []FailedAttempt{
		{Name: "connect refused", BaseURL: RefusedURL(t) + path, Class: wire.ProviderTransportError, Retryable: true},
		{Name: "attempt cap", BaseURL: SilentURL(t) + path, AttemptTimeout: 100 * time.Millisecond, Class: wire.ProviderTransportError, Retryable: true},
		{Name: "http 500", BaseURL: recorded("http-500"), Class: wire.ProviderError, Retryable: true},
		{Name: "http 401", BaseURL: recorded("http-401"), Class: wire.ProviderAuthError},
		{Name: "cut after output", BaseURL: recorded("cut"), Class: wire.ProviderTransportError, Chunks: cutChunks},
	}
}

// Check fails t unless an attempt that yielded chunks and ended with err
// ended as f says.
func (f FailedAttempt) Check(t testing.TB, chunks []wire.Chunk, err error) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) || we.Class != f.Class || we.Retryable != f.Retryable {
		t.Errorf("err = %v, want class %s, retryable %t", err, f.Class, f.Retryable)
	}
	if len(chunks) != f.Chunks {
		t.Errorf("%d chunks before the failure, want %d:\n%s", len(chunks), f.Chunks, ChunksJSON(chunks))
	}
}

// SSEEvents cuts an event-stream body into its events, each with the blank
// line that ends it.
func SSEEvents(body string) []string { return strings.SplitAfter(body, "\n\n") }

// Paced writes resp's headers and status, then each of parts, flushed, pace
// apart, until the client goes away: a response slow enough for a stream
// to be cancelled, or to pass its deadline, in its middle (the replay
// server writes a body at once).
func Paced(resp replay.Response, parts []string, pace time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		for k, v := range resp.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(max(resp.Status, http.StatusOK))
		flusher, _ := w.(http.Flusher)
		for i, p := range parts {
			if i > 0 {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(pace):
				}
			}
			if _, err := io.WriteString(w, p); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	})
}

// PacedServer serves Paced(resp, parts, pace) on loopback until t ends and
// returns its URL.
func PacedServer(t testing.TB, resp replay.Response, parts []string, pace time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(Paced(resp, parts, pace))
	t.Cleanup(srv.Close)
	return srv.URL
}

// CasePrefix starts a prompt that names the recorded case its stream is
// served (PromptCased).
const CasePrefix = "fixture-case:"

// PromptCased returns the remote adapter that build makes, rebuilt for
// every stream with the base URL (base) of the case its prompt names
// after CasePrefix, or of fallback when it names none. The suite builds an
// adapter per stream from one Subject and does not tell it the stream,
// while a remote adapter's recorded response is chosen by its base URL;
// everything but the URL is the real adapter's. prompt reads the prompt
// off a validated request.
func PromptCased(name, fallback string, base func(c string) string, build func(url string) (adapter.Adapter, error), prompt func(req any) string) (adapter.Adapter, error) {
	a, err := build(base(fallback))
	if err != nil {
		return nil, err
	}
	if a.Name() != name {
		return nil, fmt.Errorf("built %q, want %q", a.Name(), name)
	}
	return &promptCased{Adapter: a, base: base, build: build, prompt: prompt, fallback: fallback}, nil
}

// CaseRequest is the minimal request whose prompt names the recorded case
// c (PromptCased).
func CaseRequest(c string) map[string]any { return map[string]any{"prompt": CasePrefix + c} }

// CaseStreams returns a Stream for each recorded case, its request naming
// the case (CaseRequest).
func CaseStreams(cases ...string) []Stream {
	out := make([]Stream, 0, len(cases))
	for _, c := range cases {
		out = append(out, Stream{Name: c, Request: CaseRequest(c)})
	}
	return out
}

// CaseURLs returns the base URL of each recorded case of srv, with path
// (the provider's root under it, or "") appended; the case "slow" is
// served by the paced server at slow instead.
func CaseURLs(srv *replay.Server, slow, path string) func(c string) string {
	return func(c string) string {
		if c == "slow" {
			return slow + path
		}
		return srv.URL() + "/" + c + path
	}
}

type promptCased struct {
	adapter.Adapter // built for the fallback case: name, declaration, validation
	base            func(c string) string
	build           func(url string) (adapter.Adapter, error)
	prompt          func(req any) string
	fallback        string
}

func (c *promptCased) Stream(ctx context.Context, call adapter.Call) iter.Seq2[wire.Chunk, error] {
	name := c.fallback
	if p, ok := strings.CutPrefix(c.prompt(call.Request), CasePrefix); ok {
		name = p
	}
	a, err := c.build(c.base(name))
	if err != nil {
		return func(yield func(wire.Chunk, error) bool) { yield(wire.Chunk{}, err) }
	}
	return a.Stream(ctx, call)
}

// Call validates fields with a, as the router does, and returns the first
// attempt's call on model (run "run-1", three attempts allowed). It fails
// t if fields do not validate.
func Call(t testing.TB, a adapter.Adapter, model string, fields map[string]any) adapter.Call {
	t.Helper()
	req, err := a.Validate(Encode(t, fields))
	if err != nil {
		t.Fatalf("validate %v: %v", fields, err)
	}
	return adapter.Call{RunID: "run-1", Request: req, Attempt: 1, Model: model, MaxAttempts: 3}
}

// Outcome is one attempt as the runner sees it.
type Outcome struct {
	Chunks []wire.Chunk
	Err    error
	// Checkpoint is what the attempt saved, if Saved (CollectSaving).
	Checkpoint []byte
	Saved      bool
}

// Expect fails t unless o is what an attempt of an adapter declaring caps
// should have ended as: the chunks want (compared as JSON), then a clean
// end for a class "", else a *wire.Error of that class and retryability;
// and every stream rule kept (Check).
func (o Outcome) Expect(t testing.TB, caps wire.Capabilities, want []wire.Chunk, class wire.Class, retryable bool) {
	t.Helper()
	if got, want := ChunksJSON(o.Chunks), ChunksJSON(want); got != want {
		t.Errorf("chunks:\n%s\nwant:\n%s", got, want)
	}
	var we *wire.Error
	switch {
	case class == "" && o.Err != nil:
		t.Errorf("err = %v, want a clean end", o.Err)
	case class != "" && !errors.As(o.Err, &we):
		t.Errorf("err = %v (%T), want a *wire.Error of class %s", o.Err, o.Err, class)
	case class != "" && we.Class != class:
		t.Errorf("err = %v, want class %s", o.Err, class)
	case class != "" && we.Retryable != retryable:
		t.Errorf("err = %v, retryable %t, want %t", o.Err, we.Retryable, retryable)
	}
	for _, p := range Check(caps, o.Chunks, o.Err, Ran) {
		t.Errorf("stream rule: %s", p)
	}
}

// Collect ranges over one attempt of call to its end, within runTimeout
// (Drain).
func Collect(t testing.TB, a adapter.Adapter, call adapter.Call) Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	chunks, err := Drain(t, a.Stream(ctx, call))
	return Outcome{Chunks: chunks, Err: err}
}

// Drain ranges over a stream to its end and returns its chunks and its
// error. It fails t if anything follows the error, or an error comes with
// a non-zero chunk.
func Drain(t testing.TB, stream iter.Seq2[wire.Chunk, error]) ([]wire.Chunk, error) {
	t.Helper()
	var chunks []wire.Chunk
	var final error
	for c, err := range stream {
		if final != nil {
			t.Fatalf("the stream yielded (%+v, %v) after its error %v", c, err, final)
		}
		if err != nil {
			if !reflect.DeepEqual(c, wire.Chunk{}) {
				t.Errorf("the error %v came with a non-zero chunk %+v", err, c)
			}
			final = err
			continue
		}
		chunks = append(chunks, c)
	}
	return chunks, final
}

// CollectSaving is Collect with call's SaveCheckpoint recording what the
// attempt saves in the Outcome.
func CollectSaving(t testing.TB, a adapter.Adapter, call adapter.Call) Outcome {
	t.Helper()
	var saved []byte
	var ok bool
	call.SaveCheckpoint = func(b []byte) { saved, ok = b, true }
	o := Collect(t, a, call)
	o.Checkpoint, o.Saved = saved, ok
	return o
}

// ConfirmedSession is the session id of the first system chunk that
// carries one (metadata.session_id), or "" when none does.
func ConfirmedSession(chunks []wire.Chunk) string {
	for _, c := range chunks {
		if c.Type == wire.ChunkSystem && c.Metadata.SessionID != "" {
			return c.Metadata.SessionID
		}
	}
	return ""
}

// ChunksJSON is each chunk's JSON, one a line, for messages.
func ChunksJSON(chunks []wire.Chunk) string {
	var b strings.Builder
	for _, c := range chunks {
		j, _ := json.Marshal(c)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// RetriedStatus reports whether the recorded case c is an HTTP answer
// ("http-NNN", optionally followed by "-…") whose status the runner retries
// before any output: a 429, a 529 or any other 5xx (docs/contract.md
// §4.5). Any other case, a 400, 401 or 403 among them, is false.
func RetriedStatus(c string) bool {
	rest, ok := strings.CutPrefix(c, "http-")
	if !ok {
		return false
	}
	digits, _, _ := strings.Cut(rest, "-")
	code, err := strconv.Atoi(digits)
	return err == nil && (code == http.StatusTooManyRequests || code == 529 || code >= 500)
}

// Text is the text of chunks' text chunks, concatenated in order.
func Text(chunks []wire.Chunk) string {
	var sb strings.Builder
	for _, c := range chunks {
		if c.Type == wire.ChunkText {
			sb.WriteString(c.Content)
		}
	}
	return sb.String()
}
