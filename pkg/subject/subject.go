// Package subject builds every NATS subject, stream and bucket name of
// agentmesh (docs/contract.md §2), so no call site concatenates them.
//
// A Names value is immutable and safe for concurrent use. The zero value
// gives the default names; Names{Prefix: "acme"} prefixes every subject with
// "acme." and every stream and bucket with "acme_".
package subject

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidToken is returned for a tenant, run id, conversation or principal
// that is not a single subject token of [A-Za-z0-9_-]{1,64}.
var ErrInvalidToken = errors.New("invalid token")

// MaxTokenLen bounds a subject token.
const MaxTokenLen = 64

// ValidToken checks that s is [A-Za-z0-9_-]{1,64}. field names what s is in
// the error.
func ValidToken(field, s string) error {
	if len(s) == 0 || len(s) > MaxTokenLen {
		return fmt.Errorf("%w: %s must be 1 to %d characters of [A-Za-z0-9_-], got %d characters", ErrInvalidToken, field, MaxTokenLen, len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %s %q has %q at %d; allowed are [A-Za-z0-9_-]", ErrInvalidToken, field, s, c, i)
		}
	}
	return nil
}

// Names derives the names of one deployment.
type Names struct {
	// Prefix, when set, is a subject token put before every subject and,
	// with "_", before every stream and bucket name.
	Prefix string
}

func (n Names) subj(s string) string {
	if n.Prefix == "" {
		return s
	}
	return n.Prefix + "." + s
}

func (n Names) res(s string) string {
	if n.Prefix == "" {
		return s
	}
	return n.Prefix + "_" + s
}

// Streams.
func (n Names) SubmitStream() string { return n.res("AGENTMESH_SUBMIT") }
func (n Names) WorkStream() string   { return n.res("AGENTMESH_WORK") }
func (n Names) EventsStream() string { return n.res("AGENTMESH_EVENTS") }

// SubmitAnchorStream is the empty stream the submit stream sources, so
// that it may keep no dedupe window (pkg/topology); SubmitAnchor is its
// subject, which nothing publishes on.
func (n Names) SubmitAnchorStream() string { return n.res("AGENTMESH_SUBMIT_ANCHOR") }
func (n Names) SubmitAnchor() string       { return n.subj("agentmesh.submit-anchor") }

// Buckets and the object store.
func (n Names) RunsBucket() string        { return n.res("agentmesh_runs") }
func (n Names) SessionsBucket() string    { return n.res("agentmesh_sessions") }
func (n Names) CheckpointsBucket() string { return n.res("agentmesh_checkpoints") }
func (n Names) LeasesBucket() string      { return n.res("agentmesh_leases") }
func (n Names) ConsentBucket() string     { return n.res("agentmesh_consent") }
func (n Names) ExportsBucket() string     { return n.res("agentmesh_exports") }
func (n Names) TrajectoryStore() string   { return n.res("agentmesh_trajectories") }
func (n Names) RedactionBucket() string   { return n.res("agentmesh_redaction") }

// APIKeysBucket holds the HTTP gateway's API keys, by the SHA-256 of
// each key (docs/contract.md §2).
func (n Names) APIKeysBucket() string { return n.res("agentmesh_apikeys") }

// TurnsBucket holds the HTTP gateway's map from a conversation's turns
// (an OpenAI-shaped history, a response id) to the mesh conversation
// that holds them (docs/contract.md §2).
func (n Names) TurnsBucket() string { return n.res("agentmesh_turns") }

// ArtifactsBucket holds the records of runs' artifacts, one per
// <tenant>.<run_id>.<name> (pkg/artifacts); ArtifactStore holds their
// bytes.
func (n Names) ArtifactsBucket() string { return n.res("agentmesh_artifacts") }

// ArtifactStore is the object store of runs' artifact bytes, named
// <tenant>/<run_id>/<name>/<sha256> (pkg/artifacts).
func (n Names) ArtifactStore() string { return n.res("agentmesh_artifact_bytes") }

