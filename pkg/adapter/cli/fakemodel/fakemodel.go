package fakemodel

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Scenario is what the fake answers.
type Scenario string

// The scenarios. Auto is valid only as a server's scenario: it selects one
// of the others per request.
const (
	Auto         Scenario = ""
	Answer       Scenario = "answer"
	ToolCall     Scenario = "tool"
	Thinking     Scenario = "thinking"
	Unauthorized Scenario = "401"
	RateLimited  Scenario = "429"
	ServerError  Scenario = "500"
	// Stall opens the stream (Anthropic message_start, Responses
	// response.created, Gemini headers only) and then sends nothing until
	// the client goes away or the server closes: a hung model.
	Stall Scenario = "stall"
)

// Scenarios lists every scenario a request can get, in a fixed order.
var Scenarios = []Scenario{Answer, ToolCall, Thinking, Unauthorized, RateLimited, ServerError, Stall}

// The scripted content.
const (
	AnswerText = "The answer is 42."
	// ThinkingText is the thinking the Thinking scenario streams first.
	ThinkingText = "The user asks for the answer; it is 42."
	// PreambleText is the text before a tool call (Anthropic only, as
	// captured).
	PreambleText = "I'll run the command."
	// ToolCommand is the shell command of the ToolCall scenario.
	ToolCommand = "echo hello-from-tool"
	// ToolOutput is what ToolCommand prints.
	ToolOutput = "hello-from-tool"
	// ToolDoneText answers a tool result that holds ToolOutput.
	ToolDoneText = "The command printed hello-from-tool. Done."
	// ToolMismatchText answers a tool result without ToolOutput.
	ToolMismatchText = "The command did not print the expected text."
	// NoToolText answers a ToolCall request that offered no shell tool.
	NoToolText = "No shell tool was offered."
)

// Marker returns the word that selects s on an Auto server when it appears
// in the latest user message, for example "[[fakemodel:tool]]".
func Marker(s Scenario) string { return "[[fakemodel:" + string(s) + "]]" }

// status returns the HTTP status of an error scenario, or 0.
func (s Scenario) status() int {
	switch s {
	case Unauthorized:
		return http.StatusUnauthorized
	case RateLimited:
		return http.StatusTooManyRequests
	case ServerError:
		return http.StatusInternalServerError
	}
	return 0
}

// Valid reports whether s is Auto or one of Scenarios.
func (s Scenario) Valid() bool { return s == Auto || slices.Contains(Scenarios, s) }

// maxBody bounds a request body (Claude Code sends ~150 KB).
const maxBody = 32 << 20

// Server is a fake model API on a loopback address. Its methods are safe
// for concurrent use.
type Server struct {
	scenario Scenario

	mu       sync.Mutex
	reqs     []Request
	started  bool
	closed   bool
	handlers sync.WaitGroup // requests in flight, counted under mu while !closed

	srv    *http.Server
	url    string
	served chan struct{} // closed when Serve has returned
	stop   chan struct{} // closed by Close: abandon in-flight streams
	once   sync.Once
}

// New returns an unstarted server that answers every request with
// scenario (Auto: chosen per request by Marker). It starts nothing.
func New(scenario Scenario) *Server {
	return &Server{scenario: scenario, stop: make(chan struct{}), served: make(chan struct{})}
}

// Start listens on addr, a loopback host:port ("" means 127.0.0.1:0, any
// free port), and serves in the background until Close. It returns once
// the listener is open, so URL is valid. Starting twice, a non-loopback
// address or an invalid scenario is an error.
func (s *Server) Start(addr string) error {
	if !s.scenario.Valid() {
		return fmt.Errorf("fakemodel: unknown scenario %q", s.scenario)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("fakemodel: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("fakemodel: address %q is not a loopback address", addr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return errors.New("fakemodel: server already started or closed")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("fakemodel: listen: %w", err)
	}
	s.started = true
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	return nil
}

// URL is the server's base URL, "http://127.0.0.1:<port>", without a
// path; empty before Start. Point ANTHROPIC_BASE_URL, a Codex provider's
// base_url (with "/v1"), GOOGLE_GEMINI_BASE_URL or a Pi provider's baseUrl
// at it.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Close stops the server: it stops accepting, ends streams in flight and
// blocks until every goroutine it started has returned. It is idempotent
// and may be called on a server never started.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		started := s.started
		s.mu.Unlock()
		close(s.stop)
		if started {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.srv.Shutdown(ctx); err != nil {
				_ = s.srv.Close()
			}
			<-s.served
		}
		s.handlers.Wait() // also when mounted in another server (ServeHTTP)
	})
	return nil
}

// Requests returns a copy of every request served so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
}

