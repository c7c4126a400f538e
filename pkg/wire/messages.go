package wire

import (
	"iter"

	"github.com/vmihailenco/msgpack/v5"
)

// Version is the schema version every message carries in its field v: the
// version a message is written in when it uses only the fields of contract
// v1, which every reader understands (docs/contract.md §3.9).
const Version = 1

// MaxVersion is the newest contract version this build reads and writes.
// Version 2 adds a RunRequest's and a Work's workspace, a Status's
// artifacts and sandbox, and the batch kinds of events (KindChunks,
// KindStatuses, BatchVersion). Version 3 adds the chunk types of sessions
// (input, turn_end, plan, permission_requested, permission_resolved) and
// the session control messages. A message is written in the lowest
// version whose fields it uses (VersionOf), and a submitter's RunRequest.V
// is the newest version it reads: a run's events never use a field or a
// chunk type above it.
const MaxVersion = 3

// BatchVersion is the contract version of the batch kinds of events,
// KindChunks and KindStatuses: a batch is written in it at least
// (VersionOf), and a run's events are batched only for a submitter that
// reads it (RunRequest.V, copied onto the Work). A v1 follower gets one
// chunk and one status per event (docs/contract.md §3.9). Batches were
// written as v1 before this rule, so a reader still accepts a batch
// stamped v1.
const BatchVersion = 2

// ChunkType is the type of a Chunk.
type ChunkType string

// The chunk types of docs/contract.md §1.1.
const (
	ChunkSystem     ChunkType = "system"
	ChunkThinking   ChunkType = "thinking"
	ChunkText       ChunkType = "text"
	ChunkToolUse    ChunkType = "tool_use"
	ChunkToolResult ChunkType = "tool_result"
	ChunkResult     ChunkType = "result"
	ChunkError      ChunkType = "error"

	// The chunk types of a session (contract v3, docs/contract.md §6.1),
	// written only in the runs of a submitter that reads v3.

	// ChunkInput is a follow-up prompt the session took as its next turn:
	// content is the prompt, metadata.num_turns the turn's number (2 for
	// the first follow-up).
	ChunkInput ChunkType = "input"
	// ChunkTurnEnd closes a turn: metadata.num_turns is its number,
	// stop_reason why it ended (end_turn, cancelled, max_tokens, ...),
	// usage the turn's tokens and cost their price.
	ChunkTurnEnd ChunkType = "turn_end"
	// ChunkPlan is the agent's plan, whole each time it changes:
	// tool_output is its entries, [{content, priority, status}].
	ChunkPlan ChunkType = "plan"
	// ChunkPermissionRequested is the agent asking to run a tool: tool_id
	// is the request's id, the one an answer names; tool_name the tool
	// call's title; tool_input {tool_call_id, kind, options: [{option_id,
	// name, kind}]}.
	ChunkPermissionRequested ChunkType = "permission_requested"
	// ChunkPermissionResolved is the answer the agent got: tool_id the
	// request's id, content the option chosen ("" when none was: the turn
	// was cancelled), tool_output {outcome: allowed|denied|cancelled, by:
	// client|policy|timeout}; metadata.error_class is PermissionTimeout
	// when nobody answered in time.
	ChunkPermissionResolved ChunkType = "permission_resolved"
)

// Valid reports whether t is one of the chunk types of any contract
// version this build reads.
func (t ChunkType) Valid() bool { return t.Version() > 0 }

// Version is the contract version that introduced t, 0 for an unknown
// type.
func (t ChunkType) Version() int {
	switch t {
	case ChunkSystem, ChunkThinking, ChunkText, ChunkToolUse, ChunkToolResult, ChunkResult, ChunkError:
		return 1
	case ChunkInput, ChunkTurnEnd, ChunkPlan, ChunkPermissionRequested, ChunkPermissionResolved:
		return 3
	}
	return 0
}

