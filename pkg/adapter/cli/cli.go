// Package cli turns one agent CLI's grammar into an adapter.Adapter
// on the shared subprocess transport (pkg/adapter/cli/proc): it validates the typed
// request strictly, contains the workspace and file-bearing fields, builds
// the argv and child environment, runs the CLI and feeds every stdout event
// to the CLI's parser, enforcing the chunk stream rules of docs/contract.md §1.3 at the
// boundary. Each CLI's package supplies a Spec; nothing here knows a vendor.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/workspace"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// RuntimeWorkspace is the runtime key that selects the run's workspace,
// relative to the runner's workspace root.
const RuntimeWorkspace = "workspace"

// Parser maps one run's stdout events to chunks. A parser is used by one
// stream only.
type Parser interface {
	// Event maps one event. An unknown content-bearing event is a
	// ProviderProtocolError; allow-listed telemetry maps to no chunk.
	Event(ev map[string]any) ([]wire.Chunk, error)
	// End is called at a clean EOF with exit status 0 and may return the
	// final chunks (a result) or a failure the CLI reported only in-band.
	End() ([]wire.Chunk, error)
}

// LineParser is a Parser with a fast path over the event's own bytes, for
// the shapes a CLI writes most. The adapter hands each stdout object to
// Line first and decodes it into a map for Event only if Line did not take
// it, so a parser gives the same chunks and errors either way.
type LineParser interface {
	Parser
	// Line maps one event given as the bytes of one JSON object, as framed
	// by proc.StreamRaw (not yet known to be valid JSON), or as a whole
	// line of stdout that may hold more than one object or part of one
	// (proc.StreamLines). If handled is false the parser has not changed
	// and the caller decodes the bytes and calls Event; otherwise b is one
	// JSON object followed by whitespace only, as encoding/json reads it,
	// and the chunks and error are Event's for that event. b is valid only
	// during the call; the chunks may be valid only until the next call.
	Line(b []byte) (chunks []wire.Chunk, handled bool, err error)
}

// Invocation is what a CLI's Spec builds for one attempt.
type Invocation struct {
	// Args follow the binary, each its own argv element.
	Args []string
	// Env is set in the child on top of the allow-listed environment
	// (for example a switch that turns the CLI's own retries off).
	Env map[string]string
	// Files are request fields that name paths; each must stay inside the
	// run's workspace.
	Files []string
	// Stderr, if set, is called with each line the CLI writes to stderr
	// (within the transport's kept head, proc.Spec.StderrLine), in order,
	// and must not block. A non-nil error ends the attempt: the CLI is torn
	// down and the error is the stream's terminal error, after any chunk
	// already yielded. For what the CLI reports only on stderr, such as a
	// setting it refused.
	Stderr func(line string) error
	// Cleanup, if set, is called once the attempt is over and its CLI is
	// gone (a per-run directory Invoke made to remove).
	Cleanup func()
}

// Spec is one CLI's grammar.
type Spec[R any] struct {
	Name         string
	Capabilities wire.Capabilities
	// TokenClasses are the token classes the parser's usage can carry
	// (pkg/ledger/cost names), for adapter.TokenClasses; empty when the CLI
	// reports no usage.
	TokenClasses []string
	// Decode validates the msgpack request strictly; any problem is an
	// AgenticRequestValidationError naming the field.
	Decode func(b []byte) (R, error)
	// Invoke builds the argv and environment for one attempt in dir.
	// What it makes for the attempt it removes in Invocation.Cleanup, or
	// itself when it fails.
	Invoke func(req R, call adapter.Call, dir string) (Invocation, error)
	// NewParser returns a parser for one attempt.
	NewParser func(req R, call adapter.Call) Parser
	// TailRepair, Classify: see proc.Spec.
	TailRepair func(tail []byte) (map[string]any, bool)
	Classify   func(code int, stderr string) wire.Class
}

