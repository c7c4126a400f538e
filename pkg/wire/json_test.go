package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// decodeDir holds one message of every type (<type>[-<case>].bin) and its
// JSON (.json), the goldens of JSON and seeds of FuzzJSON. Rewrite them
// with: go test -run TestJSONGolden -update ./pkg/wire
var decodeDir = filepath.Join("..", "..", "testdata", "decode")

// jsonSamples is one message of every type, and the cases JSON treats
// apart: batches, a request, binary that is msgpack and binary that is not.
func jsonSamples(t testing.TB) map[string]any {
	t.Helper()
	state, err := msgpack.Marshal(map[string]any{"history": []any{"hi"}, "response_id": "resp_1"})
	if err != nil {
		t.Fatal(err)
	}
	pin := samplePin()
	rec := sampleRunRecord()
	work := sampleWork()
	work.Handoff = &Handoff{Record: rec, Rev: 3, Seq: 2, StreamSeq: 41}
	return map[string]any{
		"run-request":         sampleRunRequest(),
		"run-request-minimal": RunRequest{V: Version, RunID: "r", Tenant: "t"},
		"work":                work,
		"event-status":        sampleStatusEvent(),
		"event-chunk":         sampleChunkEvents()[3],
		"event-chunks":        sampleBatchEvents()[0],
		"event-statuses":      Event{V: BatchVersion, RunID: "run-1", Seq: 1, Last: 2, TS: 1700000000000000001, Kind: KindStatuses, Statuses: []Status{{State: StateAccepted}, {State: StateRouted, Pin: &pin}}},
		"run-record":          rec,
		"lease":               Lease{V: Version, Owner: "runner-a", Epoch: "e-7"},
		"cancel-reply":        sampleCancelReply(),
		"checkpoint-msgpack":  Checkpoint{V: Version, Adapter: "openai", Pin: pin, State: state, Updated: 1700000000000},
		"checkpoint-opaque":   Checkpoint{V: Version, Adapter: "anthropic", Pin: pin, State: []byte{0, 1, 2, 0xff, 'x'}, Updated: 1700000000000},
		"consent":             Consent{V: Version, Tenant: "acme", Principal: "alice", Granted: true, WithdrawnRev: 4, Updated: 1700000000000},
		"export-record":       ExportRecord{V: Version, Tenant: "acme", RunID: "run-1", Principal: "alice", Object: "acme/run-1/ab.json", SHA256: "ab", Size: 99, Stored: true, ConsentRev: 7, Created: 1700000000000, Expires: 1702592000000},
		"redaction-rules":     RedactionRules{V: Version, Tenant: "acme", Rules: []RedactionRule{{Name: "ticket", Pattern: "TKT-[0-9]{6}"}}, Updated: 1700000000000},
		"spend-entry": SpendEntry{V: Version, Tenant: "acme", RunID: "run-1", Principal: "alice", Profile: "openai", Labels: map[string]string{"team": "search"},
			State: StateSucceeded, Day: "20231114", Usage: Usage{InputTokens: 1200, OutputTokens: 34}, Cost: "0.00411", Ended: 1700000000000},
		"spend-rollup": SpendRollup{V: Version, Tenant: "acme", Day: "20231114", Folded: 41, Updated: 1700000000000, Principals: map[string]PrincipalSpend{
			"alice": {Total: SpendSum{Runs: 2, Usage: Usage{InputTokens: 2400, OutputTokens: 68}, Cost: "0.00822"},
				Profiles: map[string]SpendSum{"openai": {Runs: 2, Usage: Usage{InputTokens: 2400, OutputTokens: 68}, Cost: "0.00822"}},
				Labels:   map[string]SpendSum{"team=search": {Runs: 1, Usage: Usage{InputTokens: 1200, OutputTokens: 34}, Cost: "0.00411"}}}}},
		"budget":            Budget{V: Version, Tenant: "acme", Principal: "alice", Amount: "12.50", Period: PeriodMonth, Updated: 1700000000000},
		"quota":             Quota{V: Version, Tenant: "acme", MaxRunning: 20, Updated: 1700000000000},
		"in-flight":         InFlight{V: Version, Tenant: "acme", Runs: map[string]int64{"run-1": 1700000000000}},
		"input":             Input{V: 3, RunID: "run-1", Prompt: "and now the tests"},
		"input-reply":       InputReply{V: 3, RunID: "run-1", Turn: 2, Queued: 0},
		"permission-answer": PermissionAnswer{V: 3, RunID: "run-1", RequestID: "p1", Allow: true},
		"permission-reply":  PermissionReply{V: 3, RunID: "run-1", RequestID: "p1", OptionID: "allow_once"},
		"event-chunk-permission": Event{V: 3, RunID: "run-1", Seq: 4, TS: 1, Kind: KindChunk, Chunk: &Chunk{Type: ChunkPermissionRequested, ToolID: "p1", ToolName: "Run ls",
			ToolInput: map[string]any{"tool_call_id": "call_1", "kind": "execute", "options": []any{map[string]any{"option_id": "allow_once", "name": "Allow", "kind": "allow_once"}}}}},
		"event-chunk-nan-float": Event{V: Version, RunID: "run-1", Seq: 3, TS: 1, Kind: KindChunk, Chunk: &Chunk{Type: ChunkToolUse, ToolName: "f", ToolID: "t", ToolInput: map[string]any{"x": math.Inf(-1)}}},
	}
}