// Chunk is the only public stream item. An empty Content, ToolName or ToolID
// is the contract's nil.
type Chunk struct {
	Type       ChunkType      `msgpack:"type" json:"type"`
	Content    string         `msgpack:"content,omitempty" json:"content,omitempty"`
	ToolName   string         `msgpack:"tool_name,omitempty" json:"tool_name,omitempty"`
	ToolID     string         `msgpack:"tool_id,omitempty" json:"tool_id,omitempty"`
	ToolInput  map[string]any `msgpack:"tool_input,omitempty" json:"tool_input,omitempty"`
	ToolOutput any            `msgpack:"tool_output,omitempty" json:"tool_output,omitempty"`
	IsError    bool           `msgpack:"is_error" json:"is_error"`
	IsDelta    bool           `msgpack:"is_delta" json:"is_delta"`
	Metadata   Metadata       `msgpack:"metadata" json:"metadata"`
}

// Metadata is the closed metadata key set of docs/contract.md §1.2. Being a struct, it
// cannot carry any other key, and strict decoding refuses one.
type Metadata struct {
	Provider          string        `msgpack:"provider,omitempty" json:"provider,omitempty"`
	Model             string        `msgpack:"model,omitempty" json:"model,omitempty"`
	SessionID         string        `msgpack:"session_id,omitempty" json:"session_id,omitempty"`
	ProviderSessionID string        `msgpack:"provider_session_id,omitempty" json:"provider_session_id,omitempty"`
	Capabilities      *Capabilities `msgpack:"capabilities,omitempty" json:"capabilities,omitempty"`
	Usage             *Usage        `msgpack:"usage,omitempty" json:"usage,omitempty"`
	TotalCostUSD      *float64      `msgpack:"total_cost_usd,omitempty" json:"total_cost_usd,omitempty"`
	Cost              string        `msgpack:"cost,omitempty" json:"cost,omitempty"`
	NumTurns          *int          `msgpack:"num_turns,omitempty" json:"num_turns,omitempty"`
	DurationMS        *int64        `msgpack:"duration_ms,omitempty" json:"duration_ms,omitempty"`
	DurationAPIMS     *int64        `msgpack:"duration_api_ms,omitempty" json:"duration_api_ms,omitempty"`
	ErrorClass        Class         `msgpack:"error_class,omitempty" json:"error_class,omitempty"`
	StopReason        string        `msgpack:"stop_reason,omitempty" json:"stop_reason,omitempty"`
}

// Usage counts tokens by class.
type Usage struct {
	InputTokens      int64 `msgpack:"input_tokens" json:"input_tokens"`
	OutputTokens     int64 `msgpack:"output_tokens" json:"output_tokens"`
	CacheReadTokens  int64 `msgpack:"cache_read_tokens,omitempty" json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `msgpack:"cache_write_tokens,omitempty" json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64 `msgpack:"reasoning_tokens,omitempty" json:"reasoning_tokens,omitempty"`
}

// Transport says how an adapter reaches its provider.
type Transport string

// The transports of docs/contract.md §1.4.
const (
	TransportSubprocess Transport = "subprocess"
	TransportInProcess  Transport = "in_process"
	TransportRemote     Transport = "remote"
)

// Valid reports whether t is one of the three transports.
func (t Transport) Valid() bool {
	return t == TransportSubprocess || t == TransportInProcess || t == TransportRemote
}

// Capabilities is an adapter's immutable capability declaration.
type Capabilities struct {
	Transport       Transport `msgpack:"transport" json:"transport"`
	Resumable       bool      `msgpack:"resumable" json:"resumable"`
	EmitsToolEvents bool      `msgpack:"emits_tool_events" json:"emits_tool_events"`
	ReportsUsage    bool      `msgpack:"reports_usage" json:"reports_usage"`
	ResumeField     string    `msgpack:"resume_field,omitempty" json:"resume_field,omitempty"`
}

