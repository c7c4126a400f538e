package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// GET /v1/conversations/{id}/history gives a conversation's runs, in the
// order they were submitted, each with its prompt and chunks, to the
// tenant that ran them; another tenant's key, an unknown conversation
// and a bad id are refused.
func TestConversationHistory(t *testing.T) {
	e := start(t, gateway.Config{})
	var ids []string
	for _, p := range []string{"secret one", "secret two"} {
		id := e.submit(t, e.keyA, fmt.Sprintf(`{"profile":"fixture","conversation":"conv-h","request":{"prompt":%q}}`, p))
		e.ended(t, e.keyA, id)
		ids = append(ids, id)
	}
	code, body := e.do(t, e.keyA, "GET", "/v1/conversations/conv-h/history", "", nil)
	var h client.History
	if err := json.Unmarshal([]byte(body), &h); code != http.StatusOK || err != nil {
		t.Fatalf("A's history: %d %s (%v)", code, body, err)
	}
	if h.Conversation != "conv-h" || len(h.Runs) != 2 {
		t.Fatalf("A's history: %s; want 2 runs", body)
	}
	for i, r := range h.Runs {
		want := []string{"secret one", "secret two"}[i]
		if r.RunID != ids[i] || r.Prompt != want || r.State != wire.StateSucceeded || len(r.Chunks) == 0 {
			t.Errorf("run %d: %+v; want %s, prompt %q, succeeded, with chunks", i, r, ids[i], want)
		}
	}
	for _, tt := range []struct {
		key, path string
		code      int
		want      string
	}{
		{e.keyB, "/v1/conversations/conv-h/history", http.StatusNotFound, `"code":"conversation_not_found"`},
		{e.keyA, "/v1/conversations/conv-none/history", http.StatusNotFound, `"code":"conversation_not_found"`},
		{e.keyA, "/v1/conversations/a.b/history", http.StatusBadRequest, `"code":"invalid_request"`},
	} {
		code, body := e.do(t, tt.key, "GET", tt.path, "", nil)
		if code != tt.code || !strings.Contains(body, tt.want) || strings.Contains(body, "secret") {
			t.Errorf("GET %s: %d %s, want %d %s", tt.path, code, body, tt.code, tt.want)
		}
	}
}
