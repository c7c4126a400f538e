package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// envRealBin opts in to TestRealCLI: the path of a real codex binary
// (npm install @openai/codex@0.171.0). The test serves the OpenAI
// Responses API on loopback and needs nothing else.
const envRealBin = "CODEX_E2E_BIN"

// TestRealCLI drives the real CLI through the adapter: a new thread, its
// resumption (same id, the run's own usage from the real rollout), and an
// HTTP 500 with the attempt policy bounding the CLI's retries.
func TestRealCLI(t *testing.T) {
	bin := os.Getenv(envRealBin)
	if bin == "" {
		t.Skipf("set %s to a codex %s binary to run", envRealBin, Version)
	}
	var requests, fail atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := requests.Add(1)
		if fail.Load() == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"message":"boom","type":"server_error","code":null}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(v map[string]any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
		}
		id := fmt.Sprintf("resp_%d", n)
		send(map[string]any{"type": "response.created", "response": map[string]any{"id": id}})
		send(map[string]any{"type": "response.output_item.done", "item": map[string]any{"type": "message", "role": "assistant", "id": "msg_1",
			"content": []any{map[string]any{"type": "output_text", "text": "The answer is 42."}}}})
		send(map[string]any{"type": "response.completed", "response": map[string]any{"id": id, "usage": map[string]any{
			"input_tokens": 100, "input_tokens_details": map[string]any{"cached_tokens": 10},
			"output_tokens": 20, "output_tokens_details": map[string]any{"reasoning_tokens": 5}, "total_tokens": 120}}})
	}))
	defer srv.Close()

	e := newEnv(t, "model = \"gpt-5.5\"\nmodel_provider = \"fake\"\ncheck_for_update_on_startup = false\n"+
		"[model_providers.fake]\nname = \"fake\"\nbase_url = \""+srv.URL+"/v1\"\nenv_key = \"FAKE_OPENAI_API_KEY\"\nwire_api = \"responses\"\n"+
		"[analytics]\nenabled = false\n[feedback]\nenabled = false\n[features]\nplugins = false\nremote_plugin = false\napps = false\n")
	cfg := DefaultConfig()
	cfg.Binary, cfg.WorkspaceRoot = bin, e.root
	cfg.EnvSet = map[string]string{EnvCodexHome: e.home, "FAKE_OPENAI_API_KEY": "sk-fake-0000", "HOME": e.home}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	run := func(req map[string]any, maxAttempts int) []wire.Chunk {
		t.Helper()
		b, _ := wire.Marshal(req)
		v, err := a.Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var out []wire.Chunk
		for c, err := range a.Stream(ctx, adapter.Call{Request: v, Runtime: map[string]any{"workspace": "sub"}, Model: "gpt-5.5", MaxAttempts: maxAttempts}) {
			if err != nil {
				t.Fatalf("stream: %v (chunks %v)", err, out)
			}
			out = append(out, c)
		}
		return out
	}
	wantUsage := wire.Usage{InputTokens: 90, CacheReadTokens: 10, OutputTokens: 15, ReasoningTokens: 5}

	first := run(map[string]any{"prompt": "resume"}, 3) // a prompt that is also a subcommand name
	if len(first) != 3 || first[0].Metadata.SessionID == "" || first[1].Content != "The answer is 42." ||
		first[2].Metadata.Usage == nil || *first[2].Metadata.Usage != wantUsage {
		t.Fatalf("first run: %+v", first)
	}
	id := first[0].Metadata.SessionID

	second := run(map[string]any{"prompt": "-x what was it?", ResumeField: id, "sandbox": "read-only"}, 3)
	if len(second) != 3 || second[0].Metadata.SessionID != id || second[2].Metadata.Usage == nil || *second[2].Metadata.Usage != wantUsage {
		t.Fatalf("resumed run (want thread %s, the run's own usage %+v): %+v", id, wantUsage, second)
	}

	fail.Store(1)
	requests.Store(0)
	third := run(map[string]any{"prompt": "hi"}, 2)
	last := third[len(third)-1]
	if last.Type != wire.ChunkError || last.Metadata.ErrorClass != wire.ProviderError {
		t.Fatalf("failed run: %+v", third)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("the CLI made %d requests, want MaxAttempts = 2", n)
	}
}