// State is a run state.
type State string

// The run states of docs/contract.md §1.6.
const (
	StateAccepted  State = "accepted"
	StateRouted    State = "routed"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
	StateTimedOut  State = "timed_out"
	StateRejected  State = "rejected"
)

// Terminal reports whether s ends a run.
func (s State) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateCancelled, StateTimedOut, StateRejected:
		return true
	}
	return false
}

// Headers on a run's event messages naming who wrote the event: a runner
// stamps every event of its attempt with its id, the epoch of its lease
// (Lease.Epoch) and the attempt's number, so a run's last stored message
// says which runner holds the run and in which attempt, with no write of
// its own. The router's, a cancel's and the sweeper's events carry none.
const (
	RunnerHeader  = "Agentmesh-Runner"
	EpochHeader   = "Agentmesh-Epoch"
	AttemptHeader = "Agentmesh-Attempt"
)

// EventKind says which of Event.Status, Event.Chunk, Event.Chunks and
// Event.Statuses is set.
type EventKind string

// The event kinds.
const (
	KindStatus EventKind = "status"
	KindChunk  EventKind = "chunk"
	// KindChunks is a run of consecutive chunks in one message, seqs Seq
	// to Last; Expand turns it into one KindChunk event per seq.
	KindChunks EventKind = "chunks"
	// KindStatuses is a run of consecutive non-terminal statuses in one
	// message, seqs Seq to Last (a router's accepted and routed, published
	// at once); Expand turns it into one KindStatus event per seq.
	KindStatuses EventKind = "statuses"
)

// Event is one item of a run's event stream on
// agentmesh.events.<tenant>.<run_id>, with a gapless 1-based Seq.
//
// A KindChunks event carries the chunks of seqs Seq through Last, in
// order, in Chunks (one or more, never a status), all stamped with the
// one TS. A KindStatuses event carries, the same way, two or more
// non-terminal statuses in Statuses. Decode refuses a batch whose Last and
// items disagree, and an event of another kind that sets Last, Chunks or
// Statuses. Readers that want one item per event range over Expand.
type Event struct {
	V      int       `msgpack:"v" json:"v"`
	RunID  string    `msgpack:"run_id" json:"run_id"`
	Seq    uint64    `msgpack:"seq" json:"seq"`
	TS     int64     `msgpack:"ts" json:"ts"`
	Kind   EventKind `msgpack:"kind" json:"kind"`
	Status *Status   `msgpack:"status,omitempty" json:"status,omitempty"`
	Chunk  *Chunk    `msgpack:"chunk,omitempty" json:"chunk,omitempty"`
	// Last is the seq of a KindChunks event's last chunk; 0 otherwise.
	Last uint64 `msgpack:"last,omitempty" json:"last,omitempty"`
	// Chunks are a KindChunks event's chunks, of seqs Seq to Last.
	Chunks []Chunk `msgpack:"chunks,omitempty" json:"chunks,omitempty"`
	// Statuses are a KindStatuses event's statuses, of seqs Seq to Last.
	Statuses []Status `msgpack:"statuses,omitempty" json:"statuses,omitempty"`
}

// Terminal reports whether e is a terminal status.
func (e *Event) Terminal() bool {
	return e.Kind == KindStatus && e.Status != nil && e.Status.State.Terminal()
}

// LastSeq is the seq of e's last item: Last for a batch (KindChunks,
// KindStatuses), Seq for any other event.
func (e *Event) LastSeq() uint64 {
	if e.Kind == KindChunks || e.Kind == KindStatuses {
		return e.Last
	}
	return e.Seq
}

