package trajectory

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Input is one finished run, as the exporter has read it.
type Input struct {
	// Record gives the identity (tenant, run_id, principal, profile,
	// adapter, conversation, created) and the pin.
	Record wire.RunRecord
	// Request holds the run's request fields, decoded from msgpack; nil
	// for none.
	Request map[string]any
	Labels  map[string]string
	// Events are every event of the run in seq order, 1 to n, the last
	// being its terminal status: one per seq, a batch of chunks as read
	// from the stream expanded (wire.Event.Expand).
	Events []wire.Event
}

// toolsField is the request field that declares tools (pkg/adapter/toolschema).
const toolsField = "tools"

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Build returns the canonical JSON bytes of the schema v1 trajectory of in,
// redacted through r, and the sha256 of those bytes in lowercase hex.
//
// Every string of in.Request (keys too), in.Labels, the chunks and the
// errors passes through r.String before it is written; r.Counts, read
// last, becomes the redaction record. A tools field of the request is not
// stored: it becomes Trajectory.Tools, each tool described by its redacted
// name and the sha256 of its input schema's canonical JSON, taken before
// redaction. Chunks keep only the closed metadata keys; a status keeps no
// pin. Nothing else of the run enters: in particular no checkpoint state.
//
// Build checks the events first: they must be gapless from seq 1, all of
// in.Record's run, each well-formed, with exactly one terminal status, the
// last. If not, it returns an *IncompleteError (ErrIncomplete) and has not
// called r. A value it cannot write (a NaN, a map with non-string keys, a
// tenant that is not a token) is an *InputError (ErrInvalidInput).
//
// The same input always gives the same bytes, whatever the order its maps
// were built in. Build does not modify in; it is safe for concurrent use
// with a Redactor per call.
func Build(in Input, r Redactor) (data []byte, sum string, err error) {
	if r == nil {
		return nil, "", &InputError{Field: "redactor", Reason: "nil; every trajectory is redacted"}
	}
	if err := checkRecord(&in.Record); err != nil {
		return nil, "", err
	}
	if err := checkEvents(in.Record.RunID, in.Events); err != nil {
		return nil, "", err
	}
	w := walker{r: r}
	rec := &in.Record
	t := &Trajectory{
		SchemaVersion: SchemaVersion,
		Tenant:        rec.Tenant,
		RunID:         rec.RunID,
		Principal:     rec.Principal,
		Profile:       rec.Profile,
		Adapter:       rec.Adapter,
		Conversation:  rec.Conversation,
		CreatedMS:     rec.Created,
		Pin:           pinOf(rec.Pin),
		Labels:        w.labels(in.Labels),
		Chunks:        make([]Chunk, 0, len(in.Events)),
	}
	if err := t.request(w, in.Request); err != nil {
		return nil, "", err
	}
	for i := range in.Events {
		ev := &in.Events[i]
		if ev.Kind == wire.KindChunk {
			c, err := chunkOf(w, ev)
			if err != nil {
				return nil, "", err
			}
			t.Chunks = append(t.Chunks, c)
			continue
		}
		if ev.Status.Pin != nil && rec.Pin == nil {
			t.Pin = pinOf(ev.Status.Pin) // the last status pin, for a record without one
		}
		st := statusOf(w, ev)
		if i == len(in.Events)-1 {
			t.Status = st
			t.EndedMS = ev.TS / 1e6
		} else {
			t.Transitions = append(t.Transitions, st)
		}
	}
	rules, err := fired(r.Counts())
	if err != nil {
		return nil, "", err
	}
	t.Redaction.Rules = rules
	data, err = encode(t)
	if err != nil {
		return nil, "", &InputError{Field: "trajectory", Reason: err.Error()}
	}
	s := sha256.Sum256(data)
	return data, hex.EncodeToString(s[:]), nil
}

func checkRecord(rec *wire.RunRecord) error {
	for _, f := range []struct{ name, v string }{
		{"tenant", rec.Tenant}, {"run_id", rec.RunID}, {"principal", rec.Principal},
	} {
		if !tokenRE.MatchString(f.v) {
			return &InputError{Field: "record." + f.name, Reason: fmt.Sprintf("%.80q is not a token of 1 to 64 of [A-Za-z0-9_-]", f.v)}
		}
	}
	if rec.Conversation != "" && !tokenRE.MatchString(rec.Conversation) {
		return &InputError{Field: "record.conversation", Reason: fmt.Sprintf("%.80q is not a token of 1 to 64 of [A-Za-z0-9_-]", rec.Conversation)}
	}
	return nil
}

