package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// printer writes a run's events as they arrive.
type printer interface {
	event(ev wire.Event) error
}

// jsonPrinter writes one JSON object per event (NDJSON).
type jsonPrinter struct{ enc *json.Encoder }

func newJSONPrinter(w io.Writer) *jsonPrinter { return &jsonPrinter{enc: json.NewEncoder(w)} }

func (p *jsonPrinter) event(ev wire.Event) error { return p.enc.Encode(ev) }

// humanPrinter renders events for a terminal: status lines in brackets,
// text inline with its deltas concatenated, thinking dimmed and prefixed,
// tool calls as arrows. It is not safe for concurrent use.
type humanPrinter struct {
	w     io.Writer
	color bool
	open  wire.ChunkType // the chunk type whose delta line is still open, or ""
	bol   bool           // the last write ended a line
	err   error          // the first write error
}

func newHumanPrinter(w io.Writer, color bool) *humanPrinter { return &humanPrinter{w: w, color: color} }

// ANSI styles, used only when color is on.
const (
	styleDim   = "\x1b[2m"
	styleRed   = "\x1b[31m"
	styleBold  = "\x1b[1m"
	styleReset = "\x1b[0m"
)

func (p *humanPrinter) write(style, s string) {
	if p.err != nil || s == "" {
		return
	}
	p.bol = strings.HasSuffix(s, "\n")
	if p.color && style != "" {
		s = style + s + styleReset
	}
	_, p.err = io.WriteString(p.w, s)
}

// line ends an open delta line and writes s as a line of its own.
func (p *humanPrinter) line(style, s string) {
	p.close()
	p.write(style, s)
	p.write("", "\n")
}

// close ends an open delta line, unless its content ended it already.
func (p *humanPrinter) close() {
	if p.open != "" {
		p.open = ""
		if !p.bol {
			p.write("", "\n")
		}
	}
}

// stream writes content of chunk type t after prefix: a delta continues the
// open line of its type, anything else is a line of its own.
func (p *humanPrinter) stream(t wire.ChunkType, style, prefix, content string, delta bool) {
	if !delta {
		p.line(style, prefix+content)
		return
	}
	if p.open != t {
		p.close()
		p.write(style, prefix)
		p.open = t
	}
	p.write(style, content)
}

func (p *humanPrinter) event(ev wire.Event) error {
	switch {
	case ev.Kind == wire.KindStatus && ev.Status != nil:
		p.status(ev.RunID, ev.Status)
	case ev.Kind == wire.KindChunk && ev.Chunk != nil:
		p.chunk(ev.Chunk)
	default:
		p.line(styleDim, fmt.Sprintf("[event %d: %s]", ev.Seq, ev.Kind))
	}
	return p.err
}

func (p *humanPrinter) status(runID string, st *wire.Status) {
	switch {
	case st.State == wire.StateAccepted:
		p.line(styleDim, "[accepted run "+runID+"]")
	case st.State == wire.StateRouted && st.Pin != nil:
		p.line(styleDim, fmt.Sprintf("[routed %s/%s]", st.Pin.Provider, st.Pin.Model))
	case st.State == wire.StateRunning:
		p.line(styleDim, fmt.Sprintf("[running attempt %d]", st.Attempt))
	case st.State.Terminal():
		s := "[" + string(st.State)
		if st.Error != nil {
			s += " " + errorText(st.Error)
		}
		if sum := summary(st.Summary); sum != "" {
			s += " · " + sum
		}
		style := styleBold
		if st.State != wire.StateSucceeded {
			style = styleRed
		}
		p.line(style, s+"]")
	default:
		p.line(styleDim, "["+string(st.State)+"]")
	}
}

func errorText(e *wire.Error) string {
	s := string(e.Class) + ": " + e.Message
	if e.ReturnCode != nil {
		s += fmt.Sprintf(" (returncode %d)", *e.ReturnCode)
	}
	if e.Retryable {
		s += " (retryable)"
	}
	return s
}

func summary(s *wire.Summary) string {
	if s == nil {
		return ""
	}
	parts := []string{fmt.Sprintf("%d chunks", s.Chunks)}
	if s.DurationMS > 0 {
		parts = append(parts, (time.Duration(s.DurationMS) * time.Millisecond).String())
	}
	if u := usageText(s.Usage); u != "" {
		parts = append(parts, u)
	}
	if s.Cost != "" {
		parts = append(parts, "cost "+s.Cost)
	}
	return strings.Join(parts, ", ")
}