// Expand yields the single events e stands for, in seq order: for a
// KindChunks event one KindChunk event per chunk, seq Seq to Last, each
// with e's RunID and TS, a Chunk pointing into e.Chunks and the version
// it would be written in alone (VersionOf: a v1 chunk's event is v1, as a
// v1 writer writes it); for a KindStatuses event likewise one KindStatus
// event per status; for any other event, e itself. It does not modify e.
func (e *Event) Expand() iter.Seq[Event] {
	return func(yield func(Event) bool) {
		switch e.Kind {
		case KindChunks:
		case KindStatuses:
			for i := range e.Statuses {
				ev := Event{RunID: e.RunID, Seq: e.Seq + uint64(i), TS: e.TS, Kind: KindStatus, Status: &e.Statuses[i]}
				if ev.V = VersionOf(&ev); !yield(ev) {
					return
				}
			}
			return
		default:
			yield(*e)
			return
		}
		for i := range e.Chunks {
			ev := Event{RunID: e.RunID, Seq: e.Seq + uint64(i), TS: e.TS, Kind: KindChunk, Chunk: &e.Chunks[i]}
			if ev.V = VersionOf(&ev); !yield(ev) {
				return
			}
		}
	}
}

// Status is a run state transition.
type Status struct {
	State State `msgpack:"state" json:"state"`
	// Profile is the resolved profile a routed or a runner's terminal
	// status names: after a fallback, the profile that actually ran
	// (docs/contract.md §4.13).
	Profile string   `msgpack:"profile,omitempty" json:"profile,omitempty"`
	Pin     *Pin     `msgpack:"pin,omitempty" json:"pin,omitempty"`
	Error   *Error   `msgpack:"error,omitempty" json:"error,omitempty"`
	Attempt int      `msgpack:"attempt,omitempty" json:"attempt,omitempty"`
	Summary *Summary `msgpack:"summary,omitempty" json:"summary,omitempty"`
	// Artifacts is a terminal status's: the content-addressed results of a
	// run that had a workspace source, what the agent changed (contract v2).
	Artifacts *Artifacts `msgpack:"artifacts,omitempty" json:"artifacts,omitempty"`
	// Sandbox is SandboxOff on a runner's statuses of a run its CLI ran
	// outside the sandbox, because the operator turned it off (contract v2).
	Sandbox string `msgpack:"sandbox,omitempty" json:"sandbox,omitempty"`
}

// SandboxOff is Status.Sandbox for a run whose CLI ran unsandboxed
// (the operator turned the sandbox off).
const SandboxOff = "off"

// Artifacts names a run's results in the agentmesh_artifacts object store.
type Artifacts struct {
	// Patch is a git-format patch of what the agent changed, against the
	// run's workspace source.
	Patch *ArtifactRef `msgpack:"patch,omitempty" json:"patch,omitempty"`
	// Archive is a bounded archive (tar, gzip) of the files the agent added
	// or changed, as they were when the run ended.
	Archive *ArtifactRef `msgpack:"archive,omitempty" json:"archive,omitempty"`
}

// ArtifactRef is one stored artifact: its object name, the SHA-256 of its
// bytes (lower-case hex) and their length.
type ArtifactRef struct {
	Name   string `msgpack:"name" json:"name"`
	SHA256 string `msgpack:"sha256" json:"sha256"`
	Size   int64  `msgpack:"size" json:"size"`
}

// WorkspaceSource is where a run's workspace comes from (contract v2):
// exactly one of Git, Snapshot and FromRun.
type WorkspaceSource struct {
	Git *GitSource `msgpack:"git,omitempty" json:"git,omitempty"`
	// Snapshot is the content address, "sha256:<64 hex>", of a workspace
	// snapshot the client pushed (agentmesh workspace push).
	Snapshot string `msgpack:"snapshot,omitempty" json:"snapshot,omitempty"`
	// FromRun is a run of the same tenant whose workspace this run
	// starts from, as that run left it, whatever its end (failed,
	// cancelled, timed out): its source with its patch applied. A run of
	// a conversation naming it starts there instead of at the
	// conversation's head (agentmesh run --from-run).
	FromRun string `msgpack:"from_run,omitempty" json:"from_run,omitempty"`
}