// Config is the operator's side: where the binary is and what the child may see.
type Config struct {
	// Binary is the executable (default: the Spec's Name).
	Binary string
	// InstallHint is shown when the binary is missing.
	InstallHint string
	// EnvAllow names runner environment variables the child may receive.
	EnvAllow []string
	// EnvSet are fixed values for the child (a base URL, a config dir).
	EnvSet map[string]string
	// WorkspaceRoot contains every run's workspace (default ".").
	WorkspaceRoot string
	// Grace before SIGKILL (default proc.DefaultGrace).
	Grace time.Duration
	// StateDir is where each run's process group is recorded while it
	// lives (proc.Spec.StateDir); empty records nothing.
	StateDir string
	// Egress are the endpoints (host:port) the CLI's model API is at by
	// default, for a sandboxed run's policy (SandboxPolicy); BaseURLVars
	// name the child variables that move it (a base URL), StateVars
	// those naming directories the CLI keeps its state in, and
	// ReadOnlyVars those naming files or directories the adapter gives
	// the CLI to read but not change (a settings file).
	Egress, BaseURLVars, StateVars, ReadOnlyVars []string
	// Keys are the provider keys the CLI takes from its environment,
	// which the runner's proxy holds in a confined run's place (Key).
	Keys []Key
	// CredentialFiles are files (a subscription login) bound read-only
	// into every confined run at their own paths; none by default.
	CredentialFiles []string
	// ConfigBaseURLs, if set, reads the base URLs the CLI's own
	// configuration file names (Codex's config.toml, Pi's models.json),
	// finding the file by the child's environment (env, ChildEnv), for
	// SandboxPolicy. A file that is absent names none; one that cannot
	// be read as the CLI reads it is an error.
	ConfigBaseURLs func(env func(name string) (string, bool)) ([]BaseURL, error)
	// LoginFiles, if set, names the files the CLI keeps a login in (a
	// provider credential, such as Codex's auth.json) for the child's
	// environment (env, ChildEnv): a confined run finds each one that is
	// in its state directories empty (sandbox.Policy.LoginFiles), unless
	// CredentialFiles names it.
	LoginFiles func(env func(name string) (string, bool)) []string
	// Confine, if set, confines every run's CLI (a *sandbox.Sandbox).
	Confine proc.Confiner
	// UnreachableAfter, if positive, ends a run whose CLI has reported
	// only that it cannot reach its model API (Notice chunks) for that
	// long: the CLI is torn down and the run fails with
	// ProviderTransportError (profile policy.unreachable_after).
	UnreachableAfter time.Duration
}

// Adapter is a CLI adapter. It is safe for concurrent use.
type Adapter[R any] struct {
	spec Spec[R]
	cfg  Config
}

// New checks the spec's declaration and returns the adapter.
func New[R any](spec Spec[R], cfg Config) (*Adapter[R], error) {
	if spec.Capabilities.Transport != wire.TransportSubprocess {
		return nil, fmt.Errorf("cli adapter %s: transport must be subprocess, got %q", spec.Name, spec.Capabilities.Transport)
	}
	if err := adapter.CheckCapabilities(spec.Name, spec.Capabilities); err != nil {
		return nil, err
	}
	if cfg.Binary == "" {
		cfg.Binary = spec.Name
	}
	if cfg.WorkspaceRoot == "" {
		cfg.WorkspaceRoot = "."
	}
	return &Adapter[R]{spec: spec, cfg: cfg}, nil
}

func (a *Adapter[R]) Name() string                    { return a.spec.Name }
func (a *Adapter[R]) Capabilities() wire.Capabilities { return a.spec.Capabilities }
func (a *Adapter[R]) RuntimeKeys() []string           { return []string{RuntimeWorkspace} }

// TeardownBound is how long tearing a run's CLI down may take: the grace
// between SIGTERM and SIGKILL of its process group, the wait after the
// SIGKILL, and the stderr drain (proc.MaxTeardown).
func (a *Adapter[R]) TeardownBound() time.Duration { return proc.MaxTeardown(a.cfg.Grace) }

// TokenClasses returns the Spec's token classes (adapter.TokenClasses), a
// new slice on every call.
func (a *Adapter[R]) TokenClasses() []string { return slices.Clone(a.spec.TokenClasses) }

