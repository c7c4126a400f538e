package trajectory_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory/trajectorytest"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// update rewrites the golden trajectory and the fuzz seeds:
//
//	go test -run 'TestGolden|TestFuzzSeeds' -update ./pkg/exporter/trajectory
var update = flag.Bool("update", false, "rewrite testdata/trajectory and testdata/fuzz/trajectory")

var (
	goldenPath = filepath.Join("..", "..", "..", "testdata", "trajectory", "representative.json")
	seedDir    = filepath.Join("..", "..", "..", "testdata", "fuzz", "trajectory")
)

var secrets = map[string]string{"SECRET": "marker"}

func build(t testing.TB, in trajectory.Input, r trajectory.Redactor) ([]byte, string) {
	t.Helper()
	data, sum, err := trajectory.Build(in, r)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	trajectorytest.Validate(t, data)
	return data, sum
}

func TestBuildIsCanonical(t *testing.T) {
	want, wantSum := build(t, sampleInput(false, " SECRET"), newMarkRedactor(secrets))
	for i := range 20 {
		got, sum := build(t, sampleInput(i%2 == 1, " SECRET"), newMarkRedactor(secrets))
		if !bytes.Equal(got, want) {
			t.Fatalf("build %d (reverse=%v) differs:\n got %s\nwant %s", i, i%2 == 1, got, want)
		}
		if sum != wantSum {
			t.Fatalf("build %d: sum %s, want %s", i, sum, wantSum)
		}
	}
	s := sha256.Sum256(want)
	if wantSum != hex.EncodeToString(s[:]) {
		t.Errorf("sum %s is not the sha256 of the bytes", wantSum)
	}
	if !bytes.HasSuffix(want, []byte("}\n")) || bytes.Count(want, []byte("\n")) != 1 {
		t.Errorf("want one line ending in one newline, got %q…", want[max(0, len(want)-40):])
	}
	// No HTML escaping: the sample's "<main.go> & friends" is written as is.
	if !bytes.Contains(want, []byte("Reading <main.go> & friends")) {
		t.Errorf("text was escaped: %s", want)
	}
}

func TestGolden(t *testing.T) {
	got, _ := build(t, sampleInput(false, " SECRET"), newMarkRedactor(secrets))
	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Build differs from %s (run with -update after checking the change):\n got %s\nwant %s", goldenPath, got, want)
	}
	trajectorytest.Validate(t, want)
}

// TestBuildRedactsEveryMarker places a marker in every string Build must
// redact: the redactor must see each one (its count equals the markers in
// the input) and none may survive.
func TestBuildRedactsEveryMarker(t *testing.T) {
	in := sampleInput(false, " SECRET")
	// The markers in the input: everything Build stores, as JSON (keys
	// included), less the tools field (only names are stored).
	all, err := json.Marshal(struct {
		Request map[string]any
		Labels  map[string]string
		Events  []wire.Event
	}{in.Request, in.Labels, in.Events})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Count(string(all), "SECRET")
	toolsJSON, _ := json.Marshal(in.Request["tools"])
	want -= strings.Count(string(toolsJSON), "SECRET") - 2 // two tool names carry one each
	r := newMarkRedactor(secrets)
	data, _ := build(t, in, r)
	if bytes.Contains(data, []byte("SECRET")) {
		t.Fatalf("a marker survived: %s", data)
	}
	tr, err := trajectory.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	got := tr.Redaction.Rules
	if len(got) != 1 || got[0].Rule != "marker" || got[0].Count != want {
		t.Errorf("redaction record %+v, want [{marker %d}]", got, want)
	}
	if n := bytes.Count(data, []byte("[X:marker]")); n != want {
		t.Errorf("%d redactions in the bytes, want %d", n, want)
	}
	for _, gone := range []string{"DESCRIPTIONTEXT", "SCHEMATEXT", "input_schema", "description"} {
		if bytes.Contains(data, []byte(gone)) {
			t.Errorf("the tools' %q is stored", gone)
		}
	}
}