// SnapshotStore is the object store of the workspace snapshots clients
// push, named <tenant>/sha256:<hex> (pkg/artifacts).
func (n Names) SnapshotStore() string { return n.res("agentmesh_snapshots") }

// HeadsBucket holds the head of each conversation, what its next turn
// starts from, by <tenant>.<conversation> (pkg/artifacts).
func (n Names) HeadsBucket() string { return n.res("agentmesh_heads") }

// ConversationsBucket holds each conversation's runs, in the order the
// routers accepted them, by <tenant>.<conversation> (pkg/runs/convlog).
func (n Names) ConversationsBucket() string { return n.res("agentmesh_conversations") }

// ConversationLogGet is the JetStream direct-get subject that answers
// with a conversation's log of runs, under the default API prefix, so a
// tenant's permissions can be confined to its own keys.
func (n Names) ConversationLogGet(tenant, conversation string) string {
	b := n.ConversationsBucket()
	return "$JS.API.DIRECT.GET.KV_" + b + ".$KV." + b + "." + ConversationKey(tenant, conversation)
}

// Submit is where a client publishes a tenant's run requests.
func (n Names) Submit(tenant string) string { return n.subj("agentmesh.submit." + tenant) }

// SubmitAll matches every tenant's submissions.
func (n Names) SubmitAll() string { return n.subj("agentmesh.submit.*") }

// Events is a run's event subject.
func (n Names) Events(tenant, runID string) string {
	return n.subj("agentmesh.events." + tenant + "." + runID)
}

// EventsAll matches every run's events.
func (n Names) EventsAll() string { return n.subj("agentmesh.events.*.*") }

// TenantEvents matches every event subject of one tenant: the widest
// filter a tenant's consumer may have.
func (n Names) TenantEvents(tenant string) string { return n.subj("agentmesh.events." + tenant + ".>") }

// ConsumerCreateProxy is where a tenant's request to create a consumer on
// the events stream, filtered to filter, reaches the router's
// consumer-create proxy (pkg/router/consumerproxy): the account import maps the
// tenant's $JS.<api>.CONSUMER.CREATE.<events>.<consumer>.<filter> here,
// keeping the tokens in order.
func (n Names) ConsumerCreateProxy(tenant, consumer, filter string) string {
	return n.subj("agentmesh.consumers." + tenant + ".create." + consumer + "." + filter)
}

// ConsumerCreateProxyAll matches every ConsumerCreateProxy subject.
func (n Names) ConsumerCreateProxyAll() string { return n.subj("agentmesh.consumers.*.create.*.>") }

// ParseConsumerCreateProxy splits a ConsumerCreateProxy subject into its
// tenant, consumer name and filter (the remaining tokens). ok is false for
// a subject of another shape. The tokens are not validated.
func (n Names) ParseConsumerCreateProxy(s string) (tenant, consumer, filter string, ok bool) {
	rest, ok := strings.CutPrefix(s, n.subj("agentmesh.consumers."))
	if !ok {
		return "", "", "", false
	}
	toks := strings.SplitN(rest, ".", 4)
	if len(toks) != 4 || toks[1] != "create" {
		return "", "", "", false
	}
	return toks[0], toks[2], toks[3], true
}

// ConsumerCreate is JetStream's create API for consumer on stream with one
// filter subject, the form whose subject carries the filter.
func ConsumerCreate(stream, consumer, filter string) string {
	return "$JS.API.CONSUMER.CREATE." + stream + "." + consumer + "." + filter
}

// Work is where the router dispatches one tenant's runs for one adapter.
// The tenant is a token of its own so the work stream can bound each
// tenant's queue per adapter (one tenant's burst never fills another's).
func (n Names) Work(transport, adapter, tenant string) string {
	return n.subj("agentmesh.work." + transport + "." + adapter + "." + tenant)
}