// GitSource is a git remote, from the operator's allow-list, and a branch
// or tag of it (empty: the remote's HEAD), cloned shallow.
type GitSource struct {
	URL string `msgpack:"url" json:"url"`
	Ref string `msgpack:"ref,omitempty" json:"ref,omitempty"`
}

// Summary is carried by a terminal status.
type Summary struct {
	Chunks       int      `msgpack:"chunks" json:"chunks"`
	Usage        *Usage   `msgpack:"usage,omitempty" json:"usage,omitempty"`
	Cost         string   `msgpack:"cost,omitempty" json:"cost,omitempty"`
	TotalCostUSD *float64 `msgpack:"total_cost_usd,omitempty" json:"total_cost_usd,omitempty"`
	DurationMS   int64    `msgpack:"duration_ms" json:"duration_ms"`
}

// Pin is the durable resolution of a profile (docs/contract.md §5).
type Pin struct {
	Provider        string            `msgpack:"provider" json:"provider"`
	Model           string            `msgpack:"model" json:"model"`
	ProfileHash     string            `msgpack:"profile_hash" json:"profile_hash"`
	RegistryVersion string            `msgpack:"registry_version" json:"registry_version"`
	Pricing         map[string]string `msgpack:"pricing,omitempty" json:"pricing,omitempty"`
}

// RunRequest is what a client publishes on agentmesh.submit.<tenant>, with
// header Nats-Msg-Id set to RunID.
type RunRequest struct {
	V            int                `msgpack:"v" json:"v"`
	RunID        string             `msgpack:"run_id" json:"run_id"`
	Tenant       string             `msgpack:"tenant" json:"tenant"`
	Principal    string             `msgpack:"principal" json:"principal"`
	Profile      string             `msgpack:"profile" json:"profile"`
	Request      msgpack.RawMessage `msgpack:"request,omitempty" json:"-"`
	Runtime      map[string]any     `msgpack:"runtime,omitempty" json:"runtime,omitempty"`
	Conversation string             `msgpack:"conversation,omitempty" json:"conversation,omitempty"`
	DeadlineMS   int64              `msgpack:"deadline_ms,omitempty" json:"deadline_ms,omitempty"`
	Labels       map[string]string  `msgpack:"labels,omitempty" json:"labels,omitempty"`
	// Workspace is the run's workspace source (contract v2); a run with
	// one gets its results as artifacts.
	Workspace *WorkspaceSource `msgpack:"workspace,omitempty" json:"workspace,omitempty"`
}

// AttemptPolicy bounds the attempts of one run.
type AttemptPolicy struct {
	MaxAttempts int `msgpack:"max_attempts" json:"max_attempts"`
	// StallAfterMS ends a run whose adapter has yielded nothing for that
	// long with ProviderStallError (the profile's policy.stall_after);
	// 0 means no stall detection.
	StallAfterMS int64 `msgpack:"stall_after_ms,omitempty" json:"stall_after_ms,omitempty"`
}

// DefaultMaxAttempts is the contract's default attempt count (docs/contract.md §4.5).
const DefaultMaxAttempts = 3

