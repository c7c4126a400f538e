package trajectory_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory/trajectorytest"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func golden(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run TestGolden with -update)", err)
	}
	return b
}

// TestSchemaRefuses edits a valid trajectory, as a generic JSON tree, in
// one way the schema forbids, and expects the validator to refuse it.
func TestSchemaRefuses(t *testing.T) {
	chunk := func(doc map[string]any, i int) map[string]any { return doc["chunks"].([]any)[i].(map[string]any) }
	tests := []struct {
		name string
		edit func(doc map[string]any)
		want string // a fragment of the validator's message
	}{
		{"an extra key in a chunk's metadata", func(d map[string]any) {
			chunk(d, 0)["metadata"].(map[string]any)["raw_event"] = "{}"
		}, "raw_event"},
		{"a tool with a description", func(d map[string]any) {
			d["tools"].([]any)[0].(map[string]any)["description"] = "Reads a file."
		}, "description"},
		{"a tool with its schema", func(d map[string]any) {
			d["tools"].([]any)[0].(map[string]any)["input_schema"] = map[string]any{}
		}, "input_schema"},
		{"a tool without its hash", func(d map[string]any) { delete(d["tools"].([]any)[0].(map[string]any), "schema_sha256") }, "schema_sha256"},
		{"a tool hash that is not hex", func(d map[string]any) { d["tools"].([]any)[0].(map[string]any)["schema_sha256"] = "xyz" }, "schema_sha256"},
		{"tools inside the request", func(d map[string]any) { d["request"].(map[string]any)["tools"] = []any{} }, "tools"},
		{"a checkpoint-only key", func(d map[string]any) { d["encrypted_content"] = "gAAAA" }, "encrypted_content"},
		{"an extra key in a chunk", func(d map[string]any) { chunk(d, 1)["signature"] = "sig" }, "signature"},
		{"an extra key in the pin", func(d map[string]any) { d["pin"].(map[string]any)["profile"] = "p" }, "profile"},
		{"an extra key in an error", func(d map[string]any) {
			d["status"].(map[string]any)["error"].(map[string]any)["response_id"] = "resp_1"
		}, "response_id"},
		{"an extra key in usage", func(d map[string]any) {
			d["status"].(map[string]any)["summary"].(map[string]any)["usage"].(map[string]any)["total"] = 3
		}, "total"},
		{"an extra key in capabilities", func(d map[string]any) {
			chunk(d, 0)["metadata"].(map[string]any)["capabilities"].(map[string]any)["x"] = true
		}, "x"},
		{"an extra key in the redaction record", func(d map[string]any) {
			d["redaction"].(map[string]any)["removed"] = []any{"sk-…"}
		}, "removed"},
		{"a redaction rule with what it removed", func(d map[string]any) {
			d["redaction"].(map[string]any)["rules"].([]any)[0].(map[string]any)["match"] = "sk-…"
		}, "match"},
		{"a redaction rule that never fired", func(d map[string]any) {
			d["redaction"].(map[string]any)["rules"].([]any)[0].(map[string]any)["count"] = 0
		}, "count"},
		{"schema version 2", func(d map[string]any) { d["schema_version"] = 2 }, "schema_version"},
		{"no terminal status", func(d map[string]any) { delete(d, "status") }, "status"},
		{"a terminal state that is not terminal", func(d map[string]any) { d["status"].(map[string]any)["state"] = "running" }, "state"},
		{"a terminal state among the transitions", func(d map[string]any) {
			d["transitions"].([]any)[0].(map[string]any)["state"] = "succeeded"
		}, "state"},
		{"an unknown chunk type", func(d map[string]any) { chunk(d, 0)["type"] = "raw" }, "type"},
		{"a chunk without seq", func(d map[string]any) { delete(chunk(d, 0), "seq") }, "seq"},
		{"a seq of 0", func(d map[string]any) { chunk(d, 0)["seq"] = 0 }, "seq"},
		{"a tenant that is not a token", func(d map[string]any) { d["tenant"] = "ac.me" }, "tenant"},
		{"a label that is not a string", func(d map[string]any) { d["labels"].(map[string]any)["n"] = 1 }, "labels"},
		{"tool_input that is not an object", func(d map[string]any) { chunk(d, 3)["tool_input"] = "x" }, "tool_input"},
	}
	var base map[string]any
	if err := json.Unmarshal(golden(t), &base); err != nil {
		t.Fatal(err)
	}
	if err := trajectorytest.Check(golden(t)); err != nil {
		t.Fatalf("the golden trajectory does not validate: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc map[string]any
			if err := json.Unmarshal(golden(t), &doc); err != nil {
				t.Fatal(err)
			}
			tt.edit(doc)
			b, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			err = trajectorytest.Check(b)
			if err == nil {
				t.Fatalf("the schema accepts it")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v does not name %q", err, tt.want)
			}
			if _, derr := trajectory.Decode(b); derr == nil {
				t.Errorf("Decode accepts it")
			}
		})
	}
}