// prefixRedactor marks every string it is given.
type prefixRedactor struct{ n int }

func (r *prefixRedactor) String(s string) string { r.n++; return "R:" + s }
func (r *prefixRedactor) Counts() []trajectory.Fired {
	return []trajectory.Fired{{Rule: "prefix", Count: r.n}}
}

// TestBuildRedactsEveryString proves coverage without knowing the fields:
// with a redactor that prefixes every string, every string and open-tree
// key in the document must carry the prefix, except the mesh-generated
// values Build stores as they are, which must not.
func TestBuildRedactsEveryString(t *testing.T) {
	data, _ := build(t, sampleInput(false, " x"), &prefixRedactor{})
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	exempt := regexp.MustCompile(`^(tenant|run_id|principal|profile|adapter|conversation)$|^pin\.|^redaction\.|\.(type|state|class|error_class|transport|cost|schema_sha256)$`)
	openRoot := regexp.MustCompile(`^(request|labels)$|\.tool_(input|output)$`)
	inOpen := regexp.MustCompile(`^(request|labels)[.\[]|\.tool_(input|output)[.\[]`)
	checked := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case string:
			redacted := strings.HasPrefix(v, "R:")
			if want := openRoot.MatchString(path) || inOpen.MatchString(path) || !exempt.MatchString(path); redacted != want {
				t.Errorf("%s = %q: redacted %v, want %v", path, v, redacted, want)
			}
			checked++
		case map[string]any:
			for k, e := range v {
				p := k
				if path != "" {
					p = path + "." + k
				}
				if openRoot.MatchString(path) || inOpen.MatchString(path) {
					if !strings.HasPrefix(k, "R:") {
						t.Errorf("key %s of an open tree is not redacted", p)
					}
					p = path + "." + strings.TrimPrefix(k, "R:")
				}
				walk(p, e)
			}
		case []any:
			for i, e := range v {
				walk(path+"["+itoa(i)+"]", e)
			}
		}
	}
	walk("", doc)
	if checked < 40 {
		t.Errorf("checked only %d strings; the sample lost its fields", checked)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestBuildTools(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string", "maxLength": uint8(9)}}}
	canon := `{"properties":{"q":{"maxLength":9,"type":"string"}},"type":"object"}`
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	tests := []struct {
		name  string
		tools any
		want  []trajectory.Tool
	}{
		{"maps", []any{
			map[string]any{"name": "search SECRET", "description": "d SECRET", "input_schema": schema},
			map[string]any{"name": "b", "input_schema": map[string]any{"secret": "SECRET"}},
		}, []trajectory.Tool{{"search [X:marker]", sum(canon)}, {"b", sum(`{"secret":"SECRET"}`)}}},
		{"bare names (a CLI's allowed tools)", []string{"read", "bash"},
			[]trajectory.Tool{{"read", trajectory.NoSchemaSHA256}, {"bash", sum("null")}}},
		{"typed toolschema-like list", []map[string]any{{"name": "t", "input_schema": schema}},
			[]trajectory.Tool{{"t", sum(canon)}}},
		{"one tool, not a list", map[string]any{"name": "solo", "input_schema": schema},
			[]trajectory.Tool{{"solo", sum(canon)}}},
		{"neither a map nor a name", []any{int64(5)}, []trajectory.Tool{{"", sum("5")}}},
		{"empty", []any{}, nil},
		{"nil", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := sampleInput(false, "")
			in.Request = map[string]any{"prompt": "p", "tools": tt.tools}
			data, _ := build(t, in, newMarkRedactor(secrets))
			tr, err := trajectory.Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Tools) != len(tt.want) {
				t.Fatalf("tools %+v, want %+v", tr.Tools, tt.want)
			}
			for i := range tt.want {
				if tr.Tools[i] != tt.want[i] {
					t.Errorf("tool %d = %+v, want %+v", i, tr.Tools[i], tt.want[i])
				}
			}
			if _, ok := tr.Request["tools"]; ok {
				t.Errorf("request still holds tools: %v", tr.Request)
			}
		})
	}
}