// Validate decodes the request strictly; it starts nothing.
func (a *Adapter[R]) Validate(b []byte) (any, error) {
	req, err := a.spec.Decode(b)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// Stream runs the CLI once and yields its normalized chunks. A
// provider-declared failure is yielded as the one error chunk and nothing
// follows it; the child is then torn down.
func (a *Adapter[R]) Stream(ctx context.Context, call adapter.Call) iter.Seq2[wire.Chunk, error] {
	return func(yield func(wire.Chunk, error) bool) {
		req, ok := call.Request.(R)
		if !ok {
			yield(wire.Chunk{}, wire.Errorf(wire.AgenticRequestValidationError, "%s: request is %T, not a validated request", a.spec.Name, call.Request))
			return
		}
		rel, _ := call.Runtime[RuntimeWorkspace].(string)
		if v, present := call.Runtime[RuntimeWorkspace]; present && rel == "" && v != nil {
			yield(wire.Chunk{}, wire.Errorf(wire.AgenticRequestValidationError, "runtime %s must be a string, got %T", RuntimeWorkspace, v))
			return
		}
		dir, err := workspace.Resolve(a.cfg.WorkspaceRoot, rel)
		if err != nil {
			yield(wire.Chunk{}, err)
			return
		}
		inv, err := a.spec.Invoke(req, call, dir)
		if err != nil {
			yield(wire.Chunk{}, wire.AsError(err))
			return
		}
		if inv.Cleanup != nil {
			defer inv.Cleanup()
		}
		for _, f := range inv.Files {
			if _, err := workspace.Contain(dir, f); err != nil {
				yield(wire.Chunk{}, err)
				return
			}
		}
		set := make(map[string]string, len(a.cfg.EnvSet)+len(inv.Env))
		for k, v := range a.cfg.EnvSet {
			set[k] = v
		}
		for k, v := range inv.Env {
			set[k] = v
		}
		ps := proc.Spec{
			Binary: a.cfg.Binary, InstallHint: a.cfg.InstallHint, Args: inv.Args, Dir: dir,
			Env: proc.AllowEnv(a.cfg.EnvAllow, set), TailRepair: a.spec.TailRepair, Classify: a.spec.Classify,
			Grace: a.cfg.Grace, StateDir: a.cfg.StateDir, Confine: a.cfg.Confine,
		}
		if inv.Stderr != nil {
			var refuse context.CancelCauseFunc
			ctx, refuse = context.WithCancelCause(ctx)
			defer refuse(nil)
			// proc ends the child when ctx ends and returns its cause.
			ps.StderrLine = func(line string) {
				if err := inv.Stderr(line); err != nil {
					refuse(wire.AsError(err))
				}
			}
		}
		var r *reach
		if a.cfg.UnreachableAfter > 0 {
			var end context.CancelCauseFunc
			ctx, end = context.WithCancelCause(ctx)
			defer end(nil)
			// proc ends the child when ctx ends and returns its cause.
			r = &reach{name: a.spec.Name, bound: a.cfg.UnreachableAfter, end: end}
			defer r.stop()
		}
		p := a.spec.NewParser(req, call)
		g := adapter.NewGuard(yield) // the stream rules every adapter's chunks obey
		if lp, ok := p.(LineParser); ok {
			a.streamLines(ctx, ps, lp, g, r)
			return
		}
		for ev, err := range proc.Stream(ctx, ps) {
			if err != nil {
				g.Fail(err)
				return
			}
			chunks, err := p.Event(ev)
			r.see(chunks)
			if !g.Emit(chunks...) {
				return
			}
			if err != nil {
				g.Fail(err)
				return
			}
		}
		chunks, err := p.End()
		if g.Emit(chunks...) && err != nil {
			g.Fail(err)
		}
	}
}

// streamLines is Stream's loop for a LineParser (FeedLine): the lines
// Line reads are never framed, the others are framed and fed. An object
// that is not JSON after all ends the stream as proc.Stream would end it:
// the child is torn down, then the protocol error naming its stdout is the
// last value.
func (a *Adapter[R]) streamLines(ctx context.Context, ps proc.Spec, p LineParser, g *adapter.Guard, r *reach) {
	var bad *DecodeError
	for l, err := range proc.StreamLines(ctx, ps) {
		if err != nil {
			g.Fail(err)
			return
		}
		chunks, refused, err := FeedLine(p, l.Bytes, l.Guess)
		if refused {
			l.Refuse()
			continue
		}
		if errors.As(err, &bad) {
			break // proc tears the child down before the loop ends
		}
		r.see(chunks)
		if !g.Emit(chunks...) {
			return
		}
		if err != nil {
			g.Fail(err)
			return
		}
	}
	if bad != nil {
		if ctx.Err() != nil {
			g.Fail(context.Cause(ctx))
		} else {
			g.Fail(proc.ProtocolError(ps.Binary, bad.Err))
		}
		return
	}
	chunks, err := p.End()
	if g.Emit(chunks...) && err != nil {
		g.Fail(err)
	}
}

// A DecodeError is an object on a CLI's stdout that is not JSON after all
// (Feed). Err is encoding/json's error, as proc.Stream would report it.
type DecodeError struct{ Err error }

func (e *DecodeError) Error() string { return "decode stdout object: " + e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// Feed maps one object of a CLI's stdout, as framed by proc.StreamRaw or
// ndjson.Decoder.NextBytes, through p as Stream does: to Line first when p
// is a LineParser, else (or when Line leaves it) decoded into a map for
// Event. Bytes that do not decode give a *DecodeError and reach neither.
// The error is otherwise the parser's. It blocks only as long as p does.
func Feed(p Parser, b []byte) ([]wire.Chunk, error) {
	if lp, ok := p.(LineParser); ok {
		if chunks, handled, err := lp.Line(b); handled {
			return chunks, err
		}
	}
	ev, err := ndjson.DecodeObject(b)
	if err != nil {
		return nil, &DecodeError{Err: err}
	}
	return p.Event(ev)
}

// FeedLine is Feed for what proc.StreamLines yields. A guess (b is a line
// from an object's '{' through its newline, unframed) goes to Line alone:
// Line takes it only if it is one JSON object followed by whitespace only,
// and refused reports that Line left it, p unchanged, for the caller to
// refuse. Anything else is Feed's.
func FeedLine(p LineParser, b []byte, guess bool) (chunks []wire.Chunk, refused bool, err error) {
	if !guess {
		chunks, err = Feed(p, b)
		return chunks, false, err
	}
	chunks, handled, err := p.Line(b)
	return chunks, !handled, err
}

// FeedAll reads a CLI's stdout from dec as Stream reads a child's: a
// LineParser's lines go to Line unframed (ndjson.Decoder.NextLine,
// FeedLine) and only what it leaves is framed (Reframe) and fed; any
// other parser's objects are framed (NextBytes) and fed (Feed). each gets
// what every value gave and says whether to go on. FeedAll returns the
// framing error that ended the stream, or nil at EOF or when each
// stopped; it does not call End.
func FeedAll(p Parser, dec *ndjson.Decoder, each func([]wire.Chunk, error) bool) error {
	lp, lines := p.(LineParser)
	for {
		var b []byte
		var guess bool
		var err error
		if lines {
			b, guess, err = dec.NextLine()
		} else {
			b, err = dec.NextBytes()
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var chunks []wire.Chunk
		if guess {
			var refused bool
			if chunks, refused, err = FeedLine(lp, b, true); refused {
				if b, err = dec.Reframe(); err != nil {
					return err
				}
				chunks, err = Feed(p, b)
			}
		} else {
			chunks, err = Feed(p, b)
		}
		if !each(chunks, err) {
			return nil
		}
	}
}

// AgentCapabilities is the declaration the agent CLIs share: a subprocess
// that emits tool events, reports usage and resumes a session through the
// request field resumeField. It is a new value on every call.
func AgentCapabilities(resumeField string) wire.Capabilities {
	return wire.Capabilities{
		Transport:       wire.TransportSubprocess,
		Resumable:       true,
		EmitsToolEvents: true,
		ReportsUsage:    true,
		ResumeField:     resumeField,
	}
}