// Work is the dispatched, validated run on agentmesh.work.<transport>.<adapter>.
type Work struct {
	V            int                `msgpack:"v"`
	RunID        string             `msgpack:"run_id"`
	Tenant       string             `msgpack:"tenant"`
	Principal    string             `msgpack:"principal"`
	Adapter      string             `msgpack:"adapter"`
	Profile      string             `msgpack:"profile,omitempty"` // the resolved profile, whose adapter settings run the work
	Request      msgpack.RawMessage `msgpack:"request,omitempty"`
	Runtime      map[string]any     `msgpack:"runtime,omitempty"`
	Pin          Pin                `msgpack:"pin"`
	Conversation string             `msgpack:"conversation,omitempty"`
	SessionID    string             `msgpack:"session_id,omitempty"`
	Deadline     int64              `msgpack:"deadline"` // unix ms; 0 means none
	Policy       AttemptPolicy      `msgpack:"policy"`
	// Handoff is the run as the router left it when it dispatched the
	// work, so that the first delivery's runner claims it without reading
	// the record or the events. Work without one (or a redelivery) is
	// claimed from what the record and the events say.
	Handoff *Handoff `msgpack:"handoff,omitempty"`
	// Fallback is what is left of the profile's policy.fallback, each
	// resolved by the router: the profiles the run moves to, in order,
	// when it fails before its first chunk in a way a fallback may mend
	// (docs/contract.md §4.13). Empty for a conversation with a checkpoint.
	Fallback []Fallback `msgpack:"fallback,omitempty"`
	// Workspace is the RunRequest's (contract v2).
	Workspace *WorkspaceSource `msgpack:"workspace,omitempty"`
}

// Fallback is one profile a run may move to, resolved as the router
// resolves a run's profile.
type Fallback struct {
	Profile   string        `msgpack:"profile"`
	Adapter   string        `msgpack:"adapter"`
	Transport Transport     `msgpack:"transport"`
	Pin       Pin           `msgpack:"pin"`
	Policy    AttemptPolicy `msgpack:"policy"`
}

// Handoff is what a router knew of a run when it dispatched its work.
type Handoff struct {
	// Record is the run's record at revision Rev, as the router wrote it.
	Record RunRecord `msgpack:"record"`
	Rev    uint64    `msgpack:"rev"`
	// Seq is the seq of the run's last event (its routed status), stored
	// at stream sequence StreamSeq of the events stream.
	Seq       uint64 `msgpack:"seq"`
	StreamSeq uint64 `msgpack:"stream_seq"`
}

// RunRecord is the run's entry in the agentmesh_runs bucket under
// <tenant>.<run_id>.
type RunRecord struct {
	V             int    `msgpack:"v" json:"v"`
	RunID         string `msgpack:"run_id" json:"run_id"`
	Tenant        string `msgpack:"tenant" json:"tenant"`
	Principal     string `msgpack:"principal" json:"principal"`
	Profile       string `msgpack:"profile" json:"profile"`
	Adapter       string `msgpack:"adapter,omitempty" json:"adapter,omitempty"`
	Conversation  string `msgpack:"conversation,omitempty" json:"conversation,omitempty"`
	RequestDigest string `msgpack:"request_digest" json:"request_digest"`
	Pin           *Pin   `msgpack:"pin,omitempty" json:"pin,omitempty"`
	State         State  `msgpack:"state" json:"state"`
	// Owner is the runner that holds the run while it is running.
	Owner string `msgpack:"owner,omitempty" json:"owner,omitempty"`
	// Committed says the run had output (it passed the first-output
	// boundary), so it is never executed again (docs/contract.md §4.5).
	Committed bool  `msgpack:"committed,omitempty" json:"committed,omitempty"`
	Attempt   int   `msgpack:"attempt,omitempty" json:"attempt,omitempty"`
	Deadline  int64 `msgpack:"deadline,omitempty" json:"deadline,omitempty"`
	// Consent is the export decision stamped when the router accepted the
	// run: the operator enabled export AND the principal had granted it.
	Consent bool `msgpack:"consent" json:"consent"`
	// ConsentRev is the revision of the principal's consent entry that
	// granted it; a withdrawal after it expires the run's export.
	ConsentRev uint64 `msgpack:"consent_rev,omitempty" json:"consent_rev,omitempty"`
	// Request and Labels are kept for a consented run only: its
	// trajectory is built from them (and redacted) once it ends.
	Request msgpack.RawMessage `msgpack:"request,omitempty" json:"-"`
	Labels  map[string]string  `msgpack:"labels,omitempty" json:"labels,omitempty"`
	Error   *Error             `msgpack:"error,omitempty" json:"error,omitempty"`
	// Usage and Cost are the terminal status's summary (its tokens by
	// class and the exact cost from the pin's pricing), copied onto the
	// record when the run ends; absent before, or when the run used none.
	Usage   *Usage `msgpack:"usage,omitempty" json:"usage,omitempty"`
	Cost    string `msgpack:"cost,omitempty" json:"cost,omitempty"`
	Created int64  `msgpack:"created" json:"created"`
	Updated int64  `msgpack:"updated" json:"updated"`
}

