package codex

import (
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// str is a string member as a map lookup sees it: absent, null, or a
// string. A member of any other type fails the lexer.
type str struct {
	s          string
	set, isNul bool
}

func readStr(l *ndjson.Lexer) str {
	if l.Peek() == 'n' {
		l.Null()
		return str{set: true, isNul: true}
	}
	return str{s: l.String(), set: true}
}

// ok reports whether the member is a string, as v.(string) does.
func (s str) ok() bool { return s.set && !s.isNul }

// quoted reads a string member as its raw bytes, quotes included, with
// no copy: for a member Line only compares with names it knows, so that
// a line costs no allocation for it. Raw bytes with an escape never
// equal a name, and Line leaves such a line to Event.
func quoted(l *ndjson.Lexer) []byte {
	if c := l.Peek(); c != '"' && c != 'n' {
		l.Fail() // Event reports a member of another type
	}
	return l.Raw()
}

// is reports whether raw, as quoted read it, is the string s.
func is(raw []byte, s string) bool {
	return len(raw) == len(s)+2 && raw[0] == '"' && string(raw[1:len(raw)-1]) == s
}

// lineItem is the item of an item.* event as Line reads it.
type lineItem struct {
	kind, id       []byte // quoted
	output, status string
	text, command  str
	code           float64
	hasCode        bool
}

// phases are the item.* event types, by the phase Event is given.
var phases = [...]string{"item.started", "item.updated", "item.completed"}

// Line is the fast path of Event (cli.LineParser): it reads the
// events a run is mostly made of (thread.started, turn.started, the
// agent_message, plan, reasoning, error and command_execution items,
// turn.completed and error lines) straight from the line's bytes into
// typed fields, with no map. Any other event, any field of a type Event
// would report, and any line it cannot read exactly as encoding/json
// would (ndjson.Lexer), it leaves to Event, unhandled and with the parser
// unchanged.
func (p *Parser) Line(b []byte) ([]wire.Chunk, bool, error) {
	l := ndjson.NewLexer(b)
	var typ []byte
	var threadID, message str
	var it lineItem
	hasItem := false
	var usage counts
	usageSet := false // an object, not null
	for k := range l.Members() {
		switch string(k) {
		case "type":
			typ = quoted(&l)
		case "thread_id":
			threadID = readStr(&l)
		case "message":
			message = readStr(&l)
		case "item":
			it, hasItem = lexItem(&l), true
		case "usage":
			if l.Peek() == 'n' {
				l.Null()
				usageSet = false
				continue
			}
			usage, usageSet = lexCounts(&l), true
		default:
			l.Skip()
		}
	}
	if !l.End() {
		return nil, false, nil
	}
	if p.failed {
		return nil, true, nil // nothing after the error chunk
	}
	if p.result && !is(typ, "error") {
		return nil, false, nil
	}
	switch {
	case is(typ, "thread.started"):
		chunks, err := p.thread(threadID.s)
		return chunks, true, err
	case is(typ, "turn.started"), is(typ, "item.plan.delta"):
		return nil, true, nil
	case is(typ, "turn.completed"):
		var total *counts
		if usageSet {
			total = &usage
		}
		p.result, p.pending = true, ""
		return p.completed(total), true, nil
	case is(typ, "error"):
		if !message.ok() {
			return nil, false, nil
		}
		p.warn(message.s)
		return nil, true, nil
	}
	phase := ""
	for _, ph := range phases {
		if is(typ, ph) {
			phase = ph
		}
	}
	if phase == "" || !hasItem || it.id == nil || string(it.id) == "null" || string(it.id) == `""` {
		return nil, false, nil // turn.failed, request_user_input, unknown types, what Event reports
	}
	switch {
	case is(it.kind, "agent_message"), is(it.kind, "plan"), is(it.kind, "reasoning"):
		if phase != "item.completed" {
			return nil, true, nil
		}
		if !it.text.ok() {
			return nil, false, nil
		}
		kind := "agent_message"
		if is(it.kind, "reasoning") {
			kind = "reasoning"
		}
		return textChunks(kind, it.text.s), true, nil
	case is(it.kind, "error"):
		return nil, true, nil
	case is(it.kind, "command_execution"):
		il := ndjson.NewLexer(it.id)
		id := il.String()
		if !il.End() || !it.command.ok() {
			return nil, false, nil
		}
		chunks := p.tool(phase, id, "command_execution", map[string]any{"command": it.command.s}, func() (any, bool) {
			return it.output, commandFailed(it.status, it.code, it.hasCode)
		})
		return chunks, true, nil
	}
	return nil, false, nil // the other tools, and what Event reports
}

// lexItem reads an item object's members that Line's items use; the last
// of a repeated member wins, as in a map.
func lexItem(l *ndjson.Lexer) lineItem {
	var it lineItem
	for k := range l.Members() {
		switch string(k) {
		case "id":
			it.id = quoted(l) // only a tool needs it decoded
		case "type":
			it.kind = quoted(l)
		case "text":
			it.text = readStr(l)
		case "command":
			it.command = readStr(l)
		case "aggregated_output":
			it.output = l.String()
		case "status":
			it.status = l.String()
		case "exit_code":
			it.code, it.hasCode = l.Number()
		default:
			l.Skip()
		}
	}
	return it
}

// lexCounts reads a usage object as countsOf does; a count countsOf
// rejects fails the lexer, so that Event reports it.
func lexCounts(l *ndjson.Lexer) counts {
	var c counts
	for k := range l.Members() {
		var dst *int64
		switch string(k) {
		case "input_tokens":
			dst = &c.input
		case "cached_input_tokens":
			dst = &c.cached
		case "cache_write_input_tokens":
			dst = &c.cacheWrite
		case "output_tokens":
			dst = &c.output
		case "reasoning_output_tokens":
			dst = &c.reasoning
		default:
			l.Skip()
			continue
		}
		n, ok := l.Number()
		switch {
		case !ok:
			*dst = 0 // null: as absent
		case !isCount(n):
			l.Fail()
		default:
			*dst = int64(n)
		}
	}
	return c
}
