package gemini

import (
	"encoding/json"

	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// lineEvent is one stream-json event as Line reads it.
type lineEvent struct {
	typ, role, status []byte // as ndjson.Lexer.Quoted reads them
	sid, model        string
	content, name, id string
	delta             bool
	params, output    []byte // raw; nil when absent
	errKind           byte   // 0 absent or null, '{' an object, else another value
	errMsg            []byte // the error object's raw message, nil when absent
	stats             []byte // raw; nil when absent
}

// Line is the fast path of Event (cli.LineParser): it reads the
// events a run is made of (init, message, tool_use, tool_result, result,
// and a value without a type, such as --output-format json's one object)
// straight from the line's bytes, with no map; a tool's parameters and
// output alone are decoded with encoding/json. An error event, any field
// of a type Event would report, and any line it cannot read exactly as
// encoding/json would (ndjson.Lexer), it leaves to Event, unhandled and with
// the parser unchanged.
func (p *parser) Line(b []byte) ([]wire.Chunk, bool, error) {
	l := ndjson.NewLexer(b)
	var ev lineEvent
	for k := range l.Members() {
		switch string(k) {
		case "type":
			ev.typ = l.Quoted()
		case "session_id":
			ev.sid = l.String()
		case "model":
			ev.model = l.String()
		case "role":
			ev.role = l.Quoted()
		case "content":
			ev.content = l.String()
		case "delta":
			ev.delta = l.Bool()
		case "tool_name":
			ev.name = l.String()
		case "tool_id":
			ev.id = l.String()
		case "status":
			ev.status = l.Quoted()
		case "parameters":
			ev.params = l.Raw()
		case "output":
			ev.output = l.Raw()
		case "error":
			ev.errKind, ev.errMsg = l.Peek(), nil
			switch ev.errKind {
			case '{':
				for k := range l.Members() {
					if string(k) == "message" {
						ev.errMsg = l.Raw()
					} else {
						l.Skip()
					}
				}
			case 'n':
				ev.errKind = 0
				l.Null()
			default:
				l.Skip()
			}
		case "stats":
			ev.stats = l.Raw()
		default:
			l.Skip()
		}
	}
	if !l.End() {
		return nil, false, nil
	}
	if ev.typ == nil || ev.typ[0] != '"' { // as ev["type"].(string)
		return nil, true, errNoType(memberNames(b))
	}
	if p.done {
		return nil, false, nil
	}
	switch {
	case ndjson.Is(ev.typ, "init"):
		chunks, err := p.initEvent(ev.sid, ev.model)
		return chunks, true, err
	case ndjson.Is(ev.typ, "message"):
		role := "assistant"
		switch {
		case ndjson.Is(ev.role, "user"):
			role = "user"
		case !ndjson.Is(ev.role, "assistant"):
			return nil, false, nil
		}
		chunks, err := messageChunks(role, ev.content, ev.delta)
		return chunks, true, err
	case ndjson.Is(ev.typ, "tool_use"):
		input, ok := lexParams(ev.params)
		if ev.name == "" || ev.id == "" || !ok {
			return nil, false, nil
		}
		return p.toolUseChunks(ev.name, ev.id, input), true, nil
	case ndjson.Is(ev.typ, "tool_result"):
		status := "success"
		switch {
		case ndjson.Is(ev.status, "error"):
			status = "error"
		case !ndjson.Is(ev.status, "success"):
			return nil, false, nil
		}
		if ev.id == "" {
			return nil, false, nil
		}
		out, ok := decodeAny(ev.output)
		if !ok {
			return nil, false, nil
		}
		if out == nil && status == "error" && ev.errKind == '{' {
			if out, ok = decodeAny(ev.errMsg); !ok {
				return nil, false, nil
			}
		}
		return p.toolResultChunks(ev.id, status, out), true, nil
	case ndjson.Is(ev.typ, "result"):
		return p.lineResult(&ev)
	}
	return nil, false, nil // error events, and what Event reports
}

// lineResult maps a result event for Line.
func (p *parser) lineResult(ev *lineEvent) ([]wire.Chunk, bool, error) {
	switch {
	case ndjson.Is(ev.status, "success"):
	case ndjson.Is(ev.status, "error"):
		var msg string
		switch ev.errKind {
		case 0:
		case '{':
			if ev.errMsg != nil {
				ml := ndjson.NewLexer(ev.errMsg)
				if msg = ml.String(); !ml.End() {
					return nil, false, nil
				}
			}
		default:
			return nil, false, nil
		}
		return p.failed(msg), true, nil
	default:
		return nil, false, nil
	}
	var st *stats
	if ev.stats != nil && string(ev.stats) != "null" {
		var c stats
		sl := ndjson.NewLexer(ev.stats)
		for k := range sl.Members() {
			i := statIndex(k)
			if i < 0 {
				sl.Skip()
				continue
			}
			f, ok := sl.Number()
			switch {
			case !ok:
				c.n[i], c.has[i] = 0, false // null: as absent
			case !isCount(f):
				sl.Fail() // Event reports it
			default:
				c.n[i], c.has[i] = int64(f), true
			}
		}
		if !sl.End() {
			return nil, false, nil
		}
		st = &c
	}
	return p.succeeded(st), true, nil
}

func statIndex(k []byte) int {
	for i, s := range statKeys {
		if string(k) == s {
			return i
		}
	}
	return -1
}

// memberNames are the names of the members of b, an object the lexer
// has read.
func memberNames(b []byte) []string {
	var names []string
	l := ndjson.NewLexer(b)
	for k := range l.Members() {
		names = append(names, string(k))
		l.Skip()
	}
	return names
}

// lexParams decodes a tool_use's parameters as Event takes them: absent or
// null is no input, an object a map; anything else is not Line's.
func lexParams(raw []byte) (map[string]any, bool) {
	if raw == nil || string(raw) == "null" {
		return nil, true
	}
	if raw[0] != '{' {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	return m, true
}

// decodeAny decodes a raw member as a map lookup of it reads; absent is nil.
func decodeAny(raw []byte) (any, bool) {
	if raw == nil {
		return nil, true
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	return v, true
}