// ServeHTTP routes a request to its API. It is the handler Start serves and
// can also be mounted in an httptest.Server.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "fakemodel: closed", http.StatusServiceUnavailable)
		return
	}
	s.handlers.Add(1)
	s.mu.Unlock()
	defer s.handlers.Done()

	api, model, stream := route(r)
	rec := Request{API: api, Method: r.Method, Path: r.URL.RequestURI(), Model: model, Key: requestKey(r)}
	if r.URL.Path == "/" && (r.Method == http.MethodHead || r.Method == http.MethodGet) {
		// Claude Code probes its base URL (HEAD /) before a session to
		// warm the connection; any answer will do.
		rec.Status, rec.Reply = http.StatusOK, "probe"
		s.record(rec)
		w.WriteHeader(http.StatusOK)
		return
	}
	if api == "" || r.Method != http.MethodPost {
		rec.Status = http.StatusNotFound
		rec.Reply = "no such route"
		s.record(rec)
		http.Error(w, "fakemodel: no route for "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	body, err := readBody(r)
	if err != nil {
		rec.Status = http.StatusBadRequest
		rec.Reply = "unreadable body: " + err.Error()
		s.record(rec)
		writeError(w, api, http.StatusBadRequest, err.Error())
		return
	}
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		rec.Status = http.StatusBadRequest
		rec.Reply = "body is not a JSON object: " + err.Error()
		s.record(rec)
		writeError(w, api, http.StatusBadRequest, "body is not a JSON object")
		return
	}
	parsed := parse(api, raw)
	if rec.Model == "" {
		rec.Model = parsed.model
	}
	if api != Gemini {
		stream = parsed.stream
	}
	rec.Stream, rec.System, rec.Messages, rec.Tools = stream, parsed.system, parsed.messages, parsed.toolNames()

	a := s.answer(parsed)
	rec.Scenario, rec.Reply = a.scenario, a.describe()
	if code := a.scenario.status(); code != 0 {
		rec.Status = code
		s.record(rec)
		writeScenarioError(w, api, a.scenario)
		return
	}
	rec.Status = http.StatusOK
	s.record(rec)
	reply := reply{answer: a, model: rec.Model, inputTokens: max(1, len(body)/4)}
	if a.scenario == Stall {
		writeStall(w, r, reply, s.stop)
		return
	}
	switch api {
	case Anthropic:
		writeAnthropic(w, reply, stream, s.stop)
	case Responses:
		writeResponses(w, reply, stream, s.stop)
	case Gemini:
		writeGemini(w, reply, stream, s.stop)
	}
}

// route maps a request to its API, the model named in the path (Gemini)
// and whether the path asks for a stream (Gemini).
func route(r *http.Request) (api API, model string, stream bool) {
	p := r.URL.Path
	switch {
	case p == "/v1/messages":
		return Anthropic, "", false
	case p == "/v1/responses":
		return Responses, "", false
	case strings.HasPrefix(p, "/v1beta/models/"):
		m, method, ok := strings.Cut(strings.TrimPrefix(p, "/v1beta/models/"), ":")
		if !ok || m == "" {
			return "", "", false
		}
		switch method {
		case "streamGenerateContent":
			return Gemini, m, true
		case "generateContent":
			return Gemini, m, false
		}
	}
	return "", "", false
}

func readBody(r *http.Request) ([]byte, error) {
	var rd io.Reader = http.MaxBytesReader(nil, r.Body, maxBody)
	switch enc := strings.ToLower(r.Header.Get("Content-Encoding")); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		defer zr.Close()
		rd = io.LimitReader(zr, maxBody)
	default:
		return nil, fmt.Errorf("content-encoding %q is not supported", enc)
	}
	return io.ReadAll(rd)
}

// answer is what one request gets.
type answer struct {
	scenario Scenario
	// kind is one of "text", "thinking", "tool_call", "tool_done".
	kind string
	text string // the final text of "text", "thinking", "tool_done"
	tool *shellCall
}

func (a answer) describe() string {
	if code := a.scenario.status(); code != 0 {
		return fmt.Sprintf("error %d", code)
	}
	if a.tool != nil {
		return "tool_call " + a.tool.name
	}
	return a.kind
}

// answer decides the reply to one parsed request.
func (s *Server) answer(p parsed) answer {
	sc := s.scenario
	if sc == Auto {
		sc = Answer
		latest := p.latestUserText()
		for _, c := range Scenarios {
			if strings.Contains(latest, Marker(c)) {
				sc = c
				break
			}
		}
	}
	a := answer{scenario: sc, kind: "text", text: AnswerText}
	switch {
	case sc.status() != 0:
		a.kind = "error"
	case sc == Stall:
		a.kind = "stall"
	case p.followsToolResult():
		a.kind, a.text = "tool_done", ToolMismatchText
		if strings.Contains(p.lastToolResult(), ToolOutput) {
			a.text = ToolDoneText
		}
	case sc == Thinking:
		a.kind = "thinking"
	case sc == ToolCall:
		call, ok := p.shellCall()
		if !ok {
			a.text = NoToolText
			break
		}
		a.kind, a.tool = "tool_call", &call
	}
	return a
}

// reply is an answer with what each wire format needs around it.
type reply struct {
	answer
	model       string
	inputTokens int
}

func (r reply) outputTokens() int {
	n := len(r.text)
	if r.tool != nil {
		n = len(r.tool.argsJSON()) + len(PreambleText)
	}
	return max(1, n/4)
}

func (r reply) thinkingTokens() int {
	if r.kind != "thinking" {
		return 0
	}
	return max(1, len(ThinkingText)/4)
}

// split cuts s in two halves, as a model streams text in pieces.
func split(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	return []string{s[:len(s)/2], s[len(s)/2:]}
}

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// requestKey is the credential r carried, as the APIs take one.
func requestKey(r *http.Request) string {
	for _, h := range []string{"X-Api-Key", "X-Goog-Api-Key"} {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return v
	}
	return r.URL.Query().Get("key")
}
