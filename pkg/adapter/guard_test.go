package adapter_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

var (
	sys     = wire.Chunk{Type: wire.ChunkSystem}
	text    = wire.Chunk{Type: wire.ChunkText, Content: "hi"}
	result  = wire.Chunk{Type: wire.ChunkResult}
	failure = wire.Chunk{Type: wire.ChunkError, Content: "quota", IsError: true}
)

// collect runs emit against a guard whose consumer keeps every value, and
// returns the chunks yielded, the errors yielded and Emit's last answer.
func collect(emit func(g *adapter.Guard) bool) (chunks []wire.Chunk, errs []error, more bool) {
	g := adapter.NewGuard(func(c wire.Chunk, err error) bool {
		if err != nil {
			errs = append(errs, err)
		} else {
			chunks = append(chunks, c)
		}
		return true
	})
	more = emit(g)
	return chunks, errs, more
}

func TestGuardRules(t *testing.T) {
	tests := []struct {
		name     string
		in       []wire.Chunk
		want     []wire.Chunk // what the consumer sees
		wantErr  bool         // the stream ends with a ProviderProtocolError
		wantMore bool
	}{
		{name: "conforming", in: []wire.Chunk{sys, text, result}, want: []wire.Chunk{sys, text, result}, wantMore: true},
		{name: "unknown type", in: []wire.Chunk{sys, {Type: "note"}, text}, want: []wire.Chunk{sys}, wantErr: true},
		{name: "is_error on text", in: []wire.Chunk{{Type: wire.ChunkText, Content: "x", IsError: true}}, wantErr: true},
		{name: "error chunk without is_error", in: []wire.Chunk{{Type: wire.ChunkError, Content: "x"}}, wantErr: true},
		{name: "failed tool result", in: []wire.Chunk{{Type: wire.ChunkToolResult, IsError: true}, result},
			want: []wire.Chunk{{Type: wire.ChunkToolResult, IsError: true}, result}, wantMore: true},
		{name: "text after the result", in: []wire.Chunk{text, result, text}, want: []wire.Chunk{text, result}, wantErr: true},
		{name: "second result", in: []wire.Chunk{result, result}, want: []wire.Chunk{result}, wantErr: true},
		{name: "error chunk after the result", in: []wire.Chunk{result, failure}, want: []wire.Chunk{result, failure}},
		{name: "nothing after the error chunk", in: []wire.Chunk{text, failure, text, failure}, want: []wire.Chunk{text, failure}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, errs, more := collect(func(g *adapter.Guard) bool { return g.Emit(tt.in...) })
			if !slices.EqualFunc(chunks, tt.want, sameChunk) {
				t.Errorf("yielded %v, want %v", chunks, tt.want)
			}
			if more != tt.wantMore {
				t.Errorf("Emit = %t, want %t", more, tt.wantMore)
			}
			switch {
			case !tt.wantErr && len(errs) > 0:
				t.Errorf("errors %v, want none", errs)
			case tt.wantErr && (len(errs) != 1 || !errors.Is(errs[0], wire.ProviderProtocolError)):
				t.Errorf("errors %v, want one ProviderProtocolError", errs)
			}
		})
	}
}

func sameChunk(a, b wire.Chunk) bool {
	return a.Type == b.Type && a.Content == b.Content && a.IsError == b.IsError
}

// TestGuardEndsOnce: a failure is the last value, and a stream that has
// ended (by its error chunk, a failure or the consumer) yields nothing more.
func TestGuardEndsOnce(t *testing.T) {
	boom := wire.Errorf(wire.ProviderTransportError, "cut")
	chunks, errs, _ := collect(func(g *adapter.Guard) bool {
		g.Emit(text)
		g.Fail(boom)
		g.Fail(boom)
		return g.Emit(result)
	})
	if len(chunks) != 1 || len(errs) != 1 || errs[0] != boom {
		t.Errorf("after Fail: chunks %v, errors %v; want one text and the one failure", chunks, errs)
	}
	_, errs, _ = collect(func(g *adapter.Guard) bool {
		g.Emit(failure)
		return g.Fail(boom)
	})
	if len(errs) != 0 {
		t.Errorf("an error %v followed the error chunk", errs)
	}

	var seen int
	g := adapter.NewGuard(func(wire.Chunk, error) bool { seen++; return false })
	if g.Emit(sys, text) || !g.Ended() || g.Fail(boom) || seen != 1 {
		t.Errorf("after the consumer stopped: %d values seen, Ended %t; want 1 and true", seen, g.Ended())
	}
}

func TestGuardSettled(t *testing.T) {
	tests := []struct {
		name string
		in   []wire.Chunk
		want bool
	}{
		{name: "no result", in: []wire.Chunk{sys, text}, want: false},
		{name: "result", in: []wire.Chunk{sys, result}, want: true},
		{name: "error chunk", in: []wire.Chunk{sys, failure}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := adapter.NewGuard(func(wire.Chunk, error) bool { return true })
			g.Emit(tt.in...)
			if got := g.Settled(); got != tt.want {
				t.Errorf("Settled() = %t, want %t", got, tt.want)
			}
		})
	}
}