// TestDecode edits the canonical bytes of the golden run.
func TestDecode(t *testing.T) {
	g := golden(t)
	tr, err := trajectory.Decode(g)
	if err != nil {
		t.Fatalf("Decode(golden): %v", err)
	}
	if tr.RunID != "run-42" || len(tr.Chunks) != 8 || tr.Status.State != wire.StateFailed || tr.Request["max_tokens"] != int64(1024) {
		t.Errorf("decoded %+v", tr)
	}
	replace := func(old, new string) []byte {
		if !bytes.Contains(g, []byte(old)) {
			t.Fatalf("golden has no %q", old)
		}
		return bytes.Replace(g, []byte(old), []byte(new), 1)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, g, "", "  "); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		in    []byte
		field string // the DecodeError's field, "" for the document
		want  string // a fragment of its reason
	}{
		{"an unknown top-level field", replace(`{"schema_version":1,`, `{"schema_version":1,"checkpoint":"x",`), "", "unknown field"},
		{"an unknown metadata key", replace(`"metadata":{}`, `"metadata":{"raw":1}`), "", "unknown field"},
		{"a tool with a description", replace(`","schema_sha256"`, `","description":"d","schema_sha256"`), "", "unknown field"},
		{"a field in another case", replace(`"tenant":`, `"Tenant":`), "", "canonical"},
		{"whitespace", pretty.Bytes(), "", "canonical"},
		{"no trailing newline", bytes.TrimSuffix(g, []byte("\n")), "", "canonical"},
		{"trailing bytes", append(bytes.Clone(g), "{}"...), "", "canonical"},
		{"a number written otherwise", replace(`"max_tokens":1024`, `"max_tokens":1024.0`), "", "canonical"},
		{"keys out of order", replace(`"tenant":"acme","run_id":"run-42"`, `"run_id":"run-42","tenant":"acme"`), "", "canonical"},
		{"a duplicate key", replace(`"tenant":"acme",`, `"tenant":"other","tenant":"acme",`), "", "canonical"},
		{"HTML escaping", replace(`<main.go>`, `\u003cmain.go>`), "", "canonical"},
		{"schema version 2", replace(`"schema_version":1`, `"schema_version":2`), "schema_version", "want 1"},
		{"a seq gap", replace(`"seq":5,`, `"seq":13,`), "chunks[1].seq", "outside"},
		{"a terminal status not last", replace(`"seq":12,`, `"seq":13,`), "status.seq", "last event"},
		{"a seq twice", replace(`"seq":5,`, `"seq":4,`), "chunks[1].seq", "twice"},
		{"a non-terminal status", replace(`"state":"failed"`, `"state":"running"`), "status.state", "not a terminal"},
		{"a terminal transition", replace(`"state":"routed"`, `"state":"failed"`), "transitions[1].state", "non-terminal"},
		{"an unknown chunk type", replace(`"type":"thinking"`, `"type":"raw"`), "chunks[1].type", "not a chunk type"},
		{"tools in the request", replace(`"request":{`, `"request":{"tools":[],`), "request.tools", "never stored"},
		{"a bad tool hash", replace(`"schema_sha256":"9f`, `"schema_sha256":"9F`), "tools[0].schema_sha256", "hex"},
		{"a tenant that is not a token", replace(`"tenant":"acme"`, `"tenant":"ac me"`), "tenant", "token"},
		{"no chunk list", replace(`"chunks":[`, `"chunks":null,"x":[`), "", "unknown field"},
		{"not JSON", []byte("{"), "", "EOF"},
		{"empty", nil, "", "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := trajectory.Decode(tt.in)
			var de *trajectory.DecodeError
			if !errors.Is(err, trajectory.ErrMalformed) || !errors.As(err, &de) {
				t.Fatalf("err %v, want a *DecodeError", err)
			}
			if de.Field != tt.field || !strings.Contains(de.Reason, tt.want) {
				t.Errorf("err %v: want field %q and a reason with %q", err, tt.field, tt.want)
			}
		})
	}
}

