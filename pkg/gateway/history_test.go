package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func chatOf(t *testing.T, body string) []atom {
	t.Helper()
	var req chatRequest
	if err := decodeStrict([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	as, e := chatAtoms(req.Messages)
	if e != nil {
		t.Fatal(e)
	}
	return as
}

func responsesOf(t *testing.T, body string) []atom {
	t.Helper()
	var req responsesRequest
	if err := decodeStrict([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	a, e := req.ask()
	if e != nil {
		t.Fatal(e)
	}
	return a.atoms
}

// TestOneHashForBothShapes: a conversation sent back as chat messages and
// as Responses items (the assistant's items in another order, arguments
// re-encoded) hashes alike; and hashing a history at once gives what the
// gateway recorded turn by turn.
func TestOneHashForBothShapes(t *testing.T) {
	chat := chatOf(t, `{"messages":[
		{"role":"system","content":"be brief"},
		{"role":"user","content":"What does answer.txt say?"},
		{"role":"assistant","content":"Let me look.","refusal":null,"tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"fs_read","arguments":"{\"path\":\"answer.txt\",\"max_bytes\":10}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"42\n"},
		{"role":"assistant","content":"It says 42."},
		{"role":"user","content":"Thanks"}]}`)
	resp := responsesOf(t, `{"instructions":"be brief","input":[
		{"role":"user","content":[{"type":"input_text","text":"What does answer.txt say?"}]},
		{"type":"function_call","id":"fc_x","status":"completed","call_id":"call_1","name":"fs_read","arguments":"{ \"max_bytes\": 10, \"path\": \"answer.txt\" }"},
		{"type":"message","id":"msg_x","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Let me look.","annotations":[]}]},
		{"type":"function_call_output","call_id":"call_1","output":"42\n"},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"It says 42.","annotations":[]}]},
		{"role":"user","content":"Thanks"}]}`)
	if a, b := chainHash("", chat), chainHash("", resp); a != b {
		t.Fatalf("chat %s, responses %s: want one hash\nchat:      %+v\nresponses: %+v", a, b, canonical(chat), canonical(resp))
	}
	// Turn by turn, as remember records them: [system, user, reply],
	// then [result, reply], then [user].
	sum := chainHash("", chat[:4])
	sum = chainHash(sum, chat[4:6])
	sum = chainHash(sum, chat[6:])
	if whole := chainHash("", chat); sum != whole {
		t.Errorf("turn by turn %s, at once %s", sum, whole)
	}
	// A different argument value, or a different result, is another history.
	other := append([]atom(nil), chat...)
	other[3].A = `{"path":"other.txt"}`
	if chainHash("", other) == chainHash("", chat) {
		t.Error("other arguments hash alike")
	}
	if chainHash("", chat[:3]) == chainHash("", chat[1:3]) {
		t.Error("a system text is not part of the hash")
	}
}

func TestSplit(t *testing.T) {
	as := chatOf(t, `{"messages":[
		{"role":"system","content":"s1"},{"role":"developer","content":"s2"},
		{"role":"user","content":"q"},
		{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c2","content":"two"},{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"one"}]},
		{"role":"user","content":"and?"}]}`)
	// Continuing, the system text is the conversation's already.
	history, tl, system, e := split(as, "messages")
	if e != nil {
		t.Fatal(e)
	}
	if len(history) != 6 || system != "" || tl.prompt != "and?" ||
		!reflect.DeepEqual(tl.results, []toolResult{{ToolID: "c2", Output: "two"}, {ToolID: "c1", Output: "one"}}) || len(tl.atoms) != 3 {
		t.Fatalf("history %d, system %q, tail %+v", len(history), system, tl)
	}
	history, tl, system, e = split(as[:3], "messages")
	if e != nil || len(history) != 2 || !onlySystem(history) || tl.prompt != "q" || system != "s1\n\ns2" {
		t.Fatalf("a new conversation: %d %+v %q %v", len(history), tl, system, e)
	}
	for name, body := range map[string]string{
		"ends with the assistant": `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"}]}`,
		"only system":             `{"messages":[{"role":"system","content":"s"}]}`,
		"empty user message":      `{"messages":[{"role":"user","content":""}]}`,
	} {
		if _, _, _, e := split(chatOf(t, body), "messages"); e == nil {
			t.Errorf("%s: split accepted it", name)
		}
	}
}

// FuzzRequestBodies: whatever a body holds, reading it (either shape)
// and splitting it never panics; what is accepted has a non-empty tail,
// and canonical form is a fixed point. Seeds are testdata/fuzz/gateway.
//
//	go test -run '^$' -fuzz '^FuzzRequestBodies$' -fuzztime 60s ./pkg/gateway
func FuzzRequestBodies(f *testing.F) {
	files, err := filepath.Glob("../../testdata/fuzz/gateway/*.json")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var seed struct {
			Kind string          `json:"kind"`
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(b, &seed); err != nil {
			f.Fatalf("%s: %v", name, err)
		}
		f.Add(seed.Kind == "chat", []byte(seed.Body))
	}
	f.Fuzz(func(t *testing.T, isChat bool, body []byte) {
		var as []atom
		var e *APIError
		if isChat {
			var req chatRequest
			if decodeStrict(body, &req) != nil {
				return
			}
			if as, e = chatAtoms(req.Messages); e == nil {
				_, e = chatTools(req.Tools)
			}
		} else {
			var req responsesRequest
			if decodeStrict(body, &req) != nil {
				return
			}
			var a ask
			a, e = req.ask()
			as = a.atoms
		}
		if e != nil {
			if e.Message == "" || e.Status < 400 {
				t.Fatalf("an error without a message or a 4xx status: %+v", e)
			}
			return
		}
		c := canonical(as)
		if !reflect.DeepEqual(canonical(c), c) {
			t.Fatalf("canonical is not a fixed point: %+v", c)
		}
		if chainHash("", as) != chainHash("", c) {
			t.Fatal("canonical form hashes differently")
		}
		if _, tl, _, e := split(as, "input"); e == nil && len(tl.atoms) == 0 {
			t.Fatal("split accepted an empty tail")
		}
	})
}