// Lease is an entry in agentmesh_leases, kept alive by its owner's
// heartbeat: a runner's, key runner.<id>, for every run it holds (RunID
// and Tenant empty).
type Lease struct {
	V      int    `msgpack:"v"`
	RunID  string `msgpack:"run_id"`
	Tenant string `msgpack:"tenant"`
	Owner  string `msgpack:"owner"`
	// Epoch is a runner lease's: it changes each time the runner takes
	// its lease anew, and the runner's events carry it, so a run held
	// under an earlier lease of the same runner is told apart.
	Epoch string `msgpack:"epoch,omitempty"`
}

// CancelReply answers a request on agentmesh.control.<tenant>.<run_id>.cancel.
type CancelReply struct {
	V     int    `msgpack:"v" json:"v"`
	RunID string `msgpack:"run_id" json:"run_id"`
	// State is the run's state after the request was handled.
	State State `msgpack:"state,omitempty" json:"state,omitempty"`
	// Cancelled is true when this request ended the run.
	Cancelled bool `msgpack:"cancelled" json:"cancelled"`
	// Ended is true when the run had already ended before the request.
	Ended bool   `msgpack:"ended" json:"ended"`
	Error *Error `msgpack:"error,omitempty" json:"error,omitempty"`
}

// Input is a request on agentmesh.control.<tenant>.<run_id>.input (contract
// v3): a follow-up prompt for a session, or an interrupt of its turn in
// progress. The control responder forwards it to the session's runner
// with RunKey set.
type Input struct {
	V     int    `msgpack:"v" json:"v"`
	RunID string `msgpack:"run_id" json:"run_id"`
	// Prompt is the next turn's prompt; empty with Interrupt.
	Prompt string `msgpack:"prompt,omitempty" json:"prompt,omitempty"`
	// Interrupt cancels the turn in progress (ACP's session/cancel): the
	// session stays live and takes the next prompt.
	Interrupt bool `msgpack:"interrupt,omitempty" json:"interrupt,omitempty"`
	// RunKey is <tenant>.<run_id>, set by the control responder only.
	RunKey string `msgpack:"run_key,omitempty" json:"-"`
}

// InputReply answers an Input.
type InputReply struct {
	V     int    `msgpack:"v" json:"v"`
	RunID string `msgpack:"run_id" json:"run_id"`
	// Turn is the turn the prompt was queued as (2 for the first
	// follow-up); 0 for an interrupt.
	Turn int `msgpack:"turn" json:"turn"`
	// Queued is the number of prompts ahead of this one.
	Queued int    `msgpack:"queued" json:"queued"`
	Error  *Error `msgpack:"error,omitempty" json:"error,omitempty"`
}

// PermissionAnswer is a request on
// agentmesh.control.<tenant>.<run_id>.permission (contract v3): the answer
// to one of a session's permission requests.
type PermissionAnswer struct {
	V         int    `msgpack:"v" json:"v"`
	RunID     string `msgpack:"run_id" json:"run_id"`
	RequestID string `msgpack:"request_id" json:"request_id"`
	// Allow picks the request's first allowing option (allow_once before
	// allow_always), false its first rejecting one; OptionID, when set,
	// names the option itself and must agree with Allow.
	Allow    bool   `msgpack:"allow" json:"allow"`
	OptionID string `msgpack:"option_id,omitempty" json:"option_id,omitempty"`
	RunKey   string `msgpack:"run_key,omitempty" json:"-"`
}