// typeOfName is the message type a golden's name starts with.
func typeOfName(t *testing.T, name string) MessageType {
	t.Helper()
	var best MessageType // the longest: input-reply is not an input
	for _, mt := range MessageTypes() {
		if (name == string(mt) || strings.HasPrefix(name, string(mt)+"-")) && len(mt) > len(best) {
			// run-request-minimal is a run-request, not a "run" type.
			best = mt
		}
	}
	if best != "" {
		return best
	}
	t.Fatalf("golden %s: no message type", name)
	return ""
}

func TestJSONGolden(t *testing.T) {
	samples := jsonSamples(t)
	if *update {
		if err := os.MkdirAll(decodeDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range samples {
			b, err := Marshal(v)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			js, err := JSON(typeOfName(t, name), b)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, js, "", "  "); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			pretty.WriteByte('\n')
			for ext, data := range map[string][]byte{".bin": b, ".json": pretty.Bytes()} {
				if err := os.WriteFile(filepath.Join(decodeDir, name+ext), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	seen := map[MessageType]bool{}
	for name := range samples {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(decodeDir, name+".bin"))
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			want, err := os.ReadFile(filepath.Join(decodeDir, name+".json"))
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			mt := typeOfName(t, name)
			seen[mt] = true
			got, err := Sniff(b)
			if err != nil || got != mt {
				t.Fatalf("Sniff = %q, %v; want %q", got, err, mt)
			}
			js, err := JSON(mt, b)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(js) || bytes.ContainsAny(js, "\n") {
				t.Fatalf("JSON is not one line of JSON: %s", js)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, want); err != nil {
				t.Fatalf("golden: %v", err)
			}
			if !bytes.Equal(js, compact.Bytes()) {
				t.Errorf("JSON\n got %s\nwant %s", js, compact.Bytes())
			}
		})
	}
	for _, mt := range MessageTypes() {
		if !seen[mt] {
			t.Errorf("no golden of message type %s", mt)
		}
	}
}

// TestJSONValues pins what the goldens show by eye: a request nested as
// JSON, binary msgpack nested, other binary base64, -Inf as a string.
func TestJSONValues(t *testing.T) {
	samples := jsonSamples(t)
	get := func(name string) map[string]any {
		b, err := Marshal(samples[name])
		if err != nil {
			t.Fatal(err)
		}
		js, err := JSON(typeOfName(t, name), b)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(js, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if got := get("run-request")["request"]; !reflectEqualJSON(got, map[string]any{"delay_ms": 5.0, "prompt": "hello"}) {
		t.Errorf("run request's request = %#v", got)
	}
	if got := get("run-record")["request"]; !reflectEqualJSON(got, map[string]any{"delay_ms": 5.0, "prompt": "hello"}) {
		t.Errorf("run record's request = %#v", got)
	}
	if got := get("checkpoint-msgpack")["state"]; !reflectEqualJSON(got, map[string]any{"history": []any{"hi"}, "response_id": "resp_1"}) {
		t.Errorf("msgpack state = %#v", got)
	}
	if got := get("checkpoint-opaque")["state"]; got != "AAEC/3g=" {
		t.Errorf("opaque state = %#v, want base64 AAEC/3g=", got)
	}
	chunk := get("event-chunk-nan-float")["chunk"].(map[string]any)
	if got := chunk["tool_input"].(map[string]any)["x"]; got != "-Inf" {
		t.Errorf("-Inf = %#v", got)
	}
}

func reflectEqualJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestJSONRefuses(t *testing.T) {
	ev, err := Marshal(sampleStatusEvent())
	if err != nil {
		t.Fatal(err)
	}
	v3 := bytes.Replace(ev, []byte{0xa1, 'v', 0x01}, []byte{0xa1, 'v', 0x04}, 1)
	tests := []struct {
		name    string
		typ     MessageType
		in      []byte
		wantErr error
	}{
		{"empty", TypeEvent, nil, ErrMalformed},
		{"json", TypeEvent, []byte(`{"v":1}`), ErrMalformed},
		{"truncated", TypeEvent, ev[:len(ev)-3], ErrMalformed},
		{"trailing", TypeEvent, append(slices.Clone(ev), 0xc0), ErrMalformed},
		{"other version", TypeEvent, v3, ErrVersion},
		{"another type", TypeLease, ev, ErrMalformed},
		{"unknown type", MessageType("ledger"), ev, ErrUnknownType},
		{"ext", TypeEvent, []byte{0x81, 0xa1, 'x', 0xd4, 0x01, 0x02}, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := JSON(tt.typ, tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("JSON = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestSniffRefuses(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		wantErr error
	}{
		{"empty", nil, ErrMalformed},
		{"not a map", []byte{0x91, 0x01}, ErrMalformed},
		{"text", []byte("acme.run-1"), ErrMalformed},
		{"int key", []byte{0x81, 0x01, 0x01}, ErrMalformed},
		{"unknown key", []byte{0x82, 0xa1, 'v', 0x01, 0xa3, 'z', 'z', 'z', 0x01}, ErrUnknownType},
		{"only v", []byte{0x81, 0xa1, 'v', 0x01}, ErrUnknownType}, // every type has v
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Sniff(tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Sniff = %q, %v; want %v", got, err, tt.wantErr)
			}
		})
	}
}

// TestSniffTypesApart: no set of keys holds what two types always write
// while being keys of both, so an encoding matches one type exactly.
func TestSniffTypesApart(t *testing.T) {
	for i, a := range messageTypes {
		for _, b := range messageTypes[i+1:] {
			if subset(a.required, b.keys) && subset(b.required, a.keys) {
				t.Errorf("%s (always %v) and %s (always %v) fit the same keys: Sniff cannot tell them apart", a.name, a.required, b.name, b.required)
			}
		}
	}
}

// TestMessageTypesCoverVersioned: every type Decode takes has a message
// type (a new message must be named for decode and its Content-Type).
func TestMessageTypesCoverVersioned(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "codec.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var union []string
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Versioned" {
			return true
		}
		var walk func(e ast.Expr)
		walk = func(e ast.Expr) {
			switch e := e.(type) {
			case *ast.BinaryExpr:
				walk(e.X)
				walk(e.Y)
			case *ast.Ident:
				union = append(union, e.Name)
			}
		}
		for _, m := range ts.Type.(*ast.InterfaceType).Methods.List {
			walk(m.Type)
		}
		return false
	})
	var have []string
	for _, m := range messageTypes {
		have = append(have, m.typ.Name())
	}
	slices.Sort(union)
	slices.Sort(have)
	if len(union) == 0 || !slices.Equal(union, have) {
		t.Errorf("Versioned is %v; the message types are of %v", union, have)
	}
}

func TestParseMessageType(t *testing.T) {
	for _, mt := range MessageTypes() {
		for _, s := range []string{string(mt), mt.ContentType().String(), strings.ToUpper(mt.ContentType().String()) + "; v=1"} {
			if got, err := ParseMessageType(s); err != nil || got != mt {
				t.Errorf("ParseMessageType(%q) = %q, %v; want %q", s, got, err, mt)
			}
		}
	}
	for _, s := range []string{"", "application/msgpack", "application/vnd.agentmesh.event+json", "application/vnd.agentmesh.ledger+msgpack", "status"} {
		if got, err := ParseMessageType(s); !errors.Is(err, ErrUnknownType) {
			t.Errorf("ParseMessageType(%q) = %q, %v; want ErrUnknownType", s, got, err)
		}
	}
	if got := TypeEvent.ContentType().String(); got != "application/vnd.agentmesh.event+msgpack" {
		t.Errorf("event's Content-Type = %q", got)
	}
	if got := MessageType("nope").ContentType().String(); got != "" {
		t.Errorf("an unknown type's Content-Type = %q, want none", got)
	}
}

// TestContentTypeSetShares: Set puts the one prebuilt slice into a header,
// allocating nothing.
func TestContentTypeSetShares(t *testing.T) {
	ct := TypeEvent.ContentType()
	h := map[string][]string{"Nats-Msg-Id": {"x"}}
	if n := testing.AllocsPerRun(100, func() { ct.Set(h) }); n != 0 {
		t.Errorf("Set allocates %v times, want 0", n)
	}
	if got := h[ContentTypeHeader]; len(got) != 1 || got[0] != ct.String() {
		t.Errorf("header = %v", got)
	}
}

// FuzzJSON holds Sniff and JSON to their contract on any input: no panic,
// errors matching the sentinels, one line of valid JSON for what the
// strict decoder of the sniffed type accepts.
func FuzzJSON(f *testing.F) {
	addSeeds(f)
	entries, err := os.ReadDir(decodeDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".bin" {
			b, err := os.ReadFile(filepath.Join(decodeDir, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		mt, err := Sniff(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnknownType) {
				t.Fatalf("Sniff: %v matches no sentinel", err)
			}
			return
		}
		js, err := JSON(mt, b)
		checkErr := Check(mt, b)
		if (err == nil) != (checkErr == nil) {
			t.Fatalf("JSON: %v, but Check: %v", err, checkErr)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrVersion) {
				t.Fatalf("JSON: %v matches no sentinel", err)
			}
			return
		}
		if !json.Valid(js) || bytes.ContainsAny(js, "\n") {
			t.Fatalf("JSON of a valid %s is not one line of JSON: %q", mt, js)
		}
	})
}
