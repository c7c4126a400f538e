package remote

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Emit hands chunks, in order, to the consumer of a remote adapter's
// Stream through the stream rules (adapter.Guard). It returns nil while
// the stream may go on. Any other error ends the attempt, which returns it
// as it is:
//
//   - ctx's cause once the run's context has ended (no chunk is yielded
//     after that, however many the response had buffered; the cause is
//     the stream's end);
//   - ErrEnded once the stream has ended: the error chunk was yielded, a
//     chunk broke a rule (the ProviderProtocolError naming it was the
//     stream's end), or the consumer stopped ranging.
type Emit func(chunks ...wire.Chunk) error

// ErrEnded is what Emit returns once the stream has ended; the frame
// yields nothing after it.
var ErrEnded = errors.New("the stream has ended")

// Spec is one API adapter's side of the remote frame: its declaration, its
// strict request decoding and one attempt. Nothing in the frame knows a
// vendor.
type Spec[R any] struct {
	// Name is the adapter key.
	Name string
	// Declaration is the adapter's whole declaration; its transport is
	// remote.
	Declaration Declaration
	// Decode validates the msgpack request strictly; any problem is an
	// AgenticRequestValidationError naming the field. It starts nothing.
	Decode func(b []byte) (R, error)
	// Attempt runs one attempt of req, a value Decode returned: it sends
	// the request (Do) and emits the response's chunks. Its error is the
	// attempt's failure, yielded as the stream's end unless the stream
	// already ended; it returns what emit returned as soon as emit
	// returns an error. A nil error is a clean end, which must come after
	// the result or the error chunk.
	Attempt func(ctx context.Context, req R, call adapter.Call, emit Emit) error
}

// Adapter is a remote adapter built from a Spec. Its Stream enforces the
// stream rules at the boundary, as the CLI frame does, plus what holds for
// a response: nothing after the run's context ends, and no clean end
// before the result. It is immutable and safe for concurrent use; each
// Stream call owns its own transport resources.
type Adapter[R any] struct {
	declared
	spec Spec[R]
}

var (
	_ adapter.TokenClasses  = (*Adapter[any])(nil)
	_ adapter.PricedContext = (*Adapter[any])(nil)
)

// New checks the spec's declaration and returns the adapter, an
// *Adapter[R]. It starts nothing.
func New[R any](spec Spec[R]) (adapter.Adapter, error) {
	if t := spec.Declaration.Capabilities.Transport; t != wire.TransportRemote {
		return nil, fmt.Errorf("remote adapter %s: transport must be remote, got %q", spec.Name, t)
	}
	if err := adapter.CheckCapabilities(spec.Name, spec.Declaration.Capabilities); err != nil {
		return nil, err
	}
	return &Adapter[R]{declared: declare(spec.Name, spec.Declaration), spec: spec}, nil
}

// Validate decodes the request strictly (Spec.Decode); it starts nothing.
func (a *Adapter[R]) Validate(b []byte) (any, error) { return decoded(a.spec.Decode(b)) }

// decoded is a decoded request as Validate returns it: nil, not a zero R,
// with an error.
func decoded[R any](req R, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return req, nil
}

// Stream runs one attempt (Spec.Attempt) and yields its chunks under the
// stream rules. A call whose request is not one Validate returned fails
// with an AgenticHandlerError before anything is sent. Breaking out of the
// loop, or ctx ending, ends the attempt before Stream returns.
func (a *Adapter[R]) Stream(ctx context.Context, call adapter.Call) iter.Seq2[wire.Chunk, error] {
	return func(yield func(wire.Chunk, error) bool) {
		run(ctx, adapter.NewGuard(yield), func(emit Emit) error {
			req, ok := call.Request.(R)
			if !ok {
				return wire.Errorf(wire.AgenticHandlerError, "%s: the call's request is %T, not a request from Validate", a.name, call.Request)
			}
			return a.spec.Attempt(ctx, req, call, emit)
		})
	}
}

// run runs attempt under the guard g with the remote frame's rules (see
// Emit): ctx's end stops the chunks and is the stream's end, the attempt's
// error is the stream's end unless the stream already ended, and a clean
// end before the result chunk or the error chunk is a ProviderProtocolError
// (or ctx's cause, when ctx ended). It blocks until attempt returns.
func run(ctx context.Context, g *adapter.Guard, attempt func(emit Emit) error) {
	err := attempt(func(chunks ...wire.Chunk) error {
		for _, c := range chunks {
			if g.Ended() {
				return ErrEnded
			}
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if !g.Emit(c) {
				return ErrEnded
			}
		}
		return nil
	})
	switch {
	case g.Ended():
	case err != nil:
		g.Fail(err)
	case ctx.Err() != nil:
		g.Fail(context.Cause(ctx)) // the body may end cleanly when its reader is torn down
	case !g.Settled():
		g.Fail(wire.Errorf(wire.ProviderProtocolError, "the response ended without a result"))
	}
}

// declared is a remote adapter's declaration as the adapter.Adapter
// methods and the optional interfaces give it, for the frame's adapters
// and the Unavailable adapter alike.
type declared struct {
	name string
	decl Declaration
}

func declare(name string, d Declaration) declared {
	d.RuntimeKeys = slices.Clone(d.RuntimeKeys)
	d.TokenClasses = slices.Clone(d.TokenClasses)
	return declared{name: name, decl: d}
}

// Name is the adapter key.
func (d *declared) Name() string { return d.name }

// Capabilities is the declaration's capabilities.
func (d *declared) Capabilities() wire.Capabilities { return d.decl.Capabilities }

// RuntimeKeys returns the declared runtime keys, a new slice on every call.
func (d *declared) RuntimeKeys() []string { return slices.Clone(d.decl.RuntimeKeys) }

// TokenClasses returns the declared token classes (adapter.TokenClasses),
// a new slice on every call.
func (d *declared) TokenClasses() []string { return slices.Clone(d.decl.TokenClasses) }

// MaxPricedContext returns the declared bound (adapter.PricedContext); 0
// is none.
func (d *declared) MaxPricedContext() int { return d.decl.MaxPricedContext }
