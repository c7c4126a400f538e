package codex

import (
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// lineItem is the item of an item.* event as Line reads it.
type lineItem struct {
	kind, id       []byte // as ndjson.Lexer.Quoted reads them
	output, status string
	text, command  ndjson.OptString
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
	var threadID, message ndjson.OptString
	var it lineItem
	hasItem := false
	var usage counts
	usageSet := false // an object, not null
	for k := range l.Members() {
		switch string(k) {
		case "type":
			typ = l.Quoted()
		case "thread_id":
			threadID = l.OptString()
		case "message":
			message = l.OptString()
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
	if p.result && !ndjson.Is(typ, "error") {
		return nil, false, nil
	}
	switch {
	case ndjson.Is(typ, "thread.started"):
		chunks, err := p.thread(threadID.S)
		return chunks, true, err
	case ndjson.Is(typ, "turn.started"), ndjson.Is(typ, "item.plan.delta"):
		return nil, true, nil
	case ndjson.Is(typ, "turn.completed"):
		var total *counts
		if usageSet {
			total = &usage
		}
		p.result, p.pending = true, ""
		return p.completed(total), true, nil
	case ndjson.Is(typ, "error"):
		if !message.Ok() {
			return nil, false, nil
		}
		return p.warn(message.S), true, nil
	}
	phase := ""
	for _, ph := range phases {
		if ndjson.Is(typ, ph) {
			phase = ph
		}
	}
	if phase == "" || !hasItem || it.id == nil || string(it.id) == "null" || string(it.id) == `""` {
		return nil, false, nil // turn.failed, request_user_input, unknown types, what Event reports
	}
	switch {
	case ndjson.Is(it.kind, "agent_message"), ndjson.Is(it.kind, "plan"), ndjson.Is(it.kind, "reasoning"):
		if phase != "item.completed" {
			return nil, true, nil
		}
		if !it.text.Ok() {
			return nil, false, nil
		}
		kind := "agent_message"
		if ndjson.Is(it.kind, "reasoning") {
			kind = "reasoning"
		}
		return textChunks(kind, it.text.S), true, nil
	case ndjson.Is(it.kind, "error"):
		return nil, true, nil
	case ndjson.Is(it.kind, "command_execution"):
		il := ndjson.NewLexer(it.id)
		id := il.String()
		if !il.End() || !it.command.Ok() {
			return nil, false, nil
		}
		chunks := p.tool(phase, id, "command_execution", map[string]any{"command": it.command.S}, func() (any, bool) {
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
			it.id = l.Quoted() // only a tool needs it decoded
		case "type":
			it.kind = l.Quoted()
		case "text":
			it.text = l.OptString()
		case "command":
			it.command = l.OptString()
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
