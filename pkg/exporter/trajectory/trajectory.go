package trajectory

import (
	"bytes"
	_ "embed"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// SchemaVersion is the version of the trajectory schema this package
// writes and reads, the document's schema_version.
const SchemaVersion = 1

//go:embed schema/trajectory-v1.schema.json
var schemaV1 []byte

// Schema returns the JSON Schema document (draft 2020-12) of schema
// version 1. Each call returns a fresh copy, which the caller may keep or
// modify; it is safe for concurrent use.
func Schema() []byte { return bytes.Clone(schemaV1) }

// Trajectory is the Go form of a schema v1 trajectory. Its field order is
// the canonical key order of the document.
type Trajectory struct {
	SchemaVersion int    `json:"schema_version"`
	Tenant        string `json:"tenant"`
	RunID         string `json:"run_id"`
	Principal     string `json:"principal"`
	Profile       string `json:"profile"`
	Adapter       string `json:"adapter,omitempty"`
	Conversation  string `json:"conversation,omitempty"`
	// CreatedMS is the run record's created time, unix milliseconds.
	CreatedMS int64 `json:"created_ms"`
	// EndedMS is the terminal status event's time, unix milliseconds.
	EndedMS int64 `json:"ended_ms"`
	// Pin is the run record's pin, or else the last pin a status carried;
	// nil for a run rejected before it was resolved.
	Pin *Pin `json:"pin,omitempty"`
	// Labels are the run's labels, redacted.
	Labels map[string]string `json:"labels,omitempty"`
	// Request holds the run's request fields, redacted, without tools.
	// Decode gives its numbers as int64, uint64 or float64.
	Request map[string]any `json:"request,omitempty"`
	// Tools describes the request's tools field.
	Tools []Tool `json:"tools,omitempty"`
	// Transitions are the non-terminal status events, in seq order.
	Transitions []Status `json:"transitions,omitempty"`
	// Chunks are the chunk events, in seq order (never nil).
	Chunks []Chunk `json:"chunks"`
	// Status is the terminal status, the run's last event.
	Status Status `json:"status"`
	// Redaction records which rules fired and how often.
	Redaction Redaction `json:"redaction"`
}

// Pin is the durable resolution of the run's profile (docs/contract.md §5).
type Pin struct {
	Provider        string            `json:"provider"`
	Model           string            `json:"model"`
	ProfileHash     string            `json:"profile_hash"`
	RegistryVersion string            `json:"registry_version"`
	Pricing         map[string]string `json:"pricing,omitempty"`
}

// Tool describes one tool of the request: its name (redacted) and the
// sha256, in lowercase hex, of the canonical JSON of its input_schema as
// the request gave it (before redaction). A tool given as a bare name has
// no schema: its hash is that of the JSON null (NoSchemaSHA256).
type Tool struct {
	Name         string `json:"name"`
	SchemaSHA256 string `json:"schema_sha256"`
}

// Status is a status event: a transition or the terminal status. The
// event's pin is not kept (Trajectory.Pin holds the run's).
type Status struct {
	Seq uint64 `json:"seq"`
	// TSNS is the event's time, unix nanoseconds.
	TSNS    int64      `json:"ts_ns"`
	State   wire.State `json:"state"`
	Attempt int        `json:"attempt,omitempty"`
	Error   *Error     `json:"error,omitempty"`
	Summary *Summary   `json:"summary,omitempty"`
}

// Error is a typed error (docs/contract.md §1.5); Message and StderrTail are redacted.
type Error struct {
	Class      wire.Class `json:"class"`
	Message    string     `json:"message"`
	Retryable  bool       `json:"retryable"`
	ReturnCode *int       `json:"returncode,omitempty"`
	StderrTail string     `json:"stderr_tail,omitempty"`
	// RetryAfterMS is the wait the provider asked for (its Retry-After).
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
}

// Summary is the terminal status's accounting: the usage and the exact
// cost of the run.
type Summary struct {
	Chunks int    `json:"chunks"`
	Usage  *Usage `json:"usage,omitempty"`
	// Cost is the exact cost in USD, a decimal string from the pin's
	// pricing (pkg/ledger/cost).
	Cost         string   `json:"cost,omitempty"`
	TotalCostUSD *float64 `json:"total_cost_usd,omitempty"`
	DurationMS   int64    `json:"duration_ms"`
}

// Usage counts tokens by class.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64 `json:"reasoning_tokens,omitempty"`
}

// Chunk is a chunk event with its seq (docs/contract.md §1.1). Every string in it is
// redacted except Type and the closed-set and exact values of Metadata.
type Chunk struct {
	Seq uint64 `json:"seq"`
	// TSNS is the event's time, unix nanoseconds.
	TSNS     int64          `json:"ts_ns"`
	Type     wire.ChunkType `json:"type"`
	Content  string         `json:"content,omitempty"`
	ToolName string         `json:"tool_name,omitempty"`
	ToolID   string         `json:"tool_id,omitempty"`
	// ToolInput and ToolOutput are open trees; Decode gives their numbers
	// as int64, uint64 or float64.
	ToolInput  map[string]any `json:"tool_input,omitempty"`
	ToolOutput any            `json:"tool_output,omitempty"`
	IsError    bool           `json:"is_error"`
	IsDelta    bool           `json:"is_delta"`
	Metadata   Metadata       `json:"metadata"`
}

// Metadata is the closed metadata key set of docs/contract.md §1.2. Provider, Model,
// SessionID, ProviderSessionID, StopReason and Capabilities.ResumeField are
// redacted; ErrorClass, Capabilities.Transport and Cost are not.
type Metadata struct {
	Provider          string        `json:"provider,omitempty"`
	Model             string        `json:"model,omitempty"`
	SessionID         string        `json:"session_id,omitempty"`
	ProviderSessionID string        `json:"provider_session_id,omitempty"`
	Capabilities      *Capabilities `json:"capabilities,omitempty"`
	Usage             *Usage        `json:"usage,omitempty"`
	TotalCostUSD      *float64      `json:"total_cost_usd,omitempty"`
	Cost              string        `json:"cost,omitempty"`
	NumTurns          *int          `json:"num_turns,omitempty"`
	DurationMS        *int64        `json:"duration_ms,omitempty"`
	DurationAPIMS     *int64        `json:"duration_api_ms,omitempty"`
	ErrorClass        wire.Class    `json:"error_class,omitempty"`
	StopReason        string        `json:"stop_reason,omitempty"`
}

// Capabilities is an adapter's capability declaration.
type Capabilities struct {
	Transport       wire.Transport `json:"transport"`
	Resumable       bool           `json:"resumable"`
	EmitsToolEvents bool           `json:"emits_tool_events"`
	ReportsUsage    bool           `json:"reports_usage"`
	ResumeField     string         `json:"resume_field,omitempty"`
}

// Redaction is the redaction record: which rules fired and how often,
// sorted by rule name, never what they removed. Rules is never nil.
type Redaction struct {
	Rules []Fired `json:"rules"`
}

// Fired says that the rule named Rule fired Count times.
type Fired struct {
	Rule  string `json:"rule"`
	Count int    `json:"count"`
}

// Redactor is what Build needs of the redaction engine: one redaction
// session, used for one trajectory (pkg/exporter/redact's *Session).
type Redactor interface {
	// String returns a redacted copy of s and counts the rules that fired.
	String(s string) string
	// Counts returns how often each rule fired in this session so far.
	Counts() []Fired
}
