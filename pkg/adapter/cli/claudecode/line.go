package claudecode

import (
	"bytes"
	"encoding/json"

	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// lineState is what the fast path reuses from one line to the next.
type lineState struct {
	blocks []contentBlock
	chunks []wire.Chunk // an assistant line's chunks, until the next Line
}

// Line is the fast path of Event (cli.LineParser): it reads the
// events a run is mostly made of (assistant messages, tool results, the
// stream_event deltas of --include-partial-messages, the telemetry
// events, and a run's system/init and successful result) straight from
// the line's bytes into the parser's typed shapes, with no map. Any other
// event, and any line it cannot read exactly as encoding/json would
// (ndjson.Lexer), it leaves to Event, unhandled and with the parser
// unchanged. The chunks of an assistant line are valid until the next
// call of Line: their slice is reused.
func (p *Parser) Line(b []byte) ([]wire.Chunk, bool, error) {
	l := ndjson.NewLexer(b)
	var typ, sid, kind string
	var msg, event, sub, model, text, stop, usage []byte
	var isErr, hasCost, hasTurns, hasDur, hasAPIDur bool
	var cost, turns, dur, apiDur float64
	var a assistantEvent
	lexed := false // a is the message, read in place
	for k := range l.Members() {
		switch string(k) {
		case "type":
			typ = eventType(l.StringBytes())
		case "session_id":
			sid = p.sessionOf(l.StringBytes())
		case "error":
			kind = l.String()
		case "message":
			if typ == "assistant" {
				// The usual order: read the message in place, once.
				a, lexed = p.lexMessage(&l), true
				msg = nil
				continue
			}
			msg, lexed = l.Raw(), false
		case "event":
			event = l.Raw()
		// A system or result event's own members. Any other event with
		// one of these names holding another type is left to Event.
		case "subtype":
			sub = l.StringBytes()
		case "model":
			model = l.StringBytes()
		case "is_error":
			isErr = l.Bool()
		case "result":
			text = l.StringBytes()
		case "stop_reason":
			stop = l.StringBytes()
		case "usage":
			usage = l.Raw()
		case "total_cost_usd":
			cost, hasCost = l.Number()
		case "num_turns":
			turns, hasTurns = l.Number()
		case "duration_ms":
			dur, hasDur = l.Number()
		case "duration_api_ms":
			apiDur, hasAPIDur = l.Number()
		default:
			l.Skip()
		}
	}
	if !l.End() || sid != "" && sid != p.session && !reqfield.IsUUID(sid) {
		return nil, false, nil
	}
	var chunks []wire.Chunk
	var err error
	switch {
	case typ == "assistant":
		if !lexed {
			if msg == nil {
				return nil, false, nil
			}
			ml := ndjson.NewLexer(msg)
			if a = p.lexMessage(&ml); !ml.End() {
				return nil, false, nil
			}
		}
		a.kind = kind
		if !p.checkAssistant(&a) {
			return nil, false, nil
		}
		chunks = p.assistant(p.line.chunks[:0], &a)
		if p.line.chunks = chunks[:0]; len(chunks) == 0 {
			chunks = nil // as Event gives it
		}
	case typ == "user":
		u, ok := lexUser(msg)
		if !ok {
			return nil, false, nil
		}
		chunks = p.user(&u)
	case typ == "stream_event":
		e, ok := lexStreamEvent(event)
		if !ok {
			return nil, false, nil
		}
		chunks, err = p.streamEvent(&e)
	case typ == "system":
		switch {
		case string(sub) == "init":
			chunks = p.init(string(model), sid)
		case string(sub) == "api_retry":
			return nil, false, nil // Event's: a notice
		case dropSystem[string(sub)]:
		default:
			return nil, false, nil // what Event reports
		}
	case typ == "result":
		if p.ended || isErr || bytes.HasPrefix(sub, []byte("error")) {
			return nil, false, nil // a failure, or a second result: Event's
		}
		u, ok := lexUsage(usage)
		if !ok {
			return nil, false, nil
		}
		md := wire.Metadata{Usage: u, StopReason: string(stop)}
		if hasCost {
			c := cost // (a copy: the other lines' cost stays off the heap)
			md.TotalCostUSD = &c
		}
		if hasTurns {
			n := int(turns)
			md.NumTurns = &n
		}
		if hasDur {
			n := int64(dur)
			md.DurationMS = &n
		}
		if hasAPIDur {
			n := int64(apiDur)
			md.DurationAPIMS = &n
		}
		chunks = p.succeeded(sid, string(text), md)
	case dropEvents[typ]:
	default:
		return nil, false, nil // and what Event reports
	}
	chunks, err = p.finish(typ, sid, chunks, err)
	return chunks, true, err
}

// eventType is an event's type as a string, without making one for the
// types the parser knows.
func eventType(b []byte) string {
	switch string(b) {
	case "assistant":
		return "assistant"
	case "user":
		return "user"
	case "stream_event":
		return "stream_event"
	case "system":
		return "system"
	case "result":
		return "result"
	}
	return string(b)
}

// sessionOf is an event's session id as a string: the parser's own when
// it is the same, which it usually is, so no string is made.
func (p *Parser) sessionOf(b []byte) string {
	if string(b) == p.session {
		return p.session
	}
	return string(b)
}

// lexUsage reads a result's usage as usage does: absent or null is nil.
func lexUsage(raw []byte) (*wire.Usage, bool) {
	if raw == nil || string(raw) == "null" {
		return nil, true
	}
	l := ndjson.NewLexer(raw)
	var u wire.Usage
	for k := range l.Members() {
		var dst *int64
		switch string(k) {
		case "input_tokens":
			dst = &u.InputTokens
		case "output_tokens":
			dst = &u.OutputTokens
		case "cache_read_input_tokens":
			dst = &u.CacheReadTokens
		case "cache_creation_input_tokens":
			dst = &u.CacheWriteTokens
		default:
			l.Skip()
			continue
		}
		v, _ := l.Number()
		*dst = int64(v)
	}
	return &u, l.End()
}

// lexMessage reads an assistant message as assistantOf does, reusing the
// parser's block slice; checkAssistant finishes it. A message without
// content fails l. The message id is the parser's own string when it is
// the same, and the model is kept only as far as synthetic reads it.
func (p *Parser) lexMessage(l *ndjson.Lexer) assistantEvent {
	a := assistantEvent{blocks: p.line.blocks[:0]}
	content := false
	for k := range l.Members() {
		switch string(k) {
		case "id":
			if id := l.StringBytes(); string(id) == p.msgID {
				a.id = p.msgID
			} else {
				a.id = string(id)
			}
		case "model":
			a.model = ""
			if string(l.StringBytes()) == syntheticModel {
				a.model = syntheticModel
			}
		case "content":
			content = true
			a.blocks = a.blocks[:0]
			for range l.Elements() {
				b, ok := lexBlock(l)
				if !ok {
					l.Fail()
					break
				}
				a.blocks = append(a.blocks, b)
			}
		default:
			l.Skip()
		}
	}
	if !content {
		l.Fail()
	}
	p.line.blocks = a.blocks
	return a
}

// checkAssistant keeps the blocks assistantOf keeps and decodes tool
// inputs; false for anything assistantOf would fail on.
func (p *Parser) checkAssistant(a *assistantEvent) bool {
	synthetic := a.synthetic()
	n := 0
	for _, b := range a.blocks {
		switch {
		case synthetic:
			if b.typ != "text" {
				continue // only text is kept
			}
		case b.typ == "text" || b.typ == "thinking" || b.typ == "redacted_thinking":
		case b.typ == "tool_use":
			if b.id == "" || b.name == "" {
				return false
			}
		default:
			return false
		}
		a.blocks[n] = b
		n++
	}
	a.blocks = a.blocks[:n]
	for i := range a.blocks {
		b := &a.blocks[i]
		if b.typ != "tool_use" {
			continue
		}
		// Decode the raw input as Event would.
		raw := b.raw
		b.raw = nil
		if raw != nil && string(raw) != "null" {
			if raw[0] != '{' || json.Unmarshal(raw, &b.input) != nil {
				return false
			}
		}
	}
	return true
}

// lexBlock reads one content block: its type, its text (a text block's
// text or a thinking block's thinking), a tool_use's id, name and raw
// input (until lexAssistant decodes it).
func lexBlock(l *ndjson.Lexer) (contentBlock, bool) {
	var b contentBlock
	var text, thinking string
	var input []byte
	for k := range l.Members() {
		switch string(k) {
		case "type":
			b.typ = blockType(l.StringBytes())
		case "text":
			text = l.String()
		case "thinking":
			thinking = l.String()
		case "id":
			b.id = l.String()
		case "name":
			b.name = l.String()
		case "input":
			input = l.Raw()
		default:
			l.Skip()
		}
	}
	switch b.typ {
	case "text":
		b.text = text
	case "thinking":
		b.text = thinking
	case "tool_use":
		b.raw = input
	}
	return b, l.Ok()
}

// blockType is a content block's type as a string, without making one
// for the types an assistant message has.
func blockType(b []byte) string {
	switch string(b) {
	case "text":
		return "text"
	case "thinking":
		return "thinking"
	case "tool_use":
		return "tool_use"
	case "redacted_thinking":
		return "redacted_thinking"
	}
	return string(b)
}

// lexUser reads a user event's message as userOf does.
func lexUser(msg []byte) (userEvent, bool) {
	var u userEvent
	if msg == nil {
		return u, false
	}
	l := ndjson.NewLexer(msg)
	content := false
	for k := range l.Members() {
		if string(k) != "content" {
			l.Skip()
			continue
		}
		content = true
		u.results = u.results[:0]
		switch l.Peek() {
		case '"':
			l.Skip() // the user's own text echoed back
		case '[':
			for range l.Elements() {
				var typ, id string
				var isErr bool
				var output []byte
				for k := range l.Members() {
					switch string(k) {
					case "type":
						typ = l.String()
					case "tool_use_id":
						id = l.String()
					case "is_error":
						isErr = l.Bool()
					case "content":
						output = l.Raw()
					default:
						l.Skip()
					}
				}
				switch typ {
				case "tool_result":
					if id == "" {
						l.Fail()
						break
					}
					var v any
					if output != nil && json.Unmarshal(output, &v) != nil {
						l.Fail()
						break
					}
					u.results = append(u.results, contentBlock{typ: typ, id: id, isError: isErr, output: toolOutput(v)})
				case "text", "image", "document":
				default:
					l.Fail()
				}
			}
		default:
			l.Fail()
		}
	}
	return u, l.Ok() && content
}

// lexStreamEvent reads a stream_event's event as streamEventOf does.
func lexStreamEvent(ev []byte) (streamEvent, bool) {
	var se streamEvent
	if ev == nil {
		return se, false
	}
	l := ndjson.NewLexer(ev)
	var idx float64
	hasIdx := false
	var cbType, cbText, cbThinking, dType, dText, dThinking string
	var msgID string
	readBlock := func(typ, text, thinking *string) {
		for k := range l.Members() {
			switch string(k) {
			case "type":
				*typ = l.String()
			case "text":
				*text = l.String()
			case "thinking":
				*thinking = l.String()
			default:
				l.Skip()
			}
		}
	}
	var hasCB, hasDelta bool
	for k := range l.Members() {
		switch string(k) {
		case "type":
			se.typ = l.String()
		case "index":
			idx, hasIdx = l.Number()
		case "message":
			msgID = ""
			for k := range l.Members() {
				if string(k) == "id" {
					msgID = l.String()
				} else {
					l.Skip()
				}
			}
		case "content_block":
			hasCB = true
			cbType, cbText, cbThinking = "", "", ""
			readBlock(&cbType, &cbText, &cbThinking)
		case "delta":
			hasDelta = true
			dType, dText, dThinking = "", "", ""
			readBlock(&dType, &dText, &dThinking)
		default:
			l.Skip()
		}
	}
	if !l.Ok() {
		return se, false
	}
	pick := func(kind, text, thinking string) string {
		if kind == "text" {
			return text
		}
		return thinking
	}
	validIndex := func() bool {
		if !hasIdx || idx < 0 || idx != float64(int(idx)) {
			return false
		}
		se.index = int(idx)
		return true
	}
	switch se.typ {
	case "message_start":
		se.msgID = msgID
	case "content_block_start":
		if !validIndex() || !hasCB {
			return se, false
		}
		if cbType == "text" || cbType == "thinking" {
			se.kind, se.text = cbType, pick(cbType, cbText, cbThinking)
		}
	case "content_block_delta":
		if !validIndex() || !hasDelta {
			return se, false
		}
		kind, known := deltaKind(dType)
		switch {
		case !known:
			return se, false
		case kind == "":
			return se, true
		}
		se.kind, se.text = kind, pick(kind, dText, dThinking)
	case "content_block_stop", "message_delta", "message_stop", "ping", "error":
	default:
		return se, false
	}
	return se, true
}
