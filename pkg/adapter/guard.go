package adapter

import "github.com/agentmesh/agentmesh/pkg/wire"

// Guard is the boundary between an adapter's parser and the consumer of
// its Stream: every chunk passes through it, so a parser bug surfaces as a
// ProviderProtocolError ending the stream instead of a stream that breaks
// the contract. The rules it enforces hold for every transport:
//
//   - a chunk's type is one of the seven chunk types;
//   - is_error is true exactly on an error chunk (a tool_result may also
//     carry it);
//   - there is at most one result chunk, and after it at most the error
//     chunk;
//   - the error chunk is the last value: nothing follows it, neither a
//     chunk nor an error;
//   - the stream ends once: a failure (Fail) is the last value, and
//     nothing is yielded after the consumer stopped ranging.
//
// A transport frame adds what only it knows (the CLI frame the child's
// exit, the remote frame the response's end). A Guard is used by one
// stream, from one goroutine.
type Guard struct {
	yield  func(wire.Chunk, error) bool
	result bool
	ended  bool
}

// NewGuard returns the guard of one stream whose consumer is yield (the
// yield function of the Stream's iterator).
func NewGuard(yield func(wire.Chunk, error) bool) *Guard {
	return &Guard{yield: yield}
}

// Emit yields chunks in order and reports whether the stream may go on. It
// returns false, having yielded nothing more, once the stream has ended:
// after an error chunk, after the consumer stopped, after a failure, and
// at a chunk that breaks a rule (the stream's end is then the
// ProviderProtocolError naming it).
func (g *Guard) Emit(chunks ...wire.Chunk) bool {
	for _, c := range chunks {
		if g.ended {
			return false
		}
		switch {
		case !c.Type.Valid():
			return g.Fail(wire.Errorf(wire.ProviderProtocolError, "the adapter produced chunk type %q", c.Type))
		case (c.Type == wire.ChunkError) != c.IsError && c.Type != wire.ChunkToolResult:
			return g.Fail(wire.Errorf(wire.ProviderProtocolError, "the adapter produced a %s chunk with is_error=%t", c.Type, c.IsError))
		case g.result && c.Type != wire.ChunkError:
			return g.Fail(wire.Errorf(wire.ProviderProtocolError, "%s chunk after the result", c.Type))
		}
		if c.Type == wire.ChunkResult {
			g.result = true
		}
		if !g.yield(c, nil) {
			g.ended = true
			return false
		}
		if c.Type == wire.ChunkError {
			g.ended = true // exactly one error chunk, and nothing after it
			return false
		}
	}
	return !g.ended
}

// Fail yields err as the stream's end, unless the stream already ended,
// and returns false (the stream may not go on).
func (g *Guard) Fail(err error) bool {
	if !g.ended {
		g.ended = true
		g.yield(wire.Chunk{}, err)
	}
	return false
}

// Ended reports whether the stream has ended: its error chunk or a
// failure was yielded, a chunk broke a rule, or the consumer stopped.
func (g *Guard) Ended() bool { return g.ended }

// Settled reports whether the stream has yielded its result chunk or
// ended; a stream that stops short of both has told the consumer nothing
// of how the attempt came out.
func (g *Guard) Settled() bool { return g.result || g.ended }