func TestBuildNumbers(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"int8", int8(-3), `-3`},
		{"uint8", uint8(3), `3`},
		{"int64", int64(3), `3`},
		{"float64 integral", float64(3), `3`},
		{"float32", float32(0.1), `0.1`},
		{"float64", 0.1, `0.1`},
		{"negative zero", math.Copysign(0, -1), `0`},
		{"uint64 max", uint64(math.MaxUint64), `18446744073709551615`},
		{"int64 min", int64(math.MinInt64), `-9223372036854775808`},
		{"json.Number with a fraction", json.Number("1.50"), `1.5`},
		{"json.Number integral float", json.Number("2.0"), `2`},
		{"large float", 1e21, `1e+21`},
		{"bin", []byte("bytes"), `"bytes"`},
		{"typed slice", []int32{1, 2}, `[1,2]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := sampleInput(false, "")
			in.Request = map[string]any{"v": tt.in}
			data, _ := build(t, in, passRedactor{})
			want := `"request":{"v":` + tt.want + `}`
			if !bytes.Contains(data, []byte(want)) {
				t.Errorf("no %s in %s", want, data)
			}
		})
	}
}

func TestBuildKeyCollisions(t *testing.T) {
	in := sampleInput(false, "")
	// Three keys redacted to one, a key that naturally spells a renamed
	// one, and a key redacted to the reserved "tools".
	in.Request = map[string]any{"SECRET-a": 1, "SECRET-b": 2, "SECRET-c": 3, "[X]-#2": 4, "TOOLS": 5}
	in.Labels = map[string]string{"SECRETx": "1", "SECRETy": "2"}
	r := redactorFunc(func(s string) string {
		s = regexp.MustCompile(`SECRET(-?).`).ReplaceAllString(s, "[X]$1")
		return strings.ReplaceAll(s, "TOOLS", "tools")
	})
	want := `"labels":{"[X]":"1","[X]#2":"2"},"request":{"[X]-":1,"[X]-#2":4,"[X]-#3":2,"[X]-#4":3,"tools#2":5}`
	for range 10 {
		data, _ := build(t, in, r)
		if !bytes.Contains(data, []byte(want)) {
			t.Fatalf("want %s in %s", want, data)
		}
	}
}

type redactorFunc func(string) string

func (f redactorFunc) String(s string) string     { return f(s) }
func (f redactorFunc) Counts() []trajectory.Fired { return nil }

func TestBuildRedactionRecord(t *testing.T) {
	r := countsRedactor{{"z", 1}, {"a", 2}, {"m", 0}, {"a", 3}}
	data, _ := build(t, sampleInput(false, ""), r)
	if want := `"redaction":{"rules":[{"rule":"a","count":5},{"rule":"z","count":1}]}`; !bytes.Contains(data, []byte(want)) {
		t.Errorf("want %s in %s", want, data)
	}
	data, _ = build(t, sampleInput(false, ""), passRedactor{})
	if want := `"redaction":{"rules":[]}`; !bytes.Contains(data, []byte(want)) {
		t.Errorf("want %s in %s", want, data)
	}
}

type countsRedactor []trajectory.Fired

func (countsRedactor) String(s string) string       { return s }
func (c countsRedactor) Counts() []trajectory.Fired { return c }

func TestBuildIncomplete(t *testing.T) {
	base := sampleInput(false, "").Events // seq 1..12, terminal at 12
	n := len(base)
	edit := func(f func(ev []wire.Event) []wire.Event) []wire.Event {
		ev := make([]wire.Event, len(base))
		copy(ev, base)
		return f(ev)
	}
	running := wire.Status{State: wire.StateRunning}
	tests := []struct {
		name    string
		in      []wire.Event
		wantSeq uint64
		reason  string
	}{
		{"no events", nil, 1, "no events"},
		{"first missing", base[1:], 1, "missing"},
		{"gap", edit(func(ev []wire.Event) []wire.Event { return append(ev[:5:5], ev[6:]...) }), 6, "missing"},
		{"repeated", edit(func(ev []wire.Event) []wire.Event { return append(ev[:6:6], ev[5:]...) }), 6, "out of order"},
		{"no terminal", base[:n-1], 0, "no terminal status"},
		{"terminal not last", append(edit(func(ev []wire.Event) []wire.Event { return ev }),
			wire.Event{V: 1, RunID: "run-42", Seq: uint64(n + 1), Kind: wire.KindStatus, Status: &running}), uint64(n), "before the last event"},
		{"two terminals", append(edit(func(ev []wire.Event) []wire.Event { return ev }), base[n-1]), uint64(n), "before the last event"},
		{"another run", edit(func(ev []wire.Event) []wire.Event { ev[3].RunID = "run-43"; return ev }), 4, "belongs to run"},
		{"chunk without chunk", edit(func(ev []wire.Event) []wire.Event { ev[4].Chunk = nil; return ev }), 5, "must carry a chunk"},
		{"status without status", edit(func(ev []wire.Event) []wire.Event { ev[0].Status = nil; return ev }), 1, "must carry a status"},
		{"unknown kind", edit(func(ev []wire.Event) []wire.Event { ev[0].Kind = "other"; return ev }), 1, "unknown event kind"},
		{"a batch not expanded", edit(func(ev []wire.Event) []wire.Event {
			ev[4] = wire.Event{V: 1, RunID: "run-42", Seq: 5, Kind: wire.KindChunks, Last: 5, Chunks: []wire.Chunk{*ev[4].Chunk}}
			return ev
		}), 5, "one per seq"},
		{"unknown chunk type", edit(func(ev []wire.Event) []wire.Event {
			c := *ev[4].Chunk
			c.Type = "raw"
			ev[4].Chunk = &c
			return ev
		}), 5, "unknown chunk type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := sampleInput(false, "")
			in.Events = tt.in
			r := newMarkRedactor(secrets)
			_, _, err := trajectory.Build(in, r)
			if !errors.Is(err, trajectory.ErrIncomplete) {
				t.Fatalf("err %v, want ErrIncomplete", err)
			}
			var ie *trajectory.IncompleteError
			if !errors.As(err, &ie) || ie.Seq != tt.wantSeq || ie.RunID != "run-42" || !strings.Contains(ie.Reason, tt.reason) {
				t.Fatalf("err %#v, want seq %d and a reason with %q", err, tt.wantSeq, tt.reason)
			}
			if r.calls != 0 {
				t.Errorf("the redactor was called %d times for a run not exported", r.calls)
			}
		})
	}
}

func TestBuildInvalidInput(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(in *trajectory.Input)
		r     trajectory.Redactor
		field string
	}{
		{"nil redactor", func(*trajectory.Input) {}, nil, "redactor"},
		{"tenant not a token", func(in *trajectory.Input) { in.Record.Tenant = "ac.me" }, passRedactor{}, "record.tenant"},
		{"no run id", func(in *trajectory.Input) { in.Record.RunID = "" }, passRedactor{}, "record.run_id"},
		{"principal not a token", func(in *trajectory.Input) { in.Record.Principal = "a b" }, passRedactor{}, "record.principal"},
		{"conversation not a token", func(in *trajectory.Input) { in.Record.Conversation = "c/1" }, passRedactor{}, "record.conversation"},
		{"NaN in the request", func(in *trajectory.Input) {
			in.Request = map[string]any{"a": []any{1, map[string]any{"odd key": math.NaN()}}}
		}, passRedactor{}, `request.a[1]["odd key"]`},
		{"non-string keys", func(in *trajectory.Input) { in.Request = map[string]any{"m": map[int]int{1: 2}} }, passRedactor{}, "request.m"},
		{"unencodable tool input", func(in *trajectory.Input) {
			in.Events[6].Chunk = &wire.Chunk{Type: wire.ChunkToolUse, ToolInput: map[string]any{"f": func() {}}}
		}, passRedactor{}, "seq 7: chunk.tool_input.f"},
		{"Inf in a tool schema", func(in *trajectory.Input) {
			in.Request = map[string]any{"tools": []any{map[string]any{"name": "t", "input_schema": map[string]any{"max": math.Inf(1)}}}}
		}, passRedactor{}, "request.tools[0].input_schema.max"},
		{"an unnamed rule fired", func(*trajectory.Input) {}, countsRedactor{{"", 2}}, "redaction"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := sampleInput(false, "")
			tt.edit(&in)
			_, _, err := trajectory.Build(in, tt.r)
			var ie *trajectory.InputError
			if !errors.Is(err, trajectory.ErrInvalidInput) || !errors.As(err, &ie) {
				t.Fatalf("err %v, want an *InputError", err)
			}
			if ie.Field != tt.field {
				t.Errorf("field %q, want %q (%v)", ie.Field, tt.field, err)
			}
		})
	}
}

// TestBuildDoesNotModifyInput: Build redacts copies, never its input.
func TestBuildDoesNotModifyInput(t *testing.T) {
	in := sampleInput(false, " SECRET")
	before, _ := json.Marshal(in)
	build(t, in, newMarkRedactor(secrets))
	after, _ := json.Marshal(in)
	if !bytes.Equal(before, after) {
		t.Errorf("Build modified its input")
	}
}

func TestBuildPinFromStatus(t *testing.T) {
	in := sampleInput(false, "")
	in.Record.Pin = nil
	data, _ := build(t, in, passRedactor{})
	tr, err := trajectory.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Pin == nil || tr.Pin.Model != "claude-test-1" || tr.Pin.Pricing["output"] != "15" {
		t.Errorf("pin %+v, want the routed status's", tr.Pin)
	}
	// A run rejected before routing has no pin at all.
	in.Events = in.Events[:1]
	in.Events = append(in.Events, wire.Event{V: 1, RunID: "run-42", Seq: 2, TS: 5e6, Kind: wire.KindStatus,
		Status: &wire.Status{State: wire.StateRejected, Error: wire.Errorf(wire.AdmissionRejected, "queue full")}})
	in.Request = nil
	data, _ = build(t, in, passRedactor{})
	if bytes.Contains(data, []byte(`"pin"`)) || bytes.Contains(data, []byte(`"request"`)) {
		t.Errorf("want no pin and no request: %s", data)
	}
	if !bytes.Contains(data, []byte(`"chunks":[]`)) || !bytes.Contains(data, []byte(`"ended_ms":5,`)) {
		t.Errorf("want an empty chunk list and ended_ms 5: %s", data)
	}
}

// TestBuildFromMsgpack: the run as the exporter gets it (request and
// events encoded by wire.Marshal and decoded again, so numbers come back
// as compact ints and maps in a new order) gives the same bytes as the run
// built in Go.
func TestBuildFromMsgpack(t *testing.T) {
	in := sampleInput(false, " SECRET")
	want, _ := build(t, in, newMarkRedactor(secrets))
	b, err := wire.Marshal(in.Request)
	if err != nil {
		t.Fatal(err)
	}
	var req map[string]any
	if err := wire.DecodeStrict(b, &req); err != nil {
		t.Fatal(err)
	}
	events := make([]wire.Event, len(in.Events))
	for i, ev := range in.Events {
		b, err := wire.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if events[i], err = wire.Decode[wire.Event](b); err != nil {
			t.Fatal(err)
		}
	}
	// The round trip must have changed a number's Go type, or this test
	// proves nothing about normalisation.
	if n := events[6].Chunk.ToolInput["opts"].(map[string]any)["n"]; reflect.TypeOf(n) == reflect.TypeOf(int64(0)) {
		t.Fatalf("msgpack gave tool_input.opts.n back as %T; want a compact int", n)
	}
	in.Request, in.Events = req, events
	got, _ := build(t, in, newMarkRedactor(secrets))
	if !bytes.Equal(got, want) {
		t.Errorf("after msgpack:\n got %s\nwant %s", got, want)
	}
}