// checkEvents returns an *IncompleteError unless events are one whole run.
func checkEvents(runID string, events []wire.Event) error {
	bad := func(seq uint64, format string, args ...any) error {
		return &IncompleteError{RunID: runID, Seq: seq, Reason: fmt.Sprintf(format, args...)}
	}
	if len(events) == 0 {
		return bad(1, "missing: the run has no events")
	}
	for i := range events {
		ev := &events[i]
		want := uint64(i) + 1
		switch {
		case ev.Seq > want:
			return bad(want, "missing (the next event is seq %d)", ev.Seq)
		case ev.Seq < want:
			return bad(ev.Seq, "out of order or repeated: found after seq %d", want-1)
		case ev.RunID != runID:
			return bad(ev.Seq, "belongs to run %.80q", ev.RunID)
		}
		switch ev.Kind {
		case wire.KindChunk:
			if ev.Chunk == nil || ev.Status != nil {
				return bad(ev.Seq, "a chunk event must carry a chunk and no status")
			}
			if !ev.Chunk.Type.Valid() {
				return bad(ev.Seq, "unknown chunk type %.40q", ev.Chunk.Type)
			}
		case wire.KindStatus:
			if ev.Status == nil || ev.Chunk != nil {
				return bad(ev.Seq, "a status event must carry a status and no chunk")
			}
			if !validState(ev.Status.State) {
				return bad(ev.Seq, "unknown state %.40q", ev.Status.State)
			}
			if ev.Status.State.Terminal() && i != len(events)-1 {
				return bad(ev.Seq, "terminal status %s before the last event, seq %d", ev.Status.State, events[len(events)-1].Seq)
			}
		case wire.KindChunks:
			return bad(ev.Seq, "a batch of chunks (seqs %d to %d): the events must be one per seq (wire.Event.Expand)", ev.Seq, ev.Last)
		default:
			return bad(ev.Seq, "unknown event kind %.40q", ev.Kind)
		}
	}
	if last := &events[len(events)-1]; !last.Terminal() {
		return bad(0, "no terminal status: the last event, seq %d, is not one", last.Seq)
	}
	return nil
}

func validState(s wire.State) bool {
	switch s {
	case wire.StateAccepted, wire.StateRouted, wire.StateRunning:
		return true
	}
	return s.Terminal()
}

func pinOf(p *wire.Pin) *Pin {
	if p == nil {
		return nil
	}
	out := &Pin{Provider: p.Provider, Model: p.Model, ProfileHash: p.ProfileHash, RegistryVersion: p.RegistryVersion}
	if len(p.Pricing) > 0 {
		out.Pricing = make(map[string]string, len(p.Pricing))
		for k, v := range p.Pricing {
			out.Pricing[k] = v
		}
	}
	return out
}

// request sets t.Request and t.Tools from the request fields.
func (t *Trajectory) request(w walker, req map[string]any) error {
	if len(req) == 0 {
		return nil
	}
	if tv, ok := req[toolsField]; ok {
		tools, err := describeTools(w, tv)
		if err != nil {
			return &InputError{Field: err.path("request." + toolsField), Reason: err.reason}
		}
		t.Tools = tools
		rest := make(map[string]any, len(req)-1)
		for k, v := range req {
			if k != toolsField {
				rest[k] = v
			}
		}
		req = rest
	}
	if len(req) == 0 {
		return nil
	}
	m, err := w.objectReserving(req, toolsField)
	if err != nil {
		return &InputError{Field: err.path("request"), Reason: err.reason}
	}
	t.Request = m
	return nil
}

// describeTools describes the tools field v: a list of tools (a value that
// is not a list is taken as a list of one). A tool is a map {name,
// description, input_schema} (toolschema.Tool) or a bare name (a CLI's
// allowed tool); anything else is described by the hash of its own JSON
// and no name. The hashes are taken before redaction; only the name is
// redacted.
func describeTools(w walker, v any) ([]Tool, *pathError) {
	plain := walker{} // normalise without redacting: the hash identifies the schema as given
	n, err := plain.value(v)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, nil
	}
	list, ok := n.([]any)
	if !ok {
		list = []any{n}
	}
	out := make([]Tool, len(list))
	for i, e := range list {
		var name string
		var schema any
		switch e := e.(type) {
		case string:
			name = e
		case map[string]any:
			name, _ = e["name"].(string)
			schema = e["input_schema"]
		default:
			schema = e
		}
		b, cerr := compact(schema)
		if cerr != nil {
			return nil, (&pathError{reason: cerr.Error()}).under("[" + strconv.Itoa(i) + "]")
		}
		out[i] = Tool{Name: w.str(name), SchemaSHA256: hashHex(b)}
	}
	return out, nil
}

