package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The append encoders below write a Chunk, and the event that carries a
// batch of them, straight into a byte slice, for the chunk path, where
// reflection was most of a chunk's cost. They write exactly the bytes
// Marshal writes for the same value (a map of the non-empty fields in
// struct order, compact integers, the shortest string header;
// TestAppendChunkSameAsMarshal holds them to it), so what decodes one
// decodes the other. Only a tool's input and output, free-form values,
// go through the reflective encoder.

// AppendChunk appends c's msgpack encoding, the same bytes Marshal(c)
// gives, to dst. It fails only on a ToolInput or ToolOutput the
// reflective encoder refuses; dst is then returned as it was.
func AppendChunk(dst []byte, c *Chunk) ([]byte, error) {
	output, plain := emptyOutput(c.ToolOutput)
	if !plain {
		// A value of a type JSON does not decode to: the reflective
		// encoder decides whether it is empty, and writes the chunk.
		return appendValue(dst, c)
	}
	start := len(dst)
	n := 4 // type, is_error, is_delta and metadata are always there
	if c.Content != "" {
		n++
	}
	if c.ToolName != "" {
		n++
	}
	if c.ToolID != "" {
		n++
	}
	if len(c.ToolInput) > 0 {
		n++
	}
	if !output {
		n++
	}
	dst = appendMapHeader(dst, n)
	dst = appendKeyStr(dst, "type", string(c.Type))
	if c.Content != "" {
		dst = appendKeyStr(dst, "content", c.Content)
	}
	if c.ToolName != "" {
		dst = appendKeyStr(dst, "tool_name", c.ToolName)
	}
	if c.ToolID != "" {
		dst = appendKeyStr(dst, "tool_id", c.ToolID)
	}
	var err error
	if len(c.ToolInput) > 0 {
		dst = appendStr(dst, "tool_input")
		if dst, err = appendValue(dst, c.ToolInput); err != nil {
			return dst[:start], err
		}
	}
	if !output {
		dst = appendStr(dst, "tool_output")
		if dst, err = appendValue(dst, c.ToolOutput); err != nil {
			return dst[:start], err
		}
	}
	dst = appendBool(appendStr(dst, "is_error"), c.IsError)
	dst = appendBool(appendStr(dst, "is_delta"), c.IsDelta)
	dst = appendMetadata(appendStr(dst, "metadata"), &c.Metadata)
	return dst, nil
}

func appendMetadata(dst []byte, m *Metadata) []byte {
	n := 0
	for _, present := range [...]bool{
		m.Provider != "", m.Model != "", m.SessionID != "", m.ProviderSessionID != "",
		m.Capabilities != nil, m.Usage != nil, m.TotalCostUSD != nil, m.Cost != "",
		m.NumTurns != nil, m.DurationMS != nil, m.DurationAPIMS != nil, m.ErrorClass != "", m.StopReason != "",
	} {
		if present {
			n++
		}
	}
	dst = appendMapHeader(dst, n)
	if n == 0 {
		return dst
	}
	if m.Provider != "" {
		dst = appendKeyStr(dst, "provider", m.Provider)
	}
	if m.Model != "" {
		dst = appendKeyStr(dst, "model", m.Model)
	}
	if m.SessionID != "" {
		dst = appendKeyStr(dst, "session_id", m.SessionID)
	}
	if m.ProviderSessionID != "" {
		dst = appendKeyStr(dst, "provider_session_id", m.ProviderSessionID)
	}
	if c := m.Capabilities; c != nil {
		dst = appendStr(dst, "capabilities")
		k := 4
		if c.ResumeField != "" {
			k++
		}
		dst = appendMapHeader(dst, k)
		dst = appendKeyStr(dst, "transport", string(c.Transport))
		dst = appendBool(appendStr(dst, "resumable"), c.Resumable)
		dst = appendBool(appendStr(dst, "emits_tool_events"), c.EmitsToolEvents)
		dst = appendBool(appendStr(dst, "reports_usage"), c.ReportsUsage)
		if c.ResumeField != "" {
			dst = appendKeyStr(dst, "resume_field", c.ResumeField)
		}
	}
	if m.Usage != nil {
		dst = appendUsage(appendStr(dst, "usage"), m.Usage)
	}
	if m.TotalCostUSD != nil {
		dst = appendStr(dst, "total_cost_usd")
		dst = append(dst, 0xcb)
		dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(*m.TotalCostUSD))
	}
	if m.Cost != "" {
		dst = appendKeyStr(dst, "cost", m.Cost)
	}
	if m.NumTurns != nil {
		dst = appendInt(appendStr(dst, "num_turns"), int64(*m.NumTurns))
	}
	if m.DurationMS != nil {
		dst = appendInt(appendStr(dst, "duration_ms"), *m.DurationMS)
	}
	if m.DurationAPIMS != nil {
		dst = appendInt(appendStr(dst, "duration_api_ms"), *m.DurationAPIMS)
	}
	if m.ErrorClass != "" {
		dst = appendKeyStr(dst, "error_class", string(m.ErrorClass))
	}
	if m.StopReason != "" {
		dst = appendKeyStr(dst, "stop_reason", m.StopReason)
	}
	return dst
}