// WorkAdapter matches every tenant's work for one adapter: the filter of
// the adapter's runner pool.
func (n Names) WorkAdapter(transport, adapter string) string {
	return n.subj("agentmesh.work." + transport + "." + adapter + ".*")
}

// WorkAll matches all dispatched work.
func (n Names) WorkAll() string { return n.subj("agentmesh.work.*.*.*") }

// WorkConsumer is the durable consumer shared by an adapter's runner pool.
func (n Names) WorkConsumer(adapter string) string { return "runner-" + adapter }

// RouterConsumer is the durable consumer shared by all routers.
func (n Names) RouterConsumer() string { return "router" }

// Cancel is the request/reply subject that cancels one run.
func (n Names) Cancel(tenant, runID string) string {
	return n.subj("agentmesh.control." + tenant + "." + runID + ".cancel")
}

// CancelAll matches every cancel request.
func (n Names) CancelAll() string { return n.subj("agentmesh.control.*.*.cancel") }

// RunnerCancel is the request/reply subject on which the runner process
// runnerID stops a run it owns; the control responder forwards to it with
// the run's RunKey as the body.
func (n Names) RunnerCancel(runnerID string) string {
	return n.subj("agentmesh.runner." + runnerID + ".cancel")
}

// Input is the request/reply subject that sends a follow-up prompt to a
// session: a live run of an interactive adapter (docs/contract.md §6.1).
func (n Names) Input(tenant, runID string) string {
	return n.subj("agentmesh.control." + tenant + "." + runID + ".input")
}

// InputAll matches every follow-up prompt.
func (n Names) InputAll() string { return n.subj("agentmesh.control.*.*.input") }

// Permission is the request/reply subject that answers a session's
// permission request (docs/contract.md §6.2).
func (n Names) Permission(tenant, runID string) string {
	return n.subj("agentmesh.control." + tenant + "." + runID + ".permission")
}

// PermissionAll matches every permission answer.
func (n Names) PermissionAll() string { return n.subj("agentmesh.control.*.*.permission") }

// RunnerInput and RunnerPermission are where the control responder
// forwards a follow-up prompt and a permission answer to the runner
// process that owns the session.
func (n Names) RunnerInput(runnerID string) string {
	return n.subj("agentmesh.runner." + runnerID + ".input")
}

func (n Names) RunnerPermission(runnerID string) string {
	return n.subj("agentmesh.runner." + runnerID + ".permission")
}

// RunKey is a run's key in the runs, leases and exports buckets, and the
// tenant-scoped identity of a run everywhere else: run ids are unique per
// tenant only.
func RunKey(tenant, runID string) string { return tenant + "." + runID }

// SplitRunKey splits a RunKey into its tenant and run id, checking both
// tokens.
func SplitRunKey(key string) (tenant, runID string, err error) {
	tenant, runID, ok := strings.Cut(key, ".")
	if !ok {
		return "", "", fmt.Errorf("%w: %q is not <tenant>.<run_id>", ErrInvalidToken, key)
	}
	if err := errors.Join(ValidToken("tenant", tenant), ValidToken("run_id", runID)); err != nil {
		return "", "", err
	}
	return tenant, runID, nil
}

// RunMsgID is the Nats-Msg-Id of a run's submission and of its work item:
// <tenant>.<run_id>. JetStream's dedupe window is stream-wide, so the id
// carries the tenant: the same run id in two tenants is two runs.
func RunMsgID(tenant, runID string) string { return RunKey(tenant, runID) }

// FallbackMsgID is the Nats-Msg-Id of the work item of a run that moved
// to its fallback profile: <tenant>.<run_id>.<profile>, one per profile
// the run moves to (docs/contract.md §4.13), so that the move's publish is
// deduplicated and never taken for the run's first work item.
func FallbackMsgID(tenant, runID, profile string) string {
	return RunKey(tenant, runID) + "." + profile
}