func chunkOf(w walker, ev *wire.Event) (Chunk, error) {
	c := ev.Chunk
	out := Chunk{
		Seq:      ev.Seq,
		TSNS:     ev.TS,
		Type:     c.Type,
		Content:  w.str(c.Content),
		ToolName: w.str(c.ToolName),
		ToolID:   w.str(c.ToolID),
		IsError:  c.IsError,
		IsDelta:  c.IsDelta,
		Metadata: metadataOf(w, &c.Metadata),
	}
	if len(c.ToolInput) > 0 {
		m, err := w.object(c.ToolInput)
		if err != nil {
			return Chunk{}, &InputError{Field: err.path(fmt.Sprintf("seq %d: chunk.tool_input", ev.Seq)), Reason: err.reason}
		}
		out.ToolInput = m
	}
	if c.ToolOutput != nil {
		v, err := w.value(c.ToolOutput)
		if err != nil {
			return Chunk{}, &InputError{Field: err.path(fmt.Sprintf("seq %d: chunk.tool_output", ev.Seq)), Reason: err.reason}
		}
		out.ToolOutput = v
	}
	return out, nil
}

func metadataOf(w walker, m *wire.Metadata) Metadata {
	out := Metadata{
		Provider:          w.str(m.Provider),
		Model:             w.str(m.Model),
		SessionID:         w.str(m.SessionID),
		ProviderSessionID: w.str(m.ProviderSessionID),
		Usage:             usageOf(m.Usage),
		TotalCostUSD:      clone(m.TotalCostUSD),
		Cost:              m.Cost,
		NumTurns:          clone(m.NumTurns),
		DurationMS:        clone(m.DurationMS),
		DurationAPIMS:     clone(m.DurationAPIMS),
		ErrorClass:        m.ErrorClass,
		StopReason:        w.str(m.StopReason),
	}
	if c := m.Capabilities; c != nil {
		out.Capabilities = &Capabilities{
			Transport:       c.Transport,
			Resumable:       c.Resumable,
			EmitsToolEvents: c.EmitsToolEvents,
			ReportsUsage:    c.ReportsUsage,
			ResumeField:     w.str(c.ResumeField),
		}
	}
	return out
}

func statusOf(w walker, ev *wire.Event) Status {
	s := ev.Status
	out := Status{Seq: ev.Seq, TSNS: ev.TS, State: s.State, Attempt: s.Attempt}
	if e := s.Error; e != nil {
		out.Error = &Error{
			Class:        e.Class,
			Message:      w.str(e.Message),
			Retryable:    e.Retryable,
			ReturnCode:   clone(e.ReturnCode),
			StderrTail:   w.str(e.StderrTail),
			RetryAfterMS: e.RetryAfterMS,
		}
	}
	if sum := s.Summary; sum != nil {
		out.Summary = &Summary{
			Chunks:       sum.Chunks,
			Usage:        usageOf(sum.Usage),
			Cost:         sum.Cost,
			TotalCostUSD: clone(sum.TotalCostUSD),
			DurationMS:   sum.DurationMS,
		}
	}
	return out
}

func usageOf(u *wire.Usage) *Usage {
	if u == nil {
		return nil
	}
	return &Usage{
		InputTokens:      u.InputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens,
		ReasoningTokens:  u.ReasoningTokens,
	}
}

func clone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// fired is the redaction record of counts: the rules that fired, sorted by
// name, a rule named twice summed, none with a count of 0.
func fired(counts []Fired) ([]Fired, error) {
	out := make([]Fired, 0, len(counts))
	for _, f := range counts {
		switch {
		case f.Count < 0:
			return nil, &InputError{Field: "redaction", Reason: fmt.Sprintf("rule %.64q fired %d times", f.Rule, f.Count)}
		case f.Count == 0:
			continue
		case f.Rule == "":
			return nil, &InputError{Field: "redaction", Reason: fmt.Sprintf("a rule with no name fired %d times", f.Count)}
		}
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b Fired) int { return cmp.Compare(a.Rule, b.Rule) })
	merged := out[:0]
	for _, f := range out {
		if n := len(merged); n > 0 && merged[n-1].Rule == f.Rule {
			merged[n-1].Count += f.Count
			continue
		}
		merged = append(merged, f)
	}
	return merged, nil
}
