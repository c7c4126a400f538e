// Package adapter defines the boundary every provider adapter implements:
// an immutable capability declaration, strict validation of its typed
// request, the runtime keys it accepts, and one normalized chunk stream.
package adapter

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sort"
	"time"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Call is one attempt of a run as an adapter sees it.
type Call struct {
	RunID string
	// Request is the value Validate returned for the run's request.
	Request any
	// Runtime holds the runtime-only keys the adapter declared.
	Runtime map[string]any
	// SessionID is the session the router injected, if any.
	SessionID string
	// Attempt is 1 for the first attempt.
	Attempt int
	// Model is the pinned model id.
	Model string
	// Checkpoint is the provider-only continuation state the adapter saved
	// at the end of the conversation's last successful run (conversation
	// history, signed reasoning, response ids); nil for a fresh one. It
	// never enters an event.
	Checkpoint []byte
	// CheckpointAt is when Checkpoint was last stored (zero for a fresh
	// conversation): a session's checkpoint is stored again at each turn
	// end, so it is when its agent was last active.
	CheckpointAt time.Time
	// SaveCheckpoint, when set, records the continuation state for the
	// conversation's next run. The runner stores it only if the run
	// succeeds. Adapters without continuation state never call it.
	SaveCheckpoint func(state []byte)
	// MaxAttempts is the run's attempt policy. An adapter whose provider
	// retries on its own (the agent CLIs) maps it onto that retry switch,
	// so the mesh's policy, not a hidden inner loop, bounds the attempts.
	MaxAttempts int
	// Session is the live side of a session run (Interactive adapters
	// only, for a submitter that reads contract v3); nil runs one turn.
	Session *Session
}

// RunModel is the model the call runs on: its pinned Model, else, when the
// run is not pinned, the model the request names (requested), else "". A
// requested model other than a non-empty pinned one is refused with an
// AgenticRequestValidationError of adapter's request naming the field
// "model".
func (c Call) RunModel(adapter, requested string) (string, error) {
	switch {
	case c.Model == "":
		return requested, nil
	case requested != "" && requested != c.Model:
		return "", wire.Errorf(wire.AgenticRequestValidationError, "%s request: field \"model\": %.64q is not the pinned model %.64q", adapter, requested, c.Model)
	}
	return c.Model, nil
}

// Adapter is one provider. Implementations are safe for concurrent use; each
// Stream call owns its own transport resources.
type Adapter interface {
	// Name is the adapter key (the pin's provider and the work subject's last token).
	Name() string
	// Capabilities is the immutable declaration of docs/contract.md §1.4.
	Capabilities() wire.Capabilities
	// RuntimeKeys lists the runtime-only keys the adapter accepts.
	RuntimeKeys() []string
	// Validate decodes the msgpack request strictly into the adapter's typed
	// request. Any problem is a *wire.Error of class
	// AgenticRequestValidationError. It starts nothing.
	Validate(request []byte) (any, error)
	// Stream runs one attempt. It yields chunks in order; a non-nil error is
	// the attempt's failure and the last value yielded. Breaking out of the
	// loop, or ctx ending, tears the transport down before Stream returns.
	// Stream yields no synthetic chunk on cancellation.
	Stream(ctx context.Context, call Call) iter.Seq2[wire.Chunk, error]
}

// Teardown is implemented by an adapter whose transport takes time to tear
// down after its context ends (a subprocess: the kill grace plus the
// stderr drain). A runner hosting it keeps every run's work and lease
// alive through that time, and refuses to start with an ack wait or lease
// TTL that is not above it.
type Teardown interface {
	TeardownBound() time.Duration
}

// TeardownBound is a's Teardown bound, 0 for an adapter that tears down at
// once.
func TeardownBound(a Adapter) time.Duration {
	if t, ok := a.(Teardown); ok {
		return t.TeardownBound()
	}
	return 0
}

// TokenClasses is implemented by an adapter that reports usage: it lists
// the token classes its usage can carry, by the names profiles price them
// under (pkg/ledger/cost: input, output, cache_read, cache_write, reasoning). A
// profile of the adapter must price every one of them. An adapter whose
// declaration says reports_usage false reports no class, whatever it
// implements. The returned slice is the caller's.
type TokenClasses interface {
	TokenClasses() []string
}

// PricedContext is implemented by an adapter whose provider prices a
// request by its size beyond some context (tier pricing): MaxPricedContext
// is the largest context window, in tokens, that one immutable rate per
// token class covers. A profile of the adapter may not advertise a larger
// context_window (docs/contract.md §10.11). 0 means no bound.
type PricedContext interface {
	MaxPricedContext() int
}

// ErrDuplicate is returned by Registry.Add for a second adapter of one name.
var ErrDuplicate = errors.New("duplicate adapter")