func usageText(u *wire.Usage) string {
	if u == nil {
		return ""
	}
	s := fmt.Sprintf("in=%d out=%d", u.InputTokens, u.OutputTokens)
	for _, c := range []struct {
		name string
		n    int64
	}{{"cache_read", u.CacheReadTokens}, {"cache_write", u.CacheWriteTokens}, {"reasoning", u.ReasoningTokens}} {
		if c.n != 0 {
			s += fmt.Sprintf(" %s=%d", c.name, c.n)
		}
	}
	return "usage " + s
}

func (p *humanPrinter) chunk(c *wire.Chunk) {
	switch c.Type {
	case wire.ChunkSystem:
		if c.Content != "" { // the agent's notice: it has not reached its model API
			p.line(styleDim, "[notice "+c.Metadata.Provider+"] "+c.Content)
			return
		}
		p.line(styleDim, "[system"+metadata(c.Metadata)+"]")
	case wire.ChunkThinking:
		p.stream(c.Type, styleDim, "thinking: ", c.Content, c.IsDelta)
	case wire.ChunkText:
		p.stream(c.Type, "", "", c.Content, c.IsDelta)
	case wire.ChunkToolUse:
		p.line("", fmt.Sprintf("→ tool %s %s", c.ToolName, compactJSON(c.ToolInput)))
	case wire.ChunkToolResult:
		what, style := "result", ""
		if c.IsError {
			what, style = "error", styleRed
		}
		p.line(style, fmt.Sprintf("← tool %s %s", what, compactJSON(c.ToolOutput)))
	case wire.ChunkResult:
		if c.Content != "" {
			p.line("", c.Content)
		}
		p.line(styleDim, "[result"+metadata(c.Metadata)+"]")
	case wire.ChunkError:
		class := c.Metadata.ErrorClass
		if class == "" {
			class = "error"
		}
		p.line(styleRed, fmt.Sprintf("[error %s] %s", class, c.Content))
	case wire.ChunkInput:
		p.line(styleDim, fmt.Sprintf("[turn %s] %s", turn(c.Metadata), c.Content))
	case wire.ChunkTurnEnd:
		p.line(styleDim, "[turn end"+metadata(c.Metadata)+"]")
	case wire.ChunkPlan:
		p.line(styleDim, "[plan "+compactJSON(c.ToolOutput)+"]")
	case wire.ChunkPermissionRequested:
		p.line(styleRed, fmt.Sprintf("[permission requested %s] %s %s: answer with agentmesh approve|deny <run_id> %s",
			c.ToolID, c.ToolName, compactJSON(c.ToolInput["options"]), c.ToolID))
	case wire.ChunkPermissionResolved:
		out, _ := c.ToolOutput.(map[string]any)
		line := fmt.Sprintf("[permission %s %v (%s) by %v", c.ToolID, out["outcome"], c.Content, out["by"])
		if c.Metadata.ErrorClass != "" {
			line += " " + string(c.Metadata.ErrorClass)
		}
		p.line(styleDim, line+"]")
	default:
		p.line(styleDim, fmt.Sprintf("[%s %s]", c.Type, c.Content))
	}
}

// turn is a session chunk's turn number, "?" without one.
func turn(m wire.Metadata) string {
	if m.NumTurns == nil {
		return "?"
	}
	return fmt.Sprint(*m.NumTurns)
}

// metadata renders the metadata keys worth showing, each as " key=value".
func metadata(m wire.Metadata) string {
	var b strings.Builder
	add := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	add("provider", m.Provider)
	add("model", m.Model)
	add("session", m.SessionID)
	add("provider_session", m.ProviderSessionID)
	if u := usageText(m.Usage); u != "" {
		b.WriteString(" " + u)
	}
	add("cost", m.Cost)
	if m.TotalCostUSD != nil {
		add("cost_usd", fmt.Sprint(*m.TotalCostUSD))
	}
	if m.NumTurns != nil {
		add("turns", fmt.Sprint(*m.NumTurns))
	}
	if m.DurationMS != nil {
		add("duration", (time.Duration(*m.DurationMS) * time.Millisecond).String())
	}
	add("stop", m.StopReason)
	return b.String()
}

// compactJSON renders v as one line of JSON, or with %v if it cannot be.
func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}
