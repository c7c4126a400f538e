package anthropic_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/anthropic"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestConformance runs the conformance suite over the anthropic adapter,
// every stream served over loopback HTTP from its recorded fixture.
func TestConformance(t *testing.T) {
	t.Parallel()
	front := startAnthropicFront(t)
	conformance.Run(t, anthropicSubject(front.URL))
}

// anthropicCase is a request whose prompt selects the recorded case.
func anthropicCase(name string, extra ...any) map[string]any {
	r := map[string]any{"prompt": anthropicCasePrefix + name}
	for i := 0; i+1 < len(extra); i += 2 {
		r[extra[i].(string)] = extra[i+1]
	}
	return r
}

const anthropicCasePrefix = "fixture case: "

func anthropicSubject(baseURL string) conformance.Subject {
	readFile := map[string]any{"name": "fs.read_file", "input_schema": map[string]any{"type": "object",
		"properties": map[string]any{"path": map[string]any{"type": "string"}, "max_bytes": map[string]any{"type": "integer"}}}}
	return conformance.Subject{
		Name: anthropic.Name,
		// The suite's cli.Config is for subprocess adapters; a
		// remote one takes its remote.Config, here the loopback front.
		New: func(cli.Config) (adapter.Adapter, error) {
			return anthropic.New(remote.Config{BaseURL: baseURL, AllowLoopback: true,
				Credential: secret.New("sk-ant-api03-conformance-key-0123456789")})
		},
		Model:   "claude-sonnet-4-5",
		Request: func(p string) map[string]any { return map[string]any{"prompt": p} },
		Streams: []conformance.Stream{
			{Name: "text"}, // the suite's own prompt: the plain text case
			{Name: "thinking", Request: anthropicCase("thinking", "thinking_budget", 2048)},
			{Name: "tool-call", Request: anthropicCase("tool-call", "tools", []any{readFile})},
			{Name: "usage", Request: anthropicCase("usage", "thinking_budget", 1024)},
			{Name: "web-search", Request: anthropicCase("web-search", "web_search_max_uses", 3)},
			{Name: "stream-error", Request: anthropicCase("stream-error")},
			{Name: "cut", Request: anthropicCase("cut")},
			{Name: "truncated", Request: anthropicCase("truncated")},
			{Name: "unknown-event", Request: anthropicCase("unknown-event")},
			{Name: "not-sse", Request: anthropicCase("not-sse")},
			{Name: "http-401", Request: anthropicCase("http-401")},
			{Name: "http-429", Request: anthropicCase("http-429")},
			{Name: "http-500", Request: anthropicCase("http-500")},
			{Name: "http-529", Request: anthropicCase("http-529")},
			{Name: "http-400-context", Request: anthropicCase("http-400-context")},
			{Name: "http-413", Request: anthropicCase("http-413")},
		},
		Errors:       []string{"stream-error"},
		ServerErrors: []string{"http-500"},
		Slow:         conformance.Stream{Name: "slow", Request: anthropicCase(anthropicSlow)},
		Reasoning:    "I recall it is 42",
	}
}

// anthropicSlow is the case the front paces: the text stream, one event
// every anthropicPace, so that it can be cancelled after its first chunk.
const (
	anthropicSlow = "slow"
	anthropicPace = 20 * time.Millisecond
)

// startAnthropicFront starts the fixture server and, in front of it, a
// loopback server that picks the case from the request's first prompt.
// The suite builds one adapter per stream through Subject.New, which is
// not told the stream, so the adapter's base URL cannot name the case
// (replay's URL()+"/"+case); the front does it instead. A cut in
// the recorded response is passed on as a cut.
func startAnthropicFront(t *testing.T) *httptest.Server {
	t.Helper()
	fx := conformance.ReplayServer(t, anthropic.Name)
	text := conformance.Recorded(t, anthropic.Name, "text")
	slow := conformance.Paced(text, conformance.SSEEvents(text.Body), anthropicPace)
	client := &http.Client{}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		name := "text"
		var req struct {
			Messages []struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(body, &req) == nil && len(req.Messages) > 0 && len(req.Messages[0].Content) > 0 {
			if c, ok := strings.CutPrefix(req.Messages[0].Content[0].Text, anthropicCasePrefix); ok {
				name = c
			}
		}
		if name == anthropicSlow {
			r.Body = io.NopCloser(bytes.NewReader(body))
			slow.ServeHTTP(w, r)
			return
		}
		out, err := http.NewRequestWithContext(r.Context(), r.Method, fx.URL()+"/"+name+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		resp, err := client.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(resp.StatusCode)
		if _, err := io.Copy(w, resp.Body); err != nil {
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the upstream cut: cut the client too
		}
	}))
	t.Cleanup(func() {
		front.Close()
		client.CloseIdleConnections()
	})
	return front
}
