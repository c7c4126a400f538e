package pi

import (
	"encoding/json"

	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// lineBlock is one content block of an assistant message as Line reads
// it: every shape Event would report fails the lexer instead.
type lineBlock struct {
	typ, text, id, name string
	redacted            bool
	args                []byte // raw, an object or null (isObject)
}

// lineMessage is the message of a message_start or message_end.
type lineMessage struct {
	role, model, stop, errMsg, toolCallID, toolName string
	isError                                         bool
	usage                                           *usageCounts
	blocks                                          []lineBlock // assistant content
	parts                                           []string    // toolResult content, as its output shows it
}

// lineUpdate is the assistantMessageEvent of a message_update.
type lineUpdate struct {
	typ, delta, content string
	index               float64
	hasIndex            bool
	hasDelta, hasFull   bool // delta and content were strings
	toolCall            []byte
	partial             []byte
	errStop, errMsg     string
	errObject           bool
}

// lineState is what Line reuses from one line to the next.
type lineState struct {
	blocks []lineBlock
	parts  []string
}

// Line is the fast path of Event (cli.LineParser): it reads the
// events a run is mostly made of (session, the telemetry events,
// message_start, message_update, message_end and the tool_execution
// events) straight from the line's bytes into typed fields, with no map;
// a tool's arguments alone are decoded with encoding/json. The retry and
// compaction events, any field of a type Event would report, and any line
// it cannot read exactly as encoding/json would (ndjson.Lexer), it leaves
// to Event, unhandled and with the parser unchanged.
func (p *Parser) Line(b []byte) ([]wire.Chunk, bool, error) {
	l := ndjson.NewLexer(b)
	var typ []byte // as ndjson.Lexer.Quoted reads it
	var id, toolCallID, toolName string
	isError := false
	var msg, ame, args, result []byte
	var attempt float64
	hasAttempt := false                     // a number, not null
	var success, willRetry ndjson.OptString // their raw bytes, for a bool
	var errMsg, finalError string
	var m lineMessage
	var u lineUpdate
	lexedMsg, lexedAME := false, false // read in place, typ coming first
	for k := range l.Members() {
		switch string(k) {
		case "type":
			typ = l.Quoted()
		case "id":
			id = l.String()
		case "message":
			if ndjson.Is(typ, "message_start") || ndjson.Is(typ, "message_end") {
				m, lexedMsg = p.lexMessage(&l), true
				continue
			}
			msg, lexedMsg = l.Raw(), false
		case "assistantMessageEvent":
			if ndjson.Is(typ, "message_update") {
				u, lexedAME = lexUpdate(&l), true
				continue
			}
			ame, lexedAME = l.Raw(), false
		case "toolCallId":
			toolCallID = l.String()
		case "toolName":
			toolName = l.String()
		case "args":
			args = l.Raw()
		case "result":
			result = l.Raw()
		case "isError":
			isError = l.Bool()
		case "attempt":
			attempt, hasAttempt = l.Number()
		case "success":
			success = readBool(&l)
		case "willRetry":
			willRetry = readBool(&l)
		case "errorMessage":
			errMsg = l.String()
		case "finalError":
			finalError = l.String()
		default:
			l.Skip()
		}
	}
	if !l.End() {
		return nil, false, nil
	}
	if p.done {
		return nil, true, nil
	}
	t := known(typ, eventTypes)
	switch t {
	case "session":
		chunks, err := p.sessionWith(id)
		return chunks, true, err
	case "agent_start", "agent_end", "turn_start", "turn_end", "tool_execution_update",
		"queue_update", "session_info_changed", "thinking_level_changed", "compaction_start":
		return nil, true, nil
	case "message_start", "message_end":
		if !lexedMsg {
			if msg == nil {
				return nil, false, nil
			}
			ml := ndjson.NewLexer(msg)
			if m = p.lexMessage(&ml); !ml.End() {
				return nil, false, nil
			}
		}
		if !knownRole(m.role) {
			return nil, false, nil
		}
		if t == "message_start" {
			if m.role != "assistant" {
				return nil, true, nil
			}
			return p.assistantStart(m.model), true, nil
		}
		return p.lineMessageEnd(&m)
	case "message_update":
		if !lexedAME {
			if ame == nil {
				return nil, false, nil
			}
			al := ndjson.NewLexer(ame)
			if u = lexUpdate(&al); !al.End() {
				return nil, false, nil
			}
		}
		return p.lineUpdate(&u)
	case "tool_execution_start":
		if toolCallID == "" || toolName == "" || !isObject(args) {
			return nil, false, nil
		}
		chunks, err := p.lineToolUse(toolCallID, toolName, args)
		return chunks, true, err
	case "tool_execution_end":
		if toolCallID == "" || toolName == "" {
			return nil, false, nil
		}
		var parts []string
		if result != nil && string(result) != "null" {
			rl := ndjson.NewLexer(result)
			for k := range rl.Members() {
				if string(k) == "content" {
					parts = p.lexParts(&rl)
				} else {
					rl.Skip()
				}
			}
			if !rl.End() {
				return nil, false, nil
			}
		}
		if p.toolResults[toolCallID] {
			return nil, true, nil
		}
		return p.toolResultChunks(toolCallID, toolName, parts, isError), true, nil
	case "auto_retry_start":
		if !hasAttempt || !isAttempt(attempt) {
			return nil, false, nil
		}
		return p.retryStartWith(int(attempt), errMsg), true, nil
	case "auto_retry_end":
		if !success.Ok() {
			return nil, false, nil
		}
		ok := hasAttempt && isAttempt(attempt)
		n := 0
		if ok {
			n = int(attempt)
		}
		return p.retryEndWith(success.S == "true", finalError, n, ok), true, nil
	case "compaction_end":
		if willRetry.S == "true" {
			p.pending = nil
		}
		return nil, true, nil
	}
	return nil, false, nil // what Event reports
}

func knownRole(role string) bool {
	switch role {
	case "assistant", "toolResult", "user", "custom", "bashExecution", "branchSummary", "compactionSummary":
		return true
	}
	return false
}

// lineMessageEnd maps a message_end whose message has a known role.
func (p *Parser) lineMessageEnd(m *lineMessage) ([]wire.Chunk, bool, error) {
	switch m.role {
	case "assistant":
		cur := p.current()
		p.cur = nil
		if m.usage != nil {
			p.addCounts(m.usage)
		}
		if f, failed := failed(m.stop, m.errMsg); failed {
			p.pending = &f
			return nil, true, nil
		}
		var out []wire.Chunk
		for i, b := range m.blocks {
			var cs []wire.Chunk
			var err error
			switch b.typ {
			case "text":
				cs, err = complete(wire.ChunkText, cur.text, i, b.text)
			case "thinking":
				if b.redacted {
					continue
				}
				cs, err = complete(wire.ChunkThinking, cur.thinking, i, b.text)
			case "toolCall":
				cs, err = p.lineToolUse(b.id, b.name, b.args)
			}
			if err != nil {
				return nil, true, err
			}
			out = append(out, cs...)
		}
		p.pending = nil
		p.completed++
		p.lastStop = m.stop
		if m.model != "" {
			p.lastModel = m.model
		}
		return out, true, nil
	case "toolResult":
		if m.toolCallID == "" {
			return nil, false, nil
		}
		if p.toolResults[m.toolCallID] {
			return nil, true, nil
		}
		return p.toolResultChunks(m.toolCallID, m.toolName, m.parts, m.isError), true, nil
	}
	return nil, true, nil
}

// lexMessage reads a message_start's or message_end's message. Its
// content is read by the message's role: an assistant's blocks or a tool
// result's parts; any other role's content is skipped. The usage must be
// what addUsage adds without an error.
func (p *Parser) lexMessage(l *ndjson.Lexer) lineMessage {
	var m lineMessage
	var content []byte // raw, when the role came after it
	contentRole := ""  // the role the content was read by
	for k := range l.Members() {
		switch string(k) {
		case "role":
			if l.Peek() != '"' {
				l.Fail() // Event reports a missing role
			}
			m.role = l.String()
		case "model":
			m.model = l.String()
		case "stopReason":
			m.stop = l.String()
		case "errorMessage":
			m.errMsg = l.String()
		case "toolCallId":
			m.toolCallID = l.String()
		case "toolName":
			m.toolName = l.String()
		case "isError":
			m.isError = l.Bool()
		case "usage":
			m.usage = lexUsage(l)
		case "content":
			m.blocks, m.parts, content, contentRole = nil, nil, nil, m.role
			switch {
			case l.Peek() == 'n':
				l.Null()
				contentRole = "*" // null: no content whatever the role
			case m.role == "assistant":
				m.blocks = p.lexBlocks(l)
			case m.role == "toolResult":
				m.parts = p.lexParts(l)
			default:
				content = l.Raw()
			}
		default:
			l.Skip()
		}
	}
	if contentRole != "*" && contentRole != m.role && (m.role == "assistant" || m.role == "toolResult") {
		// The role the content is read by came after it (or changed).
		m.blocks, m.parts = nil, nil
		if content != nil {
			cl := ndjson.NewLexer(content)
			if m.role == "assistant" {
				m.blocks = p.lexBlocks(&cl)
			} else {
				m.parts = p.lexParts(&cl)
			}
			if !cl.End() {
				l.Fail()
			}
		} else if contentRole != "" || m.blocks != nil {
			l.Fail() // read by another role: leave it to Event
		}
	}
	return m
}

// lexUsage reads a message's usage as addUsage does; a count or cost
// addUsage reports fails the lexer. Null is no usage.
func lexUsage(l *ndjson.Lexer) *usageCounts {
	if l.Peek() == 'n' {
		l.Null()
		return nil
	}
	var c usageCounts
	for k := range l.Members() {
		i := -1
		for j, key := range usageKeys {
			if string(k) == key {
				i = j
			}
		}
		switch {
		case i >= 0:
			n, ok := l.Number()
			switch {
			case !ok:
				c.n[i] = 0 // null: as absent
			case !isCount(n):
				l.Fail()
			default:
				c.n[i] = int64(n)
			}
		case string(k) == "cost":
			c.cost, c.hasCost = 0, false
			if l.Peek() == 'n' {
				l.Null()
				continue
			}
			for k := range l.Members() {
				if string(k) != "total" {
					l.Skip()
					continue
				}
				n, ok := l.Number()
				switch {
				case !ok:
					c.cost, c.hasCost = 0, false
				case !isCost(n):
					l.Fail()
				default:
					c.cost, c.hasCost = n, true
				}
			}
		default:
			l.Skip()
		}
	}
	return &c
}

// lexBlocks reads an assistant message's content; any block Event
// reports fails the lexer. The slice is the parser's, reused.
func (p *Parser) lexBlocks(l *ndjson.Lexer) []lineBlock {
	blocks := p.line.blocks[:0]
	for range l.Elements() {
		var b lineBlock
		var text, thinking ndjson.OptString
		var args []byte
		for k := range l.Members() {
			switch string(k) {
			case "type":
				b.typ = l.String()
			case "text":
				text = l.OptString()
			case "thinking":
				thinking = l.OptString()
			case "redacted":
				b.redacted = l.Bool()
			case "id":
				b.id = l.String()
			case "name":
				b.name = l.String()
			case "arguments":
				args = l.Raw()
			default:
				l.Skip()
			}
		}
		ok := false
		switch b.typ {
		case "text":
			b.text, ok = text.S, text.Ok()
		case "thinking":
			b.text, ok = thinking.S, thinking.Ok()
		case "toolCall":
			b.args, ok = args, isObject(args) && b.id != "" && b.name != ""
		}
		if !ok {
			l.Fail()
			break
		}
		blocks = append(blocks, b)
	}
	p.line.blocks = blocks
	return blocks
}

// lexParts reads a tool result's content as its output shows it (Event's
// toolResult); null is no content, anything but a list of objects fails
// the lexer. The slice is the parser's, reused.
func (p *Parser) lexParts(l *ndjson.Lexer) []string {
	parts := p.line.parts[:0]
	if l.Peek() == 'n' {
		l.Null()
		return parts
	}
	for range l.Elements() {
		var typ, text, mime string
		for k := range l.Members() {
			switch string(k) {
			case "type":
				typ = l.String()
			case "text":
				text = l.String()
			case "mimeType":
				mime = l.String()
			default:
				l.Skip()
			}
		}
		parts = append(parts, partText(typ, text, mime))
	}
	p.line.parts = parts
	return parts
}

// lexUpdate reads a message_update's assistantMessageEvent.
func lexUpdate(l *ndjson.Lexer) lineUpdate {
	var u lineUpdate
	for k := range l.Members() {
		switch string(k) {
		case "type":
			u.typ = known(l.Quoted(), updateTypes)
		case "contentIndex":
			u.index, u.hasIndex = l.Number()
		case "delta":
			d := l.OptString()
			u.delta, u.hasDelta = d.S, d.Ok()
		case "content":
			c := l.OptString()
			u.content, u.hasFull = c.S, c.Ok()
		case "toolCall":
			u.toolCall = l.Raw()
		case "partial":
			u.partial = l.Raw()
		case "error":
			u.errObject, u.errStop, u.errMsg = false, "", ""
			if l.Peek() != '{' {
				l.Skip()
				continue
			}
			u.errObject = true
			for k := range l.Members() {
				switch string(k) {
				case "stopReason":
					u.errStop = l.String()
				case "errorMessage":
					u.errMsg = l.String()
				default:
					l.Skip()
				}
			}
		default:
			l.Skip()
		}
	}
	return u
}

// lineUpdate maps a message_update for Line.
func (p *Parser) lineUpdate(u *lineUpdate) ([]wire.Chunk, bool, error) {
	idx, idxOK := 0, u.hasIndex && u.index >= 0 && u.index <= 1<<20 && u.index == float64(int(u.index))
	if idxOK {
		idx = int(u.index)
	}
	switch u.typ {
	case "start", "text_start", "thinking_start", "toolcall_start", "toolcall_delta", "done":
		return nil, true, nil
	case "text_delta", "thinking_delta":
		if !idxOK || !u.hasDelta {
			return nil, false, nil
		}
		return p.delta(u.typ, idx, u.delta), true, nil
	case "text_end", "thinking_end":
		if !idxOK || !u.hasFull {
			return nil, false, nil
		}
		redacted := false
		if u.typ == "thinking_end" {
			var ok bool
			if redacted, ok = lexRedacted(u.partial, idx); !ok {
				return nil, false, nil
			}
		}
		chunks, err := p.blockEnd(u.typ, idx, u.content, redacted)
		return chunks, true, err
	case "toolcall_end":
		if u.toolCall == nil || u.toolCall[0] != '{' {
			return nil, false, nil
		}
		var id, name string
		var args []byte
		tl := ndjson.NewLexer(u.toolCall)
		for k := range tl.Members() {
			switch string(k) {
			case "id":
				id = tl.String()
			case "name":
				name = tl.String()
			case "arguments":
				args = tl.Raw()
			default:
				tl.Skip()
			}
		}
		if !tl.End() || !isObject(args) || id == "" || name == "" {
			return nil, false, nil
		}
		chunks, err := p.lineToolUse(id, name, args)
		return chunks, true, err
	case "error":
		if u.errObject {
			if f, failed := failed(u.errStop, u.errMsg); failed {
				p.pending = &f
			}
		}
		return nil, true, nil
	}
	return nil, false, nil
}

// lexRedacted reads, as redactedAt does, whether the partial message
// marks the block at idx as redacted; ok is false for a partial Line
// leaves to Event.
func lexRedacted(partial []byte, idx int) (redacted, ok bool) {
	if partial == nil || partial[0] != '{' {
		return false, true // not an object: not redacted
	}
	l := ndjson.NewLexer(partial)
	for k := range l.Members() {
		if string(k) != "content" {
			l.Skip()
			continue
		}
		redacted = false
		if l.Peek() != '[' {
			l.Skip()
			continue
		}
		for i := range l.Elements() {
			if i != idx || l.Peek() != '{' {
				l.Skip()
				continue
			}
			for k := range l.Members() {
				if string(k) != "redacted" {
					l.Skip()
					continue
				}
				switch l.Peek() {
				case 't', 'f':
					redacted = l.Bool()
				default:
					redacted = false
					l.Skip()
				}
			}
		}
	}
	return redacted, l.End()
}

// known returns the name of names that raw (as ndjson.Lexer.Quoted read it) is, or ""
// (which Line leaves to Event).
func known(raw []byte, names []string) string {
	for _, n := range names {
		if ndjson.Is(raw, n) {
			return n
		}
	}
	return ""
}

// eventTypes and updateTypes are the event and assistantMessageEvent
// types Line reads.
var (
	eventTypes = []string{"session", "agent_start", "agent_end", "turn_start", "turn_end", "tool_execution_update",
		"queue_update", "session_info_changed", "thinking_level_changed", "compaction_start",
		"message_start", "message_end", "message_update", "tool_execution_start", "tool_execution_end",
		"auto_retry_start", "auto_retry_end", "compaction_end"}
	updateTypes = []string{"start", "text_start", "thinking_start", "toolcall_start", "toolcall_delta", "done",
		"text_delta", "thinking_delta", "text_end", "thinking_end", "toolcall_end", "error"}
)

// readBool reads a boolean member as a map lookup sees it: S is "true" or
// "false" (Set and not Null) or the member is null or absent.
func readBool(l *ndjson.Lexer) ndjson.OptString {
	switch l.Peek() {
	case 'n':
		l.Null()
		return ndjson.OptString{Set: true, Null: true}
	case 't', 'f':
		if l.Bool() {
			return ndjson.OptString{S: "true", Set: true}
		}
		return ndjson.OptString{S: "false", Set: true}
	}
	l.Fail()
	return ndjson.OptString{}
}

// isObject reports whether a raw member (ndjson.Lexer.Raw) is what optMap
// takes without an error: absent, null or an object.
func isObject(raw []byte) bool { return raw == nil || string(raw) == "null" || raw[0] == '{' }

// lineToolUse is toolUse with the arguments still raw (isObject): they are
// decoded only for a call not announced before. The lexer read them as
// encoding/json does, so they decode; if they did not (a lexer bug), the
// error is Event's for arguments that are not an object.
func (p *Parser) lineToolUse(id, name string, raw []byte) ([]wire.Chunk, error) {
	if p.toolUses[id] {
		return nil, nil
	}
	var args map[string]any
	if raw != nil && string(raw) != "null" {
		if json.Unmarshal(raw, &args) != nil {
			return nil, protocolf("arguments is not an object")
		}
	}
	return p.toolUse(id, name, args), nil
}