// Registry holds the adapters a process serves: one instance per adapter
// name (Get: its declaration, runtime keys and request validation) and,
// when built from profiles, one instance per profile (ForProfile), built
// with that profile's own settings (base URL, credential, binary,
// environment). It is not safe for concurrent mutation; build it at
// startup, then only read it, from any number of goroutines.
type Registry struct {
	m         map[string]Adapter
	profiles  map[string]Adapter
	byAdapter map[string]int // instances per profile of each adapter name
}

// NewRegistry validates and registers the adapters.
func NewRegistry(adapters ...Adapter) (*Registry, error) {
	r := &Registry{m: map[string]Adapter{}, profiles: map[string]Adapter{}, byAdapter: map[string]int{}}
	for _, a := range adapters {
		if err := r.Add(a); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Add validates a's declaration and registers it.
func (r *Registry) Add(a Adapter) error {
	name := a.Name()
	if _, ok := r.m[name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicate, name)
	}
	if err := CheckCapabilities(name, a.Capabilities()); err != nil {
		return err
	}
	r.m[name] = a
	return nil
}

// CheckCapabilities rejects an incomplete or contradictory declaration.
func CheckCapabilities(name string, c wire.Capabilities) error {
	if !c.Transport.Valid() {
		return wire.Errorf(wire.ProfileError, "adapter %s: capabilities: transport %q is not subprocess, in_process or remote", name, c.Transport)
	}
	if c.Resumable != (c.ResumeField != "") {
		return wire.Errorf(wire.ProfileError, "adapter %s: capabilities: resumable=%t contradicts resume_field %q", name, c.Resumable, c.ResumeField)
	}
	return nil
}

// AddProfile validates a's declaration and registers it as the instance
// that runs profile's work. The adapter's name must already be registered
// (Add), with the same declaration: the instance of a profile differs from
// its adapter's only in settings. A second instance for one profile is
// ErrDuplicate.
func (r *Registry) AddProfile(profile string, a Adapter) error {
	name := a.Name()
	if _, ok := r.profiles[profile]; ok {
		return fmt.Errorf("%w: profile %q", ErrDuplicate, profile)
	}
	base, ok := r.m[name]
	if !ok {
		return fmt.Errorf("profile %s: adapter %q is not registered", profile, name)
	}
	if err := CheckCapabilities(name, a.Capabilities()); err != nil {
		return err
	}
	if a.Capabilities() != base.Capabilities() {
		return wire.Errorf(wire.ProfileError, "profile %s: adapter %s's instance declares %+v, its adapter %+v", profile, name, a.Capabilities(), base.Capabilities())
	}
	r.profiles[profile] = a
	r.byAdapter[name]++
	return nil
}

// Get returns the adapter named name: the instance whose declaration,
// runtime keys and validation stand for every profile of that adapter.
func (r *Registry) Get(name string) (Adapter, bool) {
	a, ok := r.m[name]
	return a, ok
}

// ForProfile returns the instance registered for profile (AddProfile).
func (r *Registry) ForProfile(profile string) (Adapter, bool) {
	a, ok := r.profiles[profile]
	return a, ok
}

// ForWork returns the instance that runs work of adapter name for profile,
// and false when no adapter name is registered:
//
//   - the profile's own instance, when the registry holds one of adapter
//     name;
//   - the adapter's instance (Get) for work that names no profile, and for
//     an adapter the registry holds no per-profile instance of (a registry
//     of bare adapters serves every profile alike);
//   - otherwise (a profile this process does not hold, or one of another
//     adapter here) an adapter with name's declaration whose Validate and
//     Stream fail with a non-retryable ProfileError, so the work never
//     runs with another profile's settings.
func (r *Registry) ForWork(name, profile string) (Adapter, bool) {
	base, ok := r.m[name]
	if !ok {
		return nil, false
	}
	if profile == "" || r.byAdapter[name] == 0 {
		return base, true
	}
	if a, ok := r.profiles[profile]; ok && a.Name() == name {
		return a, true
	}
	return notHeld{Adapter: base, profile: profile}, true
}

// notHeld refuses the work of a profile the registry holds no instance of.
type notHeld struct {
	Adapter
	profile string
}

func (n notHeld) err() error {
	return wire.Errorf(wire.ProfileError, "profile %q of adapter %s is not held by this process (its profiles differ from the router's)", n.profile, n.Name())
}

func (n notHeld) Validate([]byte) (any, error) { return nil, n.err() }

func (n notHeld) Stream(context.Context, Call) iter.Seq2[wire.Chunk, error] {
	return func(yield func(wire.Chunk, error) bool) { yield(wire.Chunk{}, n.err()) }
}

// Names returns the registered adapter names, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.m))
	for n := range r.m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// SplitRuntime checks that every key of runtime is one a declared; an
// undeclared key is an AgenticHandlerError.
func SplitRuntime(a Adapter, runtime map[string]any) error {
	allowed := a.RuntimeKeys()
	for k := range runtime {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			return wire.Errorf(wire.AgenticHandlerError, "adapter %s does not accept runtime key %q (accepted: %v)", a.Name(), k, allowed)
		}
	}
	return nil
}
