package trajectory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
)

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Decode reads a stored trajectory strictly. data must be one canonical
// schema v1 document, byte for byte what Build writes for it: an unknown
// field, a field in another case or order, a duplicate key, whitespace,
// a number written another way, a missing required field or trailing bytes
// are all refused. Decode also checks what the schema requires: the
// version, the identity tokens, the chunk types and states, seqs 1 to
// status.seq each held once, the tool hashes and the redaction record.
// An error is a *DecodeError matching ErrMalformed. Decode does no I/O and
// is safe for concurrent use.
func Decode(data []byte) (*Trajectory, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var t Trajectory
	if err := dec.Decode(&t); err != nil {
		return nil, &DecodeError{Reason: err.Error()}
	}
	if err := t.normalise(); err != nil {
		return nil, err
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	canon, err := encode(&t)
	if err != nil {
		return nil, &DecodeError{Reason: err.Error()}
	}
	if !bytes.Equal(canon, data) {
		i := 0
		for i < len(canon) && i < len(data) && canon[i] == data[i] {
			i++
		}
		return nil, &DecodeError{Reason: fmt.Sprintf("not in canonical form: differs from its canonical encoding at byte %d of %d", i, len(data))}
	}
	return &t, nil
}

// normalise turns the JSON numbers of the open trees into the values Build
// writes them from.
func (t *Trajectory) normalise() error {
	plain := walker{}
	if t.Request != nil {
		m, err := plain.object(t.Request)
		if err != nil {
			return &DecodeError{Field: err.path("request"), Reason: err.reason}
		}
		t.Request = m
	}
	for i := range t.Chunks {
		c := &t.Chunks[i]
		if c.ToolInput != nil {
			m, err := plain.object(c.ToolInput)
			if err != nil {
				return &DecodeError{Field: err.path(fmt.Sprintf("chunks[%d].tool_input", i)), Reason: err.reason}
			}
			c.ToolInput = m
		}
		if c.ToolOutput != nil {
			v, err := plain.value(c.ToolOutput)
			if err != nil {
				return &DecodeError{Field: err.path(fmt.Sprintf("chunks[%d].tool_output", i)), Reason: err.reason}
			}
			c.ToolOutput = v
		}
	}
	return nil
}

// check applies the rules of the schema that JSON decoding into the types
// does not.
func (t *Trajectory) check() error {
	bad := func(field, format string, args ...any) error {
		return &DecodeError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if t.SchemaVersion != SchemaVersion {
		return bad("schema_version", "%d, want %d", t.SchemaVersion, SchemaVersion)
	}
	for _, f := range []struct{ name, v string }{{"tenant", t.Tenant}, {"run_id", t.RunID}, {"principal", t.Principal}} {
		if !tokenRE.MatchString(f.v) {
			return bad(f.name, "%.80q is not a token of 1 to 64 of [A-Za-z0-9_-]", f.v)
		}
	}
	if t.Conversation != "" && !tokenRE.MatchString(t.Conversation) {
		return bad("conversation", "%.80q is not a token of 1 to 64 of [A-Za-z0-9_-]", t.Conversation)
	}
	if _, ok := t.Request[toolsField]; ok {
		return bad("request.tools", "tools are described by the top-level tools, never stored in the request")
	}
	for i, tool := range t.Tools {
		if !sha256RE.MatchString(tool.SchemaSHA256) {
			return bad(fmt.Sprintf("tools[%d].schema_sha256", i), "%.80q is not a lowercase hex sha256", tool.SchemaSHA256)
		}
	}
	if t.Chunks == nil {
		return bad("chunks", "required, a list")
	}
	// Every seq from 1 to status.seq is held by exactly one event.
	n := uint64(len(t.Transitions)) + uint64(len(t.Chunks)) + 1
	held := make([]bool, n+1)
	hold := func(field string, seq uint64) error {
		switch {
		case seq < 1 || seq > n:
			return bad(field, "%d is outside 1 to %d (the run's event count)", seq, n)
		case held[seq]:
			return bad(field, "%d is held twice", seq)
		}
		held[seq] = true
		return nil
	}
	for i, s := range t.Transitions {
		field := fmt.Sprintf("transitions[%d]", i)
		if !validState(s.State) || s.State.Terminal() {
			return bad(field+".state", "%.40q is not a non-terminal state", s.State)
		}
		if err := hold(field+".seq", s.Seq); err != nil {
			return err
		}
		if i > 0 && s.Seq < t.Transitions[i-1].Seq {
			return bad(field+".seq", "%d after %d: transitions are in seq order", s.Seq, t.Transitions[i-1].Seq)
		}
	}
	for i, c := range t.Chunks {
		field := fmt.Sprintf("chunks[%d]", i)
		if !c.Type.Valid() {
			return bad(field+".type", "%.40q is not a chunk type", c.Type)
		}
		if err := hold(field+".seq", c.Seq); err != nil {
			return err
		}
		if i > 0 && c.Seq < t.Chunks[i-1].Seq {
			return bad(field+".seq", "%d after %d: chunks are in seq order", c.Seq, t.Chunks[i-1].Seq)
		}
	}
	if !t.Status.State.Terminal() {
		return bad("status.state", "%.40q is not a terminal state", t.Status.State)
	}
	if t.Status.Seq != n {
		return bad("status.seq", "%d, want %d: the terminal status is the run's last event", t.Status.Seq, n)
	}
	if t.Redaction.Rules == nil {
		return bad("redaction.rules", "required, a list")
	}
	for i, f := range t.Redaction.Rules {
		field := fmt.Sprintf("redaction.rules[%d]", i)
		switch {
		case f.Rule == "":
			return bad(field+".rule", "empty")
		case f.Count < 1:
			return bad(field+".count", "%d: a recorded rule fired at least once", f.Count)
		case i > 0 && f.Rule <= t.Redaction.Rules[i-1].Rule:
			return bad(field+".rule", "%.64q after %.64q: rules are sorted and unique", f.Rule, t.Redaction.Rules[i-1].Rule)
		}
	}
	return nil
}