// emptyOutput reports whether a tool's output is left out of its chunk,
// as the reflective encoder's omitempty leaves out an interface holding
// nil or an empty value, for the types a decoded JSON or msgpack value
// has; plain is false for any other type.
func emptyOutput(v any) (empty, plain bool) {
	switch v := v.(type) {
	case nil:
		return true, true
	case string:
		return v == "", true
	case bool:
		return !v, true
	case float64:
		return v == 0, true
	case int64:
		return v == 0, true
	case uint64:
		return v == 0, true
	case int:
		return v == 0, true
	case []any:
		return len(v) == 0, true
	case map[string]any:
		return len(v) == 0, true
	}
	return false, false
}

// appendValue appends v as Marshal encodes it (sorted map keys, compact
// integers), through the reflective encoder.
func appendValue(dst []byte, v any) ([]byte, error) {
	e := encPool.Get().(*encoder)
	defer encPool.Put(e)
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return dst, fmt.Errorf("encode %T: %w", v, err)
	}
	return append(dst, e.buf.Bytes()...), nil
}

// appendEventHead appends the fields every event starts with, v, run_id,
// seq, ts and kind, after the header of a map of n fields in all; v is
// the event's version (VersionOf).
func appendEventHead(dst []byte, n, v int, runID string, seq uint64, ts int64, kind EventKind) []byte {
	dst = appendMapHeader(dst, n)
	dst = appendInt(appendStr(dst, "v"), int64(v))
	dst = appendKeyStr(dst, "run_id", runID)
	dst = appendUint(appendStr(dst, "seq"), seq)
	dst = appendInt(appendStr(dst, "ts"), ts)
	return appendKeyStr(dst, "kind", string(kind))
}

func appendKeyStr(dst []byte, k, v string) []byte { return appendStr(appendStr(dst, k), v) }

// appendStr appends s with the shortest msgpack string header.
func appendStr(dst []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n < 256:
		dst = append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, 0xda)
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	default:
		dst = append(dst, 0xdb)
		dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	}
	return append(dst, s...)
}

func appendMapHeader(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdf), uint32(n))
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 0xc3)
	}
	return append(dst, 0xc2)
}

// appendUint appends n in the fewest bytes, as the compact-int encoder does.
func appendUint(dst []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(dst, byte(n))
	case n <= math.MaxUint8:
		return append(dst, 0xcc, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), n)
}

// appendInt appends n in the fewest bytes, as the compact-int encoder does.
func appendInt(dst []byte, n int64) []byte {
	switch {
	case n >= 0:
		return appendUint(dst, uint64(n))
	case n >= -32:
		return append(dst, byte(n))
	case n >= math.MinInt8:
		return append(dst, 0xd0, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(dst, 0xd1), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(dst, 0xd2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(n))
}

// appendUsage appends u as the reflective encoder writes a Usage: the
// input and output counts always, the other classes when not zero.
func appendUsage(dst []byte, u *Usage) []byte {
	k := 2
	for _, v := range [...]int64{u.CacheReadTokens, u.CacheWriteTokens, u.ReasoningTokens} {
		if v != 0 {
			k++
		}
	}
	dst = appendMapHeader(dst, k)
	dst = appendInt(appendStr(dst, "input_tokens"), u.InputTokens)
	dst = appendInt(appendStr(dst, "output_tokens"), u.OutputTokens)
	if u.CacheReadTokens != 0 {
		dst = appendInt(appendStr(dst, "cache_read_tokens"), u.CacheReadTokens)
	}
	if u.CacheWriteTokens != 0 {
		dst = appendInt(appendStr(dst, "cache_write_tokens"), u.CacheWriteTokens)
	}
	if u.ReasoningTokens != 0 {
		dst = appendInt(appendStr(dst, "reasoning_tokens"), u.ReasoningTokens)
	}
	return dst
}