// PermissionReply answers a PermissionAnswer: the option the agent got.
type PermissionReply struct {
	V         int    `msgpack:"v" json:"v"`
	RunID     string `msgpack:"run_id" json:"run_id"`
	RequestID string `msgpack:"request_id" json:"request_id"`
	// OptionID is empty with Error.
	OptionID string `msgpack:"option_id" json:"option_id"`
	Error    *Error `msgpack:"error,omitempty" json:"error,omitempty"`
}

// Checkpoint is a conversation's entry in agentmesh_checkpoints under
// <tenant>.<conversation>: the pin the conversation runs on and the
// adapter's provider-only continuation state, opaque to the mesh.
type Checkpoint struct {
	V       int    `msgpack:"v"`
	Adapter string `msgpack:"adapter"`
	Pin     Pin    `msgpack:"pin"`
	State   []byte `msgpack:"state,omitempty"`
	Updated int64  `msgpack:"updated"`
}

// Consent is a principal's entry in agentmesh_consent under
// <tenant>.<principal>. Its KV revision identifies the decision: a run
// stamps the revision that granted it (RunRecord.ConsentRev).
type Consent struct {
	V         int    `msgpack:"v" json:"v"`
	Tenant    string `msgpack:"tenant" json:"tenant"`
	Principal string `msgpack:"principal" json:"principal"`
	Granted   bool   `msgpack:"granted" json:"granted"`
	// WithdrawnRev is the revision of the principal's last withdrawal, 0
	// if it never withdrew. While withdrawn (Granted false) the last
	// withdrawal is the entry's own revision instead.
	WithdrawnRev uint64 `msgpack:"withdrawn_rev,omitempty" json:"withdrawn_rev,omitempty"`
	Updated      int64  `msgpack:"updated" json:"updated"` // unix ms
}

// ExportRecord is a run's entry in agentmesh_exports under
// <tenant>.<run_id>: where its trajectory's bytes are and until when.
type ExportRecord struct {
	V         int    `msgpack:"v" json:"v"`
	Tenant    string `msgpack:"tenant" json:"tenant"`
	RunID     string `msgpack:"run_id" json:"run_id"`
	Principal string `msgpack:"principal" json:"principal"`
	// Object is the trajectory's name in the store, derived from tenant,
	// run id and SHA256.
	Object string `msgpack:"object" json:"object"`
	SHA256 string `msgpack:"sha256" json:"sha256"` // of the stored bytes, hex
	Size   int64  `msgpack:"size" json:"size"`
	// Stored is false while the exporter writes the bytes: a record that
	// stays unstored (the exporter died) is swept after a grace period.
	Stored bool `msgpack:"stored" json:"stored"`
	// ConsentRev is the consent revision the run was exported under.
	ConsentRev uint64 `msgpack:"consent_rev" json:"consent_rev"`
	Created    int64  `msgpack:"created" json:"created"` // unix ms
	Expires    int64  `msgpack:"expires" json:"expires"` // unix ms; 0 while unstored
}

// RedactionRules is a tenant's entry in agentmesh_redaction under
// <tenant>: the tenant's own redaction rules, applied after the built-in
// detectors to every trajectory of the tenant's runs.
type RedactionRules struct {
	V       int             `msgpack:"v" json:"v"`
	Tenant  string          `msgpack:"tenant" json:"tenant"`
	Rules   []RedactionRule `msgpack:"rules" json:"rules"`
	Updated int64           `msgpack:"updated" json:"updated"` // unix ms
}

// RedactionRule is one named tenant redaction expression.
type RedactionRule struct {
	Name    string `msgpack:"name" json:"name" yaml:"name"`
	Pattern string `msgpack:"pattern" json:"pattern" yaml:"pattern"`
}