// SplitWorkMsgID gives the tenant and run id a work item's Nats-Msg-Id
// names, in either form (RunMsgID, FallbackMsgID).
func SplitWorkMsgID(id string) (tenant, runID string, err error) {
	key := id
	if i := strings.IndexByte(id, '.'); i >= 0 {
		if j := strings.IndexByte(id[i+1:], '.'); j >= 0 {
			if err := ValidToken("profile", id[i+1+j+1:]); err != nil {
				return "", "", err
			}
			key = id[:i+1+j]
		}
	}
	return SplitRunKey(key)
}

// ConversationKey is a conversation's key in the sessions and checkpoints buckets.
func ConversationKey(tenant, conversation string) string { return tenant + "." + conversation }

// EventMsgID is the Nats-Msg-Id of a run's seq-th event:
// <tenant>.<run_id>:<seq>.
func EventMsgID(tenant, runID string, seq uint64) string {
	return tenant + "." + runID + ":" + strconv.FormatUint(seq, 10)
}

// SweeperReconcile is the request/reply subject that makes a sweeper scan
// every run record now; it answers with the number of runs it ended.
func (n Names) SweeperReconcile() string { return n.subj("agentmesh.sweeper.reconcile") }

// ExportsSweep is the request/reply subject that makes a sweeper sweep
// the expired trajectory exports now; it answers when the sweep has
// finished, with its counts.
func (n Names) ExportsSweep() string { return n.subj("agentmesh.exports.sweep") }

// ExporterConsumer is the exporter's durable consumer on the runs
// bucket's stream, shared by every exporter.
func (n Names) ExporterConsumer() string { return "exporter" }

// The spend ledger's and the limits' buckets (docs/contract.md §12).
func (n Names) SpendBucket() string  { return n.res("agentmesh_spend") }
func (n Names) LedgerBucket() string { return n.res("agentmesh_ledger") }
func (n Names) LimitsBucket() string { return n.res("agentmesh_limits") }

// LedgerConsumer is the ledger writers' durable consumer on the runs
// bucket's stream, shared by every router (docs/contract.md §12).
func (n Names) LedgerConsumer() string { return "ledger" }

// SpendKey is an ended run's spend entry's key in the spend bucket:
// <tenant>.<day>.<run_id>.<created>, created being the record's unix ms
// (a run id may be used again once its record expired).
func SpendKey(tenant, day, runID string, created int64) string {
	return tenant + "." + day + "." + runID + "." + strconv.FormatInt(created, 10)
}

// SpendDayFilter is the subject of every spend entry of tenant's day in
// the spend bucket's stream.
func (n Names) SpendDayFilter(tenant, day string) string {
	return "$KV." + n.SpendBucket() + "." + tenant + "." + day + ".>"
}

// RollupKey is a tenant's day's rollup's key in the ledger bucket.
func RollupKey(tenant, day string) string { return tenant + "." + day }

// BudgetKey is a budget's key in the limits bucket: budget.<tenant>, or
// budget.<tenant>.<principal> for a principal's.
func BudgetKey(tenant, principal string) string {
	if principal == "" {
		return "budget." + tenant
	}
	return "budget." + tenant + "." + principal
}

// QuotaKey is a tenant's concurrency quota's key in the limits bucket.
func QuotaKey(tenant string) string { return "quota." + tenant }

// InFlightKey is the key of a tenant's runs admitted under its quota.
func InFlightKey(tenant string) string { return "inflight." + tenant }

// RunRecordGet is the JetStream direct-get subject that answers with a
// run's record (the last value of its key in the runs bucket). Reading a
// record this way needs no stream info, so a tenant's permissions can be
// confined to its own keys.
// LastEventGet is the direct get (last by subject) of a run's last
// event, under the default API prefix.
func (n Names) LastEventGet(tenant, runID string) string {
	return "$JS.API.DIRECT.GET." + n.EventsStream() + "." + n.Events(tenant, runID)
}

func (n Names) RunRecordGet(tenant, runID string) string {
	b := n.RunsBucket()
	return "$JS.API.DIRECT.GET.KV_" + b + ".$KV." + b + "." + RunKey(tenant, runID)
}
