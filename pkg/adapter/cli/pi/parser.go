package pi

import (
	"fmt"
	"math"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Parser maps one attempt's `pi --mode json` events to chunks (docs/contract.md §1.3).
// It is used by one stream only and is not safe for concurrent use.
//
//	session                         system: provider, session_id, capabilities
//	message_start (assistant)       system: model, when it first appears or changes
//	message_update text_delta       text, is_delta
//	message_update thinking_delta   thinking, is_delta
//	message_update toolcall_end     tool_use (provider id, name, parsed arguments)
//	tool_execution_start            tool_use, unless its id was already announced
//	tool_execution_end              tool_result (same id; is_error when the tool failed)
//	message_end (assistant)         the text/thinking a delta did not carry; usage
//	auto_retry_start                a notice (cli.Notice), or the error when the attempt policy is spent
//	auto_retry_end (success:false)  the error
//	EOF (End)                       the error of a failure nothing retried, else the result
//
// message_update repeats the whole partial message on every line; only its
// assistantMessageEvent is read (and, at thinking_end, whether the block is
// redacted: Pi's placeholder "[Reasoning redacted]" is not reasoning and
// yields no chunk). A tool call is announced once, by whichever
// of toolcall_end, message_end and tool_execution_start names its id first;
// a tool result likewise by tool_execution_end or the toolResult message_end.
//
// Pi reports an API failure in-band and exits 0: the assistant message ends
// with stopReason "error" and an errorMessage. The failure is held, not
// emitted, because Pi may retry it (auto_retry_start follows agent_end) or
// recover from it (compaction with willRetry); it becomes the one error
// chunk when Pi gives up (auto_retry_end with success false), when its
// retries exceed the run's attempt policy, or at EOF when nothing retried
// it. Nothing is emitted after the error chunk.
//
// Allow-listed telemetry that maps to no chunk: agent_start, agent_end,
// turn_start, turn_end (their messages repeat message_end's),
// tool_execution_update (partial tool output), queue_update,
// session_info_changed, thinking_level_changed, compaction_start,
// compaction_end, the start/end markers of message_update and its
// toolcall_delta, and the messages of the user and of Pi's context
// (user, custom, bashExecution, branchSummary, compactionSummary). Any
// other event type, role or content block is a ProviderProtocolError.
type Parser struct {
	maxAttempts int
	line        lineState // Line's scratch space

	sessionID string // confirmed by the session line
	model     string // the model last published on a system chunk

	cur         *message // the assistant message being streamed
	toolUses    map[string]bool
	toolResults map[string]bool

	usage     wire.Usage
	cost      float64
	haveCost  bool
	completed int    // assistant messages that ended without an error
	lastStop  string // stopReason of the last such message
	lastModel string

	// pending is an assistant failure Pi has not (yet) retried: its raw
	// message, described only if it becomes the error chunk.
	pending *string
	done    bool // the error chunk was emitted
}

// message is what has been emitted of one assistant message, by content
// index.
type message struct {
	text     map[int]streamed
	thinking map[int]streamed
}

func newMessage() *message {
	return &message{text: map[int]streamed{}, thinking: map[int]streamed{}}
}

// streamed is what has been emitted of one content block: its length and
// a 64-bit FNV-1a hash of its bytes, not the bytes, so that what a parser
// keeps does not grow with a message's text (and a delta costs its own
// length, not the block's so far).
type streamed struct {
	n int
	h uint64
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvAdd(h uint64, s string) uint64 {
	for i := range len(s) {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

// add is s with t emitted after it.
func (s streamed) add(t string) streamed {
	if s.n == 0 {
		s.h = fnvOffset
	}
	return streamed{n: s.n + len(t), h: fnvAdd(s.h, t)}
}

// prefixOf reports whether full starts with what was emitted (up to a
// hash collision, about 2^-64 for text that disagrees).
func (s streamed) prefixOf(full string) bool {
	return s.n == 0 || len(full) >= s.n && fnvAdd(fnvOffset, full[:s.n]) == s.h
}

// whole is what has been emitted once all of full has.
func whole(full string) streamed { return streamed{}.add(full) }

// NewParser returns a parser for one attempt of call. call.MaxAttempts
// bounds Pi's own agent-level retries (retries = MaxAttempts-1); 0 or less
// means the contract's default, wire.DefaultMaxAttempts.
func NewParser(call adapter.Call) *Parser {
	n := call.MaxAttempts
	if n <= 0 {
		n = wire.DefaultMaxAttempts
	}
	return &Parser{maxAttempts: n, toolUses: map[string]bool{}, toolResults: map[string]bool{}}
}

func protocolf(format string, args ...any) error {
	return wire.Errorf(wire.ProviderProtocolError, "%s: "+format, append([]any{Name}, args...)...)
}

// Event maps one event. Once the error chunk has been emitted it maps
// nothing more.
func (p *Parser) Event(ev map[string]any) ([]wire.Chunk, error) {
	if p.done {
		return nil, nil
	}
	typ, ok := ev["type"].(string)
	if !ok {
		return nil, protocolf("event without a string type")
	}
	switch typ {
	case "session":
		return p.session(ev)
	case "agent_start", "agent_end", "turn_start", "turn_end", "tool_execution_update",
		"queue_update", "session_info_changed", "thinking_level_changed", "compaction_start":
		return nil, nil
	case "message_start":
		return p.messageStart(ev)
	case "message_update":
		return p.messageUpdate(ev)
	case "message_end":
		return p.messageEnd(ev)
	case "tool_execution_start":
		id, name, err := toolRef(ev)
		if err != nil {
			return nil, err
		}
		args, err := optMap(ev, "args")
		if err != nil {
			return nil, err
		}
		return p.toolUse(id, name, args), nil
	case "tool_execution_end":
		return p.toolExecutionEnd(ev)
	case "auto_retry_start":
		return p.retryStart(ev)
	case "auto_retry_end":
		return p.retryEnd(ev)
	case "compaction_end":
		// A compaction that recovers from a context overflow retries the
		// failed request; the held failure is no longer the outcome.
		if retry, _ := ev["willRetry"].(bool); retry {
			p.pending = nil
		}
		return nil, nil
	}
	return nil, protocolf("unknown event type %q", typ)
}

// End is called at a clean EOF. It returns the error chunk of a failure
// nothing retried, or the result, or nothing for a run without an answer.
func (p *Parser) End() ([]wire.Chunk, error) {
	if p.done {
		return nil, nil
	}
	if p.pending != nil {
		return p.fail(describe(*p.pending), ""), nil
	}
	if p.completed == 0 {
		return nil, nil // an empty normal EOF: nothing to report
	}
	usage := p.usage
	turns := p.completed
	md := wire.Metadata{Provider: Name, Model: p.lastModel, SessionID: p.sessionID, Usage: &usage,
		NumTurns: &turns, StopReason: p.lastStop}
	if p.haveCost {
		cost := p.cost
		md.TotalCostUSD = &cost
	}
	// Every text was emitted as it streamed (or at message_end), so the
	// result holds no content.
	return []wire.Chunk{{Type: wire.ChunkResult, Metadata: md}}, nil
}

func (p *Parser) session(ev map[string]any) ([]wire.Chunk, error) {
	id, _ := ev["id"].(string)
	return p.sessionWith(id)
}

// sessionWith maps a session line with its id ("" when it is not a
// string).
func (p *Parser) sessionWith(id string) ([]wire.Chunk, error) {
	if !reqfield.IsUUID(id) {
		return nil, protocolf("session line without a session id (a UUID)")
	}
	switch p.sessionID {
	case "":
	case id:
		return nil, nil
	default:
		return nil, protocolf("a second session line names session %q after %q", id, p.sessionID)
	}
	p.sessionID = id
	caps := Capabilities
	return []wire.Chunk{{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: Name, SessionID: id, Capabilities: &caps}}}, nil
}

// roleOf returns ev's message and its role.
func roleOf(ev map[string]any) (map[string]any, string, error) {
	m, ok := ev["message"].(map[string]any)
	if !ok {
		return nil, "", protocolf("%v event without a message", ev["type"])
	}
	role, ok := m["role"].(string)
	if !ok {
		return nil, "", protocolf("%v message without a role", ev["type"])
	}
	switch role {
	case "assistant", "toolResult", "user", "custom", "bashExecution", "branchSummary", "compactionSummary":
		return m, role, nil
	}
	return nil, "", protocolf("%v message with unknown role %q", ev["type"], role)
}

func (p *Parser) messageStart(ev map[string]any) ([]wire.Chunk, error) {
	m, role, err := roleOf(ev)
	if err != nil || role != "assistant" {
		return nil, err
	}
	model, _ := m["model"].(string)
	return p.assistantStart(model), nil
}

// assistantStart maps the message_start of an assistant message.
func (p *Parser) assistantStart(model string) []wire.Chunk {
	// A new assistant message means Pi went on past any earlier failure
	// (a retry or a recovery); its own outcome decides from here.
	p.pending = nil
	p.cur = newMessage()
	if model == "" || model == p.model {
		return nil
	}
	p.model = model
	return []wire.Chunk{{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: Name, Model: model, SessionID: p.sessionID}}}
}

func (p *Parser) current() *message {
	if p.cur == nil {
		p.cur = newMessage()
	}
	return p.cur
}

func (p *Parser) messageUpdate(ev map[string]any) ([]wire.Chunk, error) {
	ame, ok := ev["assistantMessageEvent"].(map[string]any)
	if !ok {
		return nil, protocolf("message_update without an assistantMessageEvent")
	}
	t, _ := ame["type"].(string)
	switch t {
	case "start", "text_start", "thinking_start", "toolcall_start", "toolcall_delta", "done":
		return nil, nil
	case "text_delta", "thinking_delta":
		idx, err := contentIndex(ame)
		if err != nil {
			return nil, err
		}
		delta, ok := ame["delta"].(string)
		if !ok {
			return nil, protocolf("%s without a string delta", t)
		}
		return p.delta(t, idx, delta), nil
	case "text_end", "thinking_end":
		idx, err := contentIndex(ame)
		if err != nil {
			return nil, err
		}
		full, ok := ame["content"].(string)
		if !ok {
			return nil, protocolf("%s without string content", t)
		}
		return p.blockEnd(t, idx, full, t == "thinking_end" && redactedAt(ame, idx))
	case "toolcall_end":
		tc, ok := ame["toolCall"].(map[string]any)
		if !ok {
			return nil, protocolf("toolcall_end without a toolCall")
		}
		return p.toolCallBlock(tc)
	case "error":
		// The failed message follows as message_end; hold its error now
		// in case it does not.
		if m, ok := ame["error"].(map[string]any); ok {
			if f, failed := failureOf(m); failed {
				p.pending = &f
			}
		}
		return nil, nil
	}
	return nil, protocolf("unknown message_update event %q", t)
}

// delta maps a text_delta or thinking_delta at content index idx.
func (p *Parser) delta(t string, idx int, delta string) []wire.Chunk {
	m := p.current()
	if t == "text_delta" {
		m.text[idx] = m.text[idx].add(delta)
		return deltaChunk(wire.ChunkText, delta)
	}
	m.thinking[idx] = m.thinking[idx].add(delta)
	return deltaChunk(wire.ChunkThinking, delta)
}

// blockEnd maps a text_end or thinking_end at content index idx with the
// block's whole content; redacted marks a thinking block Pi redacted.
func (p *Parser) blockEnd(t string, idx int, full string, redacted bool) ([]wire.Chunk, error) {
	if t == "text_end" {
		return complete(wire.ChunkText, p.current().text, idx, full)
	}
	if redacted {
		p.current().thinking[idx] = whole(full) // a placeholder, not reasoning
		return nil, nil
	}
	return complete(wire.ChunkThinking, p.current().thinking, idx, full)
}

func deltaChunk(t wire.ChunkType, s string) []wire.Chunk {
	if s == "" {
		return nil
	}
	return []wire.Chunk{{Type: t, Content: s, IsDelta: true}}
}

// complete emits what full adds to the text already emitted at idx: the
// rest as a delta, or the whole block as a complete unit when nothing of it
// streamed. full must extend what was emitted.
func complete(t wire.ChunkType, emitted map[int]streamed, idx int, full string) ([]wire.Chunk, error) {
	have := emitted[idx]
	if !have.prefixOf(full) {
		return nil, protocolf("the complete %s at content index %d disagrees with its streamed deltas", t, idx)
	}
	emitted[idx] = whole(full)
	if have.n == 0 && full != "" {
		return []wire.Chunk{{Type: t, Content: full}}, nil
	}
	return deltaChunk(t, full[have.n:]), nil
}

// redactedAt reports whether the partial message of a message_update marks
// the block at idx as redacted thinking (Pi shows it as the placeholder
// "[Reasoning redacted]").
func redactedAt(ame map[string]any, idx int) bool {
	partial, _ := ame["partial"].(map[string]any)
	content, _ := partial["content"].([]any)
	if idx >= len(content) {
		return false
	}
	block, _ := content[idx].(map[string]any)
	redacted, _ := block["redacted"].(bool)
	return redacted
}

func contentIndex(ame map[string]any) (int, error) {
	f, ok := ame["contentIndex"].(float64)
	if !ok || f < 0 || f > 1<<20 || f != math.Trunc(f) {
		return 0, protocolf("%v without a valid contentIndex", ame["type"])
	}
	return int(f), nil
}

func (p *Parser) messageEnd(ev map[string]any) ([]wire.Chunk, error) {
	m, role, err := roleOf(ev)
	if err != nil {
		return nil, err
	}
	switch role {
	case "assistant":
		return p.assistantEnd(m)
	case "toolResult":
		id, _ := m["toolCallId"].(string)
		name, _ := m["toolName"].(string)
		if id == "" {
			return nil, protocolf("toolResult message without a toolCallId")
		}
		content, err := optList(m, "content")
		if err != nil {
			return nil, err
		}
		isErr, _ := m["isError"].(bool)
		return p.toolResult(id, name, content, isErr)
	}
	return nil, nil
}

func (p *Parser) assistantEnd(m map[string]any) ([]wire.Chunk, error) {
	cur := p.current()
	p.cur = nil
	if err := p.addUsage(m); err != nil {
		return nil, err
	}
	if f, failed := failureOf(m); failed {
		// What streamed before the failure was emitted; the failed
		// message's blocks (a cut-off tool call among them) are not
		// announced, since Pi does not act on them.
		p.pending = &f
		return nil, nil
	}
	content, err := optList(m, "content")
	if err != nil {
		return nil, err
	}
	var out []wire.Chunk
	for i, b := range content {
		block, ok := b.(map[string]any)
		if !ok {
			return nil, protocolf("assistant content block %d is not an object", i)
		}
		var cs []wire.Chunk
		switch bt, _ := block["type"].(string); bt {
		case "text":
			s, ok := block["text"].(string)
			if !ok {
				return nil, protocolf("text block %d without text", i)
			}
			cs, err = complete(wire.ChunkText, cur.text, i, s)
		case "thinking":
			s, ok := block["thinking"].(string)
			if !ok {
				return nil, protocolf("thinking block %d without thinking", i)
			}
			if redacted, _ := block["redacted"].(bool); redacted {
				continue // "[Reasoning redacted]" is a placeholder, not reasoning
			}
			cs, err = complete(wire.ChunkThinking, cur.thinking, i, s)
		case "toolCall":
			cs, err = p.toolCallBlock(block)
		default:
			return nil, protocolf("assistant content block %d has unknown type %q", i, bt)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	stop, _ := m["stopReason"].(string)
	p.pending = nil
	p.completed++
	p.lastStop = stop
	if model, _ := m["model"].(string); model != "" {
		p.lastModel = model
	}
	return out, nil
}

// failureOf reports whether an assistant message ended in failure, and
// its raw message.
func failureOf(m map[string]any) (string, bool) {
	stop, _ := m["stopReason"].(string)
	msg, _ := m["errorMessage"].(string)
	return failed(stop, msg)
}

// failed reports whether a message with stopReason stop and errorMessage
// msg ended in failure, and its raw message.
func failed(stop, msg string) (string, bool) {
	if stop != "error" && stop != "aborted" {
		return "", false
	}
	if msg == "" && stop == "aborted" {
		msg = "the request was aborted"
	}
	return msg, true
}

// addUsage adds an assistant message's token counts and cost. An error
// leaves the parser's usage as it was.
func (p *Parser) addUsage(m map[string]any) error {
	u, err := optMap(m, "usage")
	if err != nil || u == nil {
		return err
	}
	var c usageCounts
	for i, key := range usageKeys {
		v, present := u[key]
		if !present || v == nil {
			continue
		}
		n, ok := v.(float64)
		if !ok || !isCount(n) {
			return protocolf("usage.%s is not a token count", key)
		}
		c.n[i] = int64(n)
	}
	cost, err := optMap(u, "cost")
	if err != nil {
		return err
	}
	if cost != nil {
		if v, present := cost["total"]; present && v != nil {
			total, ok := v.(float64)
			if !ok || !isCost(total) {
				return protocolf("usage.cost.total is not a cost")
			}
			c.cost, c.hasCost = total, true
		}
	}
	p.addCounts(&c)
	return nil
}

// usageKeys are the token counts of a message's usage, in the order of
// usageCounts.n.
var usageKeys = [...]string{"input", "output", "cacheRead", "cacheWrite"}

// usageCounts is one message's usage (usageKeys), absent counts 0.
type usageCounts struct {
	n       [len(usageKeys)]int64
	cost    float64
	hasCost bool
}

func isCount(n float64) bool { return n >= 0 && n <= 1e15 && n == math.Trunc(n) }
func isCost(n float64) bool  { return n >= 0 && !math.IsInf(n, 0) }

// addCounts adds one message's usage to the run's.
func (p *Parser) addCounts(c *usageCounts) {
	p.usage.InputTokens += c.n[0]
	p.usage.OutputTokens += c.n[1]
	p.usage.CacheReadTokens += c.n[2]
	p.usage.CacheWriteTokens += c.n[3]
	if c.hasCost {
		p.cost += c.cost
		p.haveCost = true
	}
}

// toolCallBlock announces a toolCall content block.
func (p *Parser) toolCallBlock(tc map[string]any) ([]wire.Chunk, error) {
	id, _ := tc["id"].(string)
	name, _ := tc["name"].(string)
	if id == "" || name == "" {
		return nil, protocolf("tool call without an id and a name")
	}
	args, err := optMap(tc, "arguments")
	if err != nil {
		return nil, err
	}
	return p.toolUse(id, name, args), nil
}

// toolUse announces a tool call once per id.
func (p *Parser) toolUse(id, name string, args map[string]any) []wire.Chunk {
	if p.toolUses[id] {
		return nil
	}
	p.toolUses[id] = true
	return []wire.Chunk{{Type: wire.ChunkToolUse, ToolID: id, ToolName: name, ToolInput: args}}
}

func toolRef(ev map[string]any) (id, name string, err error) {
	id, _ = ev["toolCallId"].(string)
	name, _ = ev["toolName"].(string)
	if id == "" || name == "" {
		return "", "", protocolf("%v without a toolCallId and a toolName", ev["type"])
	}
	return id, name, nil
}

func (p *Parser) toolExecutionEnd(ev map[string]any) ([]wire.Chunk, error) {
	id, name, err := toolRef(ev)
	if err != nil {
		return nil, err
	}
	result, err := optMap(ev, "result")
	if err != nil {
		return nil, err
	}
	var content []any
	if result != nil {
		if content, err = optList(result, "content"); err != nil {
			return nil, err
		}
	}
	isErr, _ := ev["isError"].(bool)
	return p.toolResult(id, name, content, isErr)
}

// toolResult reports a tool's result once per id. The output is the text
// of the result's content; a part that is not text (an image) is named,
// not inlined.
func (p *Parser) toolResult(id, name string, content []any, isErr bool) ([]wire.Chunk, error) {
	if p.toolResults[id] {
		return nil, nil
	}
	var parts []string
	for i, c := range content {
		part, ok := c.(map[string]any)
		if !ok {
			return nil, protocolf("tool result %s: content part %d is not an object", id, i)
		}
		t, _ := part["type"].(string)
		text, _ := part["text"].(string)
		mime, _ := part["mimeType"].(string)
		parts = append(parts, partText(t, text, mime))
	}
	return p.toolResultChunks(id, name, parts, isErr), nil
}

// partText is a tool result's content part as its output shows it.
func partText(typ, text, mime string) string {
	if typ == "text" {
		return text
	}
	return fmt.Sprintf("[%s %s]", typ, mime)
}

// toolResultChunks reports a tool's result, not reported before, with
// its parts' text.
func (p *Parser) toolResultChunks(id, name string, parts []string, isErr bool) []wire.Chunk {
	p.toolResults[id] = true
	return []wire.Chunk{{Type: wire.ChunkToolResult, ToolID: id, ToolName: name,
		ToolOutput: strings.Join(parts, "\n"), IsError: isErr}}
}

func (p *Parser) retryStart(ev map[string]any) ([]wire.Chunk, error) {
	attempt, ok := count(ev, "attempt")
	if !ok {
		return nil, protocolf("auto_retry_start without an attempt number")
	}
	msg, _ := ev["errorMessage"].(string)
	return p.retryStartWith(attempt, msg), nil
}

// retryStartWith maps auto_retry_start with its attempt number and
// errorMessage: within the run's attempt policy, Pi's notice that it
// retries (cli.Notice, classified as the error it retries), else the
// error chunk.
func (p *Parser) retryStartWith(attempt int, errMsg string) []wire.Chunk {
	if attempt <= p.maxAttempts-1 {
		f := describe(errMsg)
		return []wire.Chunk{cli.Notice(Name, fmt.Sprintf("retrying (attempt %d): %s", attempt, f.msg), f.class)}
	}
	f := p.pending
	if f == nil {
		f = &errMsg
	}
	return p.fail(describe(*f), fmt.Sprintf(" (after %d attempts; the run allows %d)", attempt, p.maxAttempts))
}

func (p *Parser) retryEnd(ev map[string]any) ([]wire.Chunk, error) {
	success, ok := ev["success"].(bool)
	if !ok {
		return nil, protocolf("auto_retry_end without success")
	}
	msg, _ := ev["finalError"].(string)
	attempt, hasAttempt := count(ev, "attempt")
	return p.retryEndWith(success, msg, attempt, hasAttempt), nil
}

// retryEndWith maps auto_retry_end with its success, finalError and
// attempt number (if it has one).
func (p *Parser) retryEndWith(success bool, msg string, attempt int, hasAttempt bool) []wire.Chunk {
	if success {
		p.pending = nil
		return nil
	}
	f := p.pending
	if msg != "" || f == nil {
		f = &msg
	}
	suffix := ""
	if hasAttempt {
		suffix = fmt.Sprintf(" (after %d attempts)", attempt+1)
	}
	return p.fail(describe(*f), suffix)
}

// fail returns the one error chunk; nothing is emitted after it.
func (p *Parser) fail(f failure, suffix string) []wire.Chunk {
	p.done = true
	p.pending = nil
	return []wire.Chunk{{Type: wire.ChunkError, Content: f.msg + suffix, IsError: true,
		Metadata: wire.Metadata{Provider: Name, ErrorClass: f.class}}}
}

// count returns a non-negative integer field.
func count(m map[string]any, key string) (int, bool) {
	f, ok := m[key].(float64)
	if !ok || !isAttempt(f) {
		return 0, false
	}
	return int(f), true
}

// isAttempt reports whether f is an attempt number: integral, 0 to 2^30.
func isAttempt(f float64) bool { return f >= 0 && f <= 1<<30 && f == math.Trunc(f) }

func optMap(m map[string]any, key string) (map[string]any, error) {
	switch v := m[key].(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return v, nil
	}
	return nil, protocolf("%s is not an object", key)
}

func optList(m map[string]any, key string) ([]any, error) {
	switch v := m[key].(type) {
	case nil:
		return nil, nil
	case []any:
		return v, nil
	}
	return nil, protocolf("%s is not a list", key)
}