// TestDecodeRoundTrip: what Build writes, Decode reads, for every input
// the tests build (the canonical check inside Decode compares bytes).
func TestDecodeRoundTrip(t *testing.T) {
	for _, mark := range []string{"", " SECRET"} {
		for _, rev := range []bool{false, true} {
			data, _ := build(t, sampleInput(rev, mark), newMarkRedactor(secrets))
			if _, err := trajectory.Decode(data); err != nil {
				t.Errorf("mark %q reverse %v: %v", mark, rev, err)
			}
		}
	}
}

// TestSchemaMatchesTypes keeps the Go form, the wire types it is built
// from and the schema document in step: a metadata key added to wire, or a
// field added to a Go type without the schema, fails here.
func TestSchemaMatchesTypes(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(trajectory.Schema(), &schema); err != nil {
		t.Fatal(err)
	}
	defs := schema["$defs"].(map[string]any)
	tests := []struct {
		name   string
		goType reflect.Type
		def    map[string]any
		wire   reflect.Type // the wire type whose keys it keeps, if any
		extra  []string     // keys it adds to that wire type's
	}{
		{"trajectory", reflect.TypeFor[trajectory.Trajectory](), schema, nil, nil},
		{"pin", reflect.TypeFor[trajectory.Pin](), defs["pin"].(map[string]any), reflect.TypeFor[wire.Pin](), nil},
		{"tool", reflect.TypeFor[trajectory.Tool](), defs["tool"].(map[string]any), nil, nil},
		{"status", reflect.TypeFor[trajectory.Status](), defs["status"].(map[string]any), nil, nil},
		{"error", reflect.TypeFor[trajectory.Error](), defs["error"].(map[string]any), reflect.TypeFor[wire.Error](), nil},
		{"summary", reflect.TypeFor[trajectory.Summary](), defs["summary"].(map[string]any), reflect.TypeFor[wire.Summary](), nil},
		{"usage", reflect.TypeFor[trajectory.Usage](), defs["usage"].(map[string]any), reflect.TypeFor[wire.Usage](), nil},
		{"chunk", reflect.TypeFor[trajectory.Chunk](), defs["chunk"].(map[string]any), reflect.TypeFor[wire.Chunk](), []string{"seq", "ts_ns"}},
		{"metadata", reflect.TypeFor[trajectory.Metadata](), defs["metadata"].(map[string]any), reflect.TypeFor[wire.Metadata](), nil},
		{"capabilities", reflect.TypeFor[trajectory.Capabilities](), defs["capabilities"].(map[string]any), reflect.TypeFor[wire.Capabilities](), nil},
		{"redaction", reflect.TypeFor[trajectory.Redaction](), defs["redaction"].(map[string]any), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, required := jsonKeys(tt.goType)
			var props []string
			for k := range tt.def["properties"].(map[string]any) {
				props = append(props, k)
			}
			slices.Sort(props)
			if got := slices.Sorted(slices.Values(keys)); !slices.Equal(got, props) {
				t.Errorf("Go keys %v, schema properties %v", got, props)
			}
			var req []string
			reqList, _ := tt.def["required"].([]any)
			for _, r := range reqList {
				req = append(req, r.(string))
			}
			slices.Sort(req)
			if !slices.Equal(required, req) {
				t.Errorf("Go always writes %v, schema requires %v", required, req)
			}
			if tt.def["additionalProperties"] != false {
				t.Errorf("additionalProperties is %v, want false", tt.def["additionalProperties"])
			}
			if tt.wire != nil {
				w, _ := jsonKeys(tt.wire)
				w = append(w, tt.extra...)
				slices.Sort(w)
				if !slices.Equal(w, props) {
					t.Errorf("wire.%s keys (+%v) %v, schema %v", tt.wire.Name(), tt.extra, w, props)
				}
			}
		})
	}
}

// jsonKeys returns the JSON keys of struct type rt and, sorted, those it
// always writes (no omitempty).
func jsonKeys(rt reflect.Type) (keys, always []string) {
	for f := range rt.Fields() {
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		keys = append(keys, name)
		if !strings.Contains(opts, "omitempty") {
			always = append(always, name)
		}
	}
	slices.Sort(always)
	return keys, always
}
